"""Every regular expression runs in linear time (issue 41, item 5): a sweep of the tree.

core/patterns.py owns regular expressions. Here: no module builds one any other way, every
pattern is compiled where its module is defined (so importing the modules finds them all),
Python's backtracking engine runs only what RE2 cannot express, and every pattern is timed on
adversarial strings of 100 kB made from its own characters, words and pairs of characters,
each with and without a character that makes the match fail at the very end.
"""

import ast
import importlib
import time
from pathlib import Path

import pytest
import re2

from core import patterns
from core.tests.cpu_bound import Slow, cpu_bound

ROOT = Path(__file__).resolve().parents[2]
# Tests and benchmarks read the project's own output, not what people or models write.
SKIPPED_PARTS = {".venv", "node_modules", "tests", "migrations", "bench", "var", "static"}
OWNER = ROOT / "core" / "patterns.py"
ENGINES = {"re", "re2", "regex", "sre_compile", "_sre"}
# Seconds of CPU one pattern may take on one 100 kB string: linear patterns take
# milliseconds, a quadratic one minutes.
BOUND_SECONDS = 1.0
SIZE = 100_000


def _app_files() -> list[Path]:
    return sorted(
        path
        for path in ROOT.rglob("*.py")
        if not SKIPPED_PARTS & set(path.relative_to(ROOT).parts)
        and path.name != "conftest.py"
        and path.parent != ROOT
    )


def _module(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def test_no_module_but_the_owner_imports_a_regular_expression_engine():
    found = []
    for path in _app_files():
        if path == OWNER:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module.split(".")[0]]
            elif isinstance(node, ast.Call) and getattr(node.func, "id", "") == "__import__":
                names = [getattr(node.args[0], "value", "") if node.args else ""]
            found += [
                f"{path.relative_to(ROOT)}:{node.lineno} imports {name}"
                for name in names
                if name in ENGINES
            ]
    assert not found, "compile patterns with core.patterns.compile:\n" + "\n".join(found)


def _compile_calls(tree: ast.AST, *, in_function: bool = False):
    """(call, inside a function?) for every `patterns.compile(...)` or imported `compile`."""
    for node in ast.iter_child_nodes(tree):
        inside = in_function or isinstance(
            node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
        )
        if isinstance(node, ast.Call):
            func = node.func
            if (
                isinstance(func, ast.Attribute)
                and func.attr == "compile"
                and getattr(func.value, "id", "") == "patterns"
            ):
                yield node, inside
        yield from _compile_calls(node, in_function=inside)


def test_every_pattern_is_compiled_where_its_module_is_defined():
    # A pattern built inside a function would escape the timing below (and be compiled again
    # on every call): patterns are module constants.
    inside = [
        f"{path.relative_to(ROOT)}:{call.lineno}"
        for path in _app_files()
        for call, in_function in _compile_calls(ast.parse(path.read_text(), str(path)))
        if in_function
    ]
    assert not inside, "compile these at module level:\n" + "\n".join(inside)


@pytest.fixture(scope="module")
def registered() -> list[patterns.Registered]:
    calls = 0
    for path in _app_files():
        calls += sum(1 for _ in _compile_calls(ast.parse(path.read_text(), str(path))))
        importlib.import_module(_module(path))
    # Each call site registered once (a module imported twice under two names would not be).
    found = {(r.module, r.pattern, r.flags) for r in patterns.REGISTERED}
    assert len(found) >= calls > 0, (len(found), calls)
    return list({(r.module, r.pattern, r.flags): r for r in patterns.REGISTERED}.values())


def test_python_s_engine_runs_only_what_re2_cannot_express(registered):
    movable = []
    for r in registered:
        if not r.backtracking:
            continue
        try:
            patterns.on_re2(r.pattern, r.flags)
        except re2.error:
            continue
        movable.append(f"{r.module}: {r.pattern[:80]!r}")
    assert not movable, "RE2 runs these: drop `backtracking=`\n" + "\n".join(movable)


def _atoms(pattern: str) -> list[str]:
    """Characters a pattern's text suggests: its literals, one of each class, and a few that
    LaTeX and Markdown replies are made of."""
    classes = {"d": "7", "s": " ", "w": "a", "S": "x", "D": "x", "W": "!", "n": "\n", "t": "\t"}
    atoms = set(" 7a\n\\{}$().,-*#")
    escaped = False
    for ch in pattern:
        if escaped:
            atoms.add(classes.get(ch, ch))
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch.isprintable():
            atoms.add(ch)
    return sorted(atoms)


def adversarial(pattern: str, size: int = SIZE) -> list[str]:
    """Strings of `size` characters a backtracking engine can take quadratic or worse time on:
    one character repeated, two alternating, a word of the pattern repeated (with and without
    spaces), each also ending in a character that fails the match at the very end."""
    atoms = _atoms(pattern)
    units = list(atoms)
    units += [pattern[i : i + 2] for i in range(len(pattern) - 1) if pattern[i] != "\\"]
    words = {w for w in "".join(c if c.isalpha() else " " for c in pattern).split() if len(w) > 1}
    units += sorted(words) + [f"{w} " for w in sorted(words)] + ["7 ", "a ", " \n", "\\\\"]
    strings = []
    for unit in dict.fromkeys(units):
        body = unit * (size // len(unit))
        strings += [body, body[:-1] + "\x00"]
    return strings


def _slowest(compiled, strings: list[str], *, scan: bool = True) -> tuple[float, str]:
    """The most CPU seconds a search (and with `scan`, a full scan of the matches) takes on
    one string."""
    worst = (0.0, "")
    for text in strings:
        started = time.process_time()
        try:
            with cpu_bound(BOUND_SECONDS):
                compiled.search(text)
                for _ in compiled.finditer(text) if scan else ():
                    pass
        except Slow:
            return (float("inf"), text)
        worst = max(worst, (time.process_time() - started, text))
    return worst


def _timed(
    registered, *, backtracking: bool, sample: int | None = None, scan: bool = True
) -> list[str]:
    slow = []
    for r in registered:
        if bool(r.backtracking) != backtracking:
            continue
        strings = adversarial(r.pattern)
        if sample:
            strings = strings[:: max(1, len(strings) // sample)]
        seconds, text = _slowest(r.compiled, strings, scan=scan)
        if seconds > BOUND_SECONDS / 2:
            slow.append(f"{r.module} {r.pattern[:70]!r}: {seconds:.2f} s on {text[:12]!r}…")
    return slow


def test_patterns_on_python_s_engine_are_linear_on_adversarial_text(registered):
    slow = _timed(registered, backtracking=True)
    assert not slow, "\n".join(slow)


def test_patterns_on_re2_take_milliseconds_on_100_kb(registered):
    # RE2 is linear by construction; this checks the way stepwise calls it (a few strings each).
    # A search only: the wrapper costs microseconds per match, so a scan of 100,000 one-
    # character matches takes half a second however linear it is.
    slow = _timed(registered, backtracking=False, sample=6, scan=False)
    assert not slow, "\n".join(slow)


def test_the_sweep_catches_a_super_linear_pattern():
    # The check itself bites: a pattern that backtracks on a run of spaces is caught, on RE2
    # the same pattern is not.
    nested = r"^(\s*\w+\s*)+:$"
    seconds, _ = _slowest(patterns.re.compile(nested), adversarial(nested, 20_000))
    assert seconds == float("inf")
    seconds, _ = _slowest(patterns.on_re2(nested), adversarial(nested, 20_000))
    assert seconds < BOUND_SECONDS / 2


def test_re2_semantics_that_the_project_relies_on():
    compiled = patterns.compile(r"(\d+)\s*(?P<unit>cm|mm)", patterns.IGNORECASE)
    match = compiled.search("a 12 CM line")
    assert match.group(1) == "12" and match["unit"] == "CM" and match.span() == (2, 7)
    assert compiled.sub(r"<\1 \g<unit>>", "3mm or 4 cm") == "<3 mm> or <4 cm>"
    assert compiled.sub(lambda m: m[1] * 2, "5cm") == "55"
    assert patterns.compile(r"^\w+$", patterns.MULTILINE).findall("ab\ncd") == ["ab", "cd"]
    assert patterns.compile(r"a.b", patterns.DOTALL).fullmatch("a\nb")
    with pytest.raises(re2.error):
        patterns.compile(r"x(?!y)")
    with pytest.raises(ValueError, match="VERBOSE"):
        patterns.compile(r"x", patterns.re.VERBOSE)
