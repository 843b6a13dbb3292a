"""Every room imports only the rooms below it (docs/architecture.md, "What each may import").

Reads the imports of every module, function-level ones included, so that an arrow the table
does not allow fails here rather than in a circular import months later. Tests and migrations
are left out: a test may drive several rooms, and a migration's dependencies are not imports.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# room -> the rooms (or a room's sub-package) it may import, besides itself.
MAY_IMPORT: dict[str, set[str]] = {
    "core": set(),
    "generators": {"core"},
    "labeling": {"core", "generators"},
    "trainer": {"core", "labeling", "generators"},
    "annotate": {"core", "generators", "labeling", "trainer"},
}
ROOMS = set(MAY_IMPORT)


def room_of(module: str) -> str | None:
    top = module.split(".", 1)[0]
    return top if top in ROOMS else None


def imports_of(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from trainer import pipeline` imports trainer.pipeline: both are counted.
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def modules() -> list[tuple[str, Path]]:
    found = []
    for room in ROOMS:
        for path in sorted((ROOT / room).rglob("*.py")):
            parts = path.relative_to(ROOT).parts
            if "tests" in parts or "migrations" in parts:
                continue
            found.append((room, path))
    return found


def test_every_room_imports_only_the_rooms_below_it():
    wrong = []
    for room, path in modules():
        for module in imports_of(path):
            target = room_of(module)
            if target and target != room and target not in MAY_IMPORT[room]:
                wrong.append(f"{path.relative_to(ROOT)} imports {module}")
    assert not wrong, "arrows the architecture does not allow:\n" + "\n".join(sorted(wrong))


def test_no_two_rooms_import_each_other():
    arrows = {
        (room, target)
        for room, path in modules()
        for module in imports_of(path)
        if (target := room_of(module)) and target != room
    }
    both_ways = sorted({tuple(sorted(pair)) for pair in arrows if pair[::-1] in arrows})
    assert not both_ways, f"rooms that import each other: {both_ways}"


def test_the_check_sees_an_arrow_it_forbids(tmp_path):
    # The reader finds function-level and dotted imports: what the two tests above rely on.
    module = tmp_path / "m.py"
    module.write_text(
        "def f():\n    from labeling.models import Solution\n    import trainer.training.ml.prm\n"
    )
    assert {room_of(m) for m in imports_of(module)} == {"labeling", "trainer"}


def test_a_module_over_about_500_lines_says_why_at_its_top():
    # "About": a module may grow a little past 500 before it must split or say why. Every
    # module of the tree counts, tests and benchmarks too: they are read as often as the app.
    unexplained = []
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT).parts
        if parts[0] in (".venv", "node_modules", "var") or "migrations" in parts:
            continue
        text = path.read_text()
        lines = text.splitlines()
        if len(lines) > 550 and "500 lines" not in (ast.get_docstring(ast.parse(text)) or ""):
            unexplained.append(f"{path.relative_to(ROOT)} ({len(lines)} lines)")
    assert not unexplained, "long modules with no reason at the top: " + ", ".join(unexplained)


# The packages that pull in torch (a second and a gigabyte of memory at import).
TORCH_SIDE = {"torch", "transformers", "peft", "safetensors", "accelerate"}
# Besides trainer/training/ml/: generators/ sits on floor 1, below trainer, so it cannot import
# trainer.training.ml; its local backend (a causal LM that generates) and its GGUF conversion
# load models with transformers themselves, inside the functions that run them.
TORCH_SIDE_ELSEWHERE = {Path("generators/local.py"), Path("generators/local_models.py")}


def test_only_training_ml_imports_torch():
    wrong = []
    for _room, path in modules():
        relative = path.relative_to(ROOT)
        if relative.parts[:3] == ("trainer", "training", "ml") or relative in TORCH_SIDE_ELSEWHERE:
            continue
        for module in imports_of(path):
            if module.split(".", 1)[0] in TORCH_SIDE:
                wrong.append(f"{relative} imports {module}")
    assert not wrong, "torch-side imports outside trainer/training/ml/:\n" + "\n".join(
        sorted(wrong)
    )


# The model side's rooms, packages of the trainer app: each may import these rooms besides
# itself (and the apps below trainer), never the app's own modules. The app's modules (the
# tables' registry, the pipeline, the tasks, the pages) and a room's pages and API (its views,
# api, forms, serializers and urls) are wiring: they may import every room, as a form that
# chains a selection after a sampling run must.
TRAINER_MAY_IMPORT: dict[str, set[str]] = {
    "sampling": set(),
    # Training reads the judge's labels (consensus, the judge label source) by importing them.
    "training": {"sampling", "judging"},
    "scoring": {"training"},
    "selection": {"training", "scoring"},
    "judging": set(),
    "evaluation": {"training", "scoring", "selection", "sampling", "judging"},
}
WIRING = {"views", "api", "forms", "serializers", "urls", "api_urls"}


def trainer_room(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "trainer" or len(parts) < 2:
        return None
    return parts[1]


def test_the_model_sides_rooms_import_only_the_rooms_below_them():
    wrong = []
    for room in TRAINER_MAY_IMPORT:
        for path in sorted((ROOT / "trainer" / room).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if "tests" in parts or parts[-1] in WIRING:
                continue
            for module in imports_of(path):
                target = trainer_room(module)
                if target and target != room and target not in TRAINER_MAY_IMPORT[room]:
                    wrong.append(f"{path.relative_to(ROOT)} imports {module}")
    assert not wrong, "arrows between the model side's rooms:\n" + "\n".join(sorted(wrong))


# The runtime hooks: where a room below needs what a room above computes, the room above
# plugs a function into a registry of the room below from its app's ready(). No import
# shows that arrow, so each is declared here: (the app that plugs it, the registry function).
# A new `register_*` call in an apps.py fails the test below until it is declared.
HOOKS = {
    ("trainer", "register_import_jobs"): "labeling's import jobs run the trainer's public formats",
    ("trainer", "register_sources"): "the quality page compares the label sources' first errors",
    ("trainer", "register_reader"): "the workbench shows the newest judge labels",
}


def runtime_hooks() -> set[tuple[str, str]]:
    found = set()
    for room in ROOMS:
        for path in (ROOT / room).rglob("apps.py"):
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if isinstance(node, ast.Call):
                    name = getattr(node.func, "id", None) or getattr(node.func, "attr", "")
                    if name.startswith("register_"):
                        found.add((room, name))
    return found


def test_every_runtime_hook_is_declared():
    hooks = runtime_hooks()
    assert hooks == set(HOOKS), (
        f"undeclared hooks: {sorted(hooks - set(HOOKS))}; "
        f"declared but gone: {sorted(set(HOOKS) - hooks)}"
    )
