"""The simulation's recipe is written once (`trainer/evaluation/simulation/recipe.py`): every
simulated retrain and selection is the product's parameter set with its overrides, and
`manage.py simulate` takes every parameter of every mode as an option derived from its set."""

import ast
from dataclasses import fields
from pathlib import Path

import pytest

from core.params import given_options, names, option
from trainer.evaluation.simulation import loop, recipe, rollouts_vs_humans, triage
from trainer.management.commands.simulate import CONFIGS
from trainer.management.commands.simulate import Command as SimulateCommand
from trainer.training.params import TrainingParams

SIMULATION = Path(loop.__file__).parent
# Every training hyperparameter: not the seed, which every mode draws its own way, nor the
# backbone (every simulated PRM is the tiny built-in model: `train_prm(base_model=None)`).
SWEPT = {f.name for f in fields(TrainingParams)} - {"seed", "base_model"}
# Calls whose `batch_size` is a scoring or a database batch, not a training one.
NOT_TRAINING = {"score", "member_step_scores", "bulk_update", "bulk_create"}


def _literal(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Constant) and not isinstance(n.value, str) for n in ast.walk(node))


def written_training_literals(source: str) -> list[str]:
    """Where `source` binds a training parameter to a literal: a dict entry, a keyword, an
    assignment or a field, or a parameter's default."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        bound: list[tuple[str, ast.AST]] = []
        if isinstance(node, ast.Dict):
            bound = [
                (key.value, value)
                for key, value in zip(node.keys, node.values, strict=True)
                if isinstance(key, ast.Constant) and isinstance(key.value, str)
            ]
        elif isinstance(node, ast.Call):
            func = node.func
            callee = getattr(func, "attr", None) or getattr(func, "id", "")
            if callee not in NOT_TRAINING:
                bound = [(k.arg, k.value) for k in node.keywords if k.arg]
        elif isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            bound = [
                (getattr(t, "id", None) or getattr(t, "attr", ""), node.value) for t in targets
            ]
        elif isinstance(node, ast.FunctionDef):
            arguments = node.args
            positional = arguments.posonlyargs + arguments.args
            with_default = positional[len(positional) - len(arguments.defaults) :]
            bound = [(a.arg, d) for a, d in zip(with_default, arguments.defaults, strict=True)]
            bound += [
                (a.arg, d)
                for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True)
                if d is not None
            ]
        found += [
            f"line {value.lineno}: {name}"
            for name, value in bound
            if name in SWEPT and _literal(value)
        ]
    return found


def test_no_simulation_module_but_the_recipe_writes_a_training_parameter():
    modules = sorted(SIMULATION.glob("*.py"))
    assert Path(recipe.__file__) in modules
    written = {
        path.name: found
        for path in modules
        if path.name != "recipe.py"
        and (found := written_training_literals(path.read_text(encoding="utf-8")))
    }
    assert written == {}
    # The sweep sees each way of writing one (the old loop's field, calibration's dict).
    seen = written_training_literals(
        "class C:\n    epochs: int = 8\n"
        "P = {'learning_rate': 3e-3}\n"
        "def f(*, batch_size: int = 32): return g(max_minutes=None)\n"
    )
    assert len(seen) == 4
    assert written_training_literals((SIMULATION / "recipe.py").read_text(encoding="utf-8"))


def test_every_retrain_is_the_products_parameters_with_the_documented_recipe():
    config = loop.SimulationConfig()
    # The values every published figure was measured with (docs/training.md, label-sources.md).
    assert recipe.loop_training(config, seed=3, warm_start=True) == TrainingParams(
        epochs=8,
        learning_rate=3e-3,
        batch_size=32,
        max_minutes=None,
        seed=3,
        eval_fraction=0.05,
        warm_start=True,
    )
    assert recipe.orm_training(config, seed=3) == TrainingParams(
        epochs=8, learning_rate=3e-3, batch_size=32, max_minutes=None, seed=3
    )
    offline = dict(epochs=8, learning_rate=3e-3, batch_size=32, warmup_ratio=0.05, seed=1)
    for config in (rollouts_vs_humans.LabelSourcesConfig(), triage.TriageConfig()):
        assert recipe.offline_training(config, seed=1) == TrainingParams(**offline)
    # A knob a run changes reaches the run; the rest stays the recipe's.
    changed = recipe.loop_training(
        loop.SimulationConfig(epochs=2, learning_rate=1e-3), seed=0, warm_start=False
    )
    assert (changed.epochs, changed.learning_rate, changed.batch_size) == (2, 1e-3, 32)
    assert not changed.warm_start and changed.eval_fraction == 0.05


def test_every_simulated_selection_is_the_products_selection_parameters(settings):
    settings.SELECTION_PER_PROBLEM_CAP = 1  # the environment does not reach the simulation
    settings.SELECTION_OVERLAP_SHARE = 0.5
    config = loop.SimulationConfig()
    params = recipe.selection(
        strategy=config.strategy,
        batch_size=config.labels_per_generation,
        per_problem_cap=config.per_problem_cap,
        wrong_share=config.wrong_share,
        seed=7,
    )
    assert (params.per_problem_cap, params.wrong_share, params.overlap_share) == (4, 0.8, 0.0)
    assert (params.strategy, params.batch_size, params.seed) == ("convincing_wrong_answer", 500, 7)
    assert triage.TriageConfig().wrong_share == 0.75


def _parsed(*argv: str) -> dict:
    return vars(SimulateCommand().create_parser("manage.py", "simulate").parse_args(argv))


def test_every_parameter_of_every_mode_is_an_option_of_simulate():
    parser = SimulateCommand().create_parser("manage.py", "simulate")
    shown = parser.format_help()
    destinations = {action.dest for action in parser._actions}
    for config in CONFIGS:
        missing = [name for name in names(config) if name not in destinations]
        assert missing == [], config.__name__
        assert [n for n in names(config) if option(n) not in shown] == [], config.__name__
    # The spellings the docs and the tests use still work.
    for spelling in ("--ls-test-problems", "--from-scratch", "--no-orm", "--best-of"):
        assert spelling in shown


def test_an_option_left_out_takes_each_modes_own_default():
    options = _parsed("--triage")
    built = triage.TriageConfig(**given_options(triage.TriageConfig, options))
    assert built == triage.TriageConfig()
    # What `simulate --triage` ran before its options were derived, so its figures hold.
    assert (built.per_problem_cap, built.trials, built.best_of) == (4, 200, (1, 4, 16, 64))
    assert (built.test_problems, built.test_samples) == (60, 64)
    options = _parsed("--ls-test-problems", "7", "--seeds", "4,5", "--best-of", "1,4")
    sources = rollouts_vs_humans.LabelSourcesConfig(
        **given_options(rollouts_vs_humans.LabelSourcesConfig, options)
    )
    assert (sources.test_problems, sources.seeds, sources.best_of) == (7, (4, 5), (1, 4))
    options = _parsed("--from-scratch", "--no-orm", "--strategy", "uniform")
    simulation = loop.SimulationConfig(**given_options(loop.SimulationConfig, options))
    assert (simulation.warm_start, simulation.orm, simulation.strategy) == (False, False, "uniform")
    assert simulation.test_problems == 100


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--best-of", "1,x"], "best_of takes comma-separated whole numbers"),
        (["--strategy", "psychic"], "strategy must be one of"),
        (["--noise", "2"], "noise must be between 0 and 1"),
        (["--quality-control", "200", "--labels-per-generation", "300"], "whole first generation"),
    ],
)
def test_a_bad_option_is_refused_in_the_sets_words(argv, message):
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match=message):
        call_command("simulate", *argv)
