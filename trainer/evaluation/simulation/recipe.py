"""The simulation's recipe: how every simulated retrain trains and every simulated selection
selects, as the product's own parameter sets (`TrainingParams`, `SelectionParams`) with the
simulation's overrides of their defaults, written here and nowhere else.

The product's defaults are tuned for a pretrained backbone on real labels; the simulation
trains the tiny built-in model from fresh weights on the synthetic domain (`domain`), which
wants other values (each override says why). A figure in docs/training.md or
docs/label-sources.md was measured with these values: change one and the figures change.

`Retraining` holds the recipe's knobs a run may change (`simulate --epochs ...`), `Common` what
every mode of the simulation takes alike (the labelers' noise, the test set, best-of-N); the
modes' own parameter sets (`loop.SimulationConfig`, `rollouts_vs_humans.LabelSourcesConfig`,
`triage.TriageConfig`) extend it, and `simulate`'s options are derived from them.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from core.errors import Invalid
from core.params import Params, like, names, param
from trainer.evaluation.simulation.pool import SimulationRefused
from trainer.selection import strategies
from trainer.selection.services import SelectionParams
from trainer.training.params import TrainingParams

# Overrides of TrainingParams' defaults, for every PRM and ORM the simulation trains.
TRAINING: dict[str, Any] = {
    # The tiny model from fresh weights: at the product's 3e-4 (a pretrained backbone's rate)
    # it barely moves in 8 epochs; 3e-3 learns the domain in minutes (the calibration table).
    "learning_rate": 3e-3,
    # Twice the product's 16: calibrated together with the rate above (the tiny model's steps
    # are cheap, and a larger batch steadies the higher rate).
    "batch_size": 32,
    # The calibration table's 8 against the product's 3: a few thousand labels of a model from
    # fresh weights are still being learned after 3 passes (a pretrained backbone's are not).
    "epochs": 8,
    # No wall-clock limit (as the product's default): a limit cuts a run short by how busy the
    # machine is, so the same seed would give a different model on a loaded machine (and a
    # larger label count, whose run is longer, is cut more: issue 20's "more labels, worse PRM").
    "max_minutes": None,
}
# The loop's recorded retrains (`loop.retrain`), on top of TRAINING.
LOOP_TRAINING: dict[str, Any] = {
    # The run's own held-out share of labeled problems: the simulation measures on its own
    # test set, so the run keeps more of the few labels for training than the product's 10%.
    "eval_fraction": 0.05,
    # Each retrain starts from the active model version. From scratch, the tiny model's step
    # AUROC on the same 1,500 labels spreads 0.82-0.89 over initial weights, more than 500 more
    # labels add: a retrain could come out worse (`simulate --from-scratch` for the old way).
    "warm_start": True,
}
# Training outside the database (calibration, label sources, triage), on top of TRAINING: the
# shorter warmup calibration found (the loop's retrains and the ORM keep the product's 0.1).
OFFLINE_TRAINING: dict[str, Any] = {"warmup_ratio": 0.05}

# Overrides of SelectionParams' defaults (its SELECTION_* settings) for the loop's selections:
# fixed values, so a simulation's figures do not depend on the machine's environment.
SELECTION: dict[str, Any] = {
    "per_problem_cap": 4,
    "wrong_share": 0.8,
    # Each solution labeled once: the simulated labelers' agreement is known, not measured.
    "overlap_share": 0.0,
}

# The seeds a comparison over seeds runs by default (`--compare`, `--label-sources`, `--triage`).
SEEDS = (0, 1, 2)


class InvalidSimulation(SimulationRefused, Invalid):
    """A simulation parameter that is unknown, of the wrong type or out of range (refused as the
    simulation refuses anything, and as a bad parameter)."""


def _knob(name: str) -> Any:
    """TrainingParams' field `name` (its label, help and bounds) with the simulation's default."""
    return like(TrainingParams, name, default=TRAINING[name])


def selection_field(name: str, *, default: Any = None) -> Any:
    """SelectionParams' field `name` (label, help, bounds) with the simulation's fixed default:
    SELECTION's, or `default` (a mode's own)."""
    value = SELECTION[name] if default is None else default
    return like(SelectionParams, name, setting="", default=value)


@dataclass(frozen=True)
class Retraining(Params):
    """The recipe's knobs a run may change; everything else is the recipe's."""

    invalid = InvalidSimulation
    noun = "simulation parameter"

    epochs: int = _knob("epochs")
    learning_rate: float = _knob("learning_rate")
    batch_size: int = _knob("batch_size")
    max_minutes: float | None = _knob("max_minutes")


@dataclass(frozen=True)
class Common(Retraining):
    """What every mode takes alike; a mode may give a field another default (`like`)."""

    noise: float = param(
        0.05,
        label="Labeler noise",
        help="Per step, a labeler's rating is a random wrong one.",
        low=0,
        high=1,
    )
    test_problems: int = param(
        100, label="Test problems", help="Problems no labeler sees, for the evaluation.", low=1
    )
    test_samples: int = param(
        128, label="Test samples", help="Samples of each test problem.", low=1
    )
    best_of: tuple[int, ...] = param(
        (1, 4, 16, 64), label="Best-of-N", help="The N of best-of-N.", low=1
    )
    trials: int = param(200, label="Trials", help="Draws per N for best-of-N.", low=1)


def knobs(config: Retraining) -> dict[str, Any]:
    """The recipe's knobs as `config` sets them."""
    return {name: getattr(config, name) for name in names(Retraining)}


# --- the sets every retrain and selection uses ---------------------------------------------------


def loop_training(config: Retraining, *, seed: int, warm_start: bool) -> TrainingParams:
    """A recorded retrain of the loop (`loop.retrain`)."""
    given = {**knobs(config), "warm_start": warm_start}
    return TrainingParams(**{**TRAINING, **LOOP_TRAINING, **given}, seed=seed)


def orm_training(config: Retraining, *, seed: int) -> TrainingParams:
    """The ORM baseline's: the PRM's recipe, from fresh weights, on final-answer labels."""
    return TrainingParams(**{**TRAINING, **knobs(config)}, seed=seed)


def offline_training(config: Retraining | None = None, *, seed: int) -> TrainingParams:
    """Calibration's, the label sources' and triage's (no database, no recorded run)."""
    given = knobs(config) if config is not None else {}
    return TrainingParams(**{**TRAINING, **OFFLINE_TRAINING, **given}, seed=seed)


def selection(
    *,
    strategy: str,
    batch_size: int,
    seed: int,
    quality_control_count: int = 0,
    **changes: Any,
) -> SelectionParams:
    """A simulated selection's parameters: SELECTION, then `changes` (a mode's own cap and
    wrong-answer share); the ensemble's size and dropout are the product's defaults."""
    return SelectionParams(
        **{**SELECTION, **changes},
        strategy=strategy,
        batch_size=batch_size,
        quality_control_count=quality_control_count,
        seed=seed,
    )


def pick(
    candidates: Sequence[strategies.Candidate], params: SelectionParams
) -> list[strategies.Pick]:
    """The batch `params`' strategy picks from in-memory candidates (the product's registry)."""
    arguments = ("batch_size", "per_problem_cap", "wrong_share", "seed")
    return strategies.STRATEGIES[params.strategy](
        candidates, **{name: getattr(params, name) for name in arguments}
    )
