"""Training parameters, defined once.

`TrainingParams` is the one definition: the data filters a run trains on, the loop's
settings, the scoring rule its model version keeps, and its limits. The web form
(`trainer.forms.TrainingRunForm`), the API's validation and the stored `TrainingRun.params`
are all derived from it, so a parameter added here appears everywhere, checked the same way.
This module imports no torch: the web process reads it to draw a form.
"""

import math
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from typing import Any

from annotate.errors import Invalid
from trainer.base_models import BaseModelRefused, check_base_model

SCHEDULES = ("cosine", "linear", "constant")
# Solution score from step scores; trainer.prm.AGGREGATIONS implements each of these.
AGGREGATIONS = ("product", "min", "last")
# Which labels a run trains on (trainer.dataset.build_training_examples): human ratings,
# rollout labels (trainer.rollouts), or both, each solution giving one example of each.
LABEL_SOURCES = ("human", "rollout", "both")
ROLLOUT_ESTIMATES = ("hard", "soft")
# How a run on several processes (settings.PRM_TRAIN_PROCESSES) spreads the model: a whole
# copy per process (DDP), or sharded across them (FSDP), for backbones one device cannot hold.
DISTRIBUTED = ("ddp", "fsdp")


class InvalidParams(Invalid):
    """A training parameter that is unknown, of the wrong type or out of range."""


def _param(
    default: Any,
    *,
    label: str,
    help: str = "",
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
    choices: tuple[str, ...] = (),
    form: bool = True,
) -> Any:
    """A dataclass field with what the form and the validation need to know about it.

    `low`/`high` bound the value (inclusive, unless `low_open`/`high_open`); `form=False` keeps a
    rarely changed parameter off the web form (the API and the command line still take it).
    """
    meta = {"label": label, "help": help, "low": low, "high": high, "low_open": low_open}
    meta["high_open"] = high_open
    meta.update(choices=choices, form=form)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class TrainingParams:
    # Which submitted labels the run trains on.
    include_quality_control: bool = _param(True, label="Include quality-control sessions")
    include_screening: bool = _param(False, label="Include screening sessions")
    # Generation numbers are stored in a 32-bit column; screening is -1.
    generation_min: int | None = _param(None, label="From generation", low=-1, high=2**31 - 1)
    generation_max: int | None = _param(None, label="To generation", low=-1, high=2**31 - 1)
    label_source: str = _param(
        "human",
        label="Label source",
        help="Human ratings, rollout labels (Math-Shepherd estimates), or both.",
        choices=LABEL_SOURCES,
    )
    rollout_estimate: str = _param(
        "hard",
        label="Rollout estimate",
        help="hard: +1 when some rollout reached the answer, else -1 (cut after the first -1); "
        "soft: the share that reached it, as the target p(+1), on every step.",
        choices=ROLLOUT_ESTIMATES,
    )
    rollout_weight: float = _param(
        1.0,
        label="Rollout weight",
        help="Weight of rollout examples in the loss beside human ones (human examples weigh 1).",
        low=0,
        high=10,
        low_open=True,
    )
    rollout_run: int | None = _param(
        None,
        label="Rollout sampling run",
        help="Use this sampling run's rollout labels; empty for each solution's latest.",
        low=1,
        high=2**63 - 1,
    )
    # The loop.
    epochs: int = _param(3, label="Epochs", low=1, high=1000)
    learning_rate: float = _param(3e-4, label="Learning rate", low=0, high=1, low_open=True)
    batch_size: int = _param(16, label="Batch size", low=1, high=4096)
    grad_accum: int = _param(
        1,
        label="Gradient accumulation",
        help="Micro-batches per optimizer step.",
        low=1,
        high=1024,
        form=False,
    )
    warmup_ratio: float = _param(
        0.1,
        label="Warmup ratio",
        help="Share of the steps spent warming up.",
        low=0,
        high=1,
        form=False,
    )
    schedule: str = _param("cosine", label="Learning-rate schedule", choices=SCHEDULES)
    max_grad_norm: float = _param(
        1.0, label="Gradient clipping norm", help="0 turns clipping off.", low=0, form=False
    )
    seed: int = _param(0, label="Seed", low=0, high=2**31 - 1, form=False)
    eval_fraction: float = _param(
        0.1,
        label="Held-out share",
        help="Share of problems held out for the metrics.",
        low=0,
        high=1,
        low_open=True,
        high_open=True,
        form=False,
    )
    distributed: str = _param(
        "ddp",
        label="Several processes",
        help="On several processes (PRM_TRAIN_PROCESSES): ddp keeps a whole copy of the model "
        "in each; fsdp shards it across them, for backbones one device cannot hold.",
        choices=DISTRIBUTED,
        form=False,
    )
    gradient_checkpointing: bool = _param(
        False,
        label="Gradient checkpointing",
        help="Recompute the backbone's activations in the backward pass: less memory for "
        "about a third more compute.",
        form=False,
    )
    warm_start: bool = _param(
        False,
        label="Start from the active model",
        help="Train on from the active model version's weights (trained on the same base model) "
        "instead of a fresh model: a retrain keeps what the last one learned, so more labels do "
        "not come out worse by the luck of a fresh start. Without an active version it starts "
        "fresh.",
        form=False,
    )
    # The scoring rule the model version keeps.
    neutral_as_positive: bool = _param(
        True, label="Neutral counts as positive", help="Step score p(+1) + p(0), else p(+1)."
    )
    aggregation: str = _param("product", label="Solution score", choices=AGGREGATIONS)
    # Limits and backbone.
    max_minutes: float | None = _param(
        None,
        label="Max minutes",
        help="Stop training after this long (optional).",
        low=0,
        low_open=True,
    )
    base_model: str | None = _param(
        None,
        label="Base model",
        help="The name of a recorded checkpoint model, or the absolute path of a Hugging Face "
        "checkpoint directory inside PRM_MODEL_DIR on the GPU worker; empty for the "
        "configured default (PRM_BASE_MODEL or the tiny built-in model).",
    )

    @classmethod
    def from_dict(cls, values: dict[str, Any] | None) -> "TrainingParams":
        """Every parameter checked, defaults filled in; InvalidParams names the first bad one.

        None (or an empty string) means the default. Types are strict: a JSON `true` is not
        an epoch count and "nan" is not a learning rate.
        """
        values = dict(values or {})
        unknown = set(values) - {f.name for f in fields(cls)}
        if unknown:
            raise InvalidParams(f"Unknown training parameter(s): {', '.join(sorted(unknown))}.")
        cleaned = {}
        for f in fields(cls):
            value = values.get(f.name)
            if value is None or value == "":
                continue
            cleaned[f.name] = _checked(f.name, value, kind=value_type(f), meta=f.metadata)
        params = cls(**cleaned)
        if params.base_model is not None:
            try:
                # A recorded model's name becomes its directory's path.
                params = replace(params, base_model=check_base_model(params.base_model))
            except BaseModelRefused as exc:
                raise InvalidParams(str(exc)) from None
        low, high = params.generation_min, params.generation_max
        if low is not None and high is not None and low > high:
            raise InvalidParams("generation_min is above generation_max.")
        return params

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def max_seconds(self) -> float | None:
        return self.max_minutes * 60 if self.max_minutes else None


def value_type(f) -> type:
    """The value type of a field whose annotation may be `X | None`."""
    kind = f.type if isinstance(f.type, type) else None
    if kind is None:
        name = str(f.type).split("|")[0].strip()
        kind = {"bool": bool, "int": int, "float": float, "str": str}[name]
    return kind


def default_of(f) -> Any:
    return None if f.default is MISSING else f.default


def _shown(bound: float) -> str:
    return f"{bound:,}" if isinstance(bound, int) else f"{bound:g}"


def _checked(name: str, value: Any, *, kind: type, meta) -> Any:
    if kind is bool:
        if not isinstance(value, bool):
            raise InvalidParams(f"{name} must be true or false.")
        return value
    if kind is str:
        if not isinstance(value, str):
            raise InvalidParams(f"{name} must be a string.")
        value = value.strip()
        if meta["choices"] and value not in meta["choices"]:
            raise InvalidParams(f"{name} must be one of {', '.join(meta['choices'])}.")
        return value or None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidParams(f"{name} must be a number.")
    if kind is int:
        if isinstance(value, float) and not value.is_integer():
            raise InvalidParams(f"{name} must be a whole number.")
        value = int(value)
    else:
        value = float(value)
        if not math.isfinite(value):
            raise InvalidParams(f"{name} must be a finite number.")
    low, high = meta["low"], meta["high"]
    if low is not None and (value < low or (meta["low_open"] and value == low)):
        above = "above" if meta["low_open"] else "at least"
        raise InvalidParams(f"{name} must be {above} {_shown(low)}.")
    if high is not None and (value > high or (meta["high_open"] and value == high)):
        below = "below" if meta["high_open"] else "at most"
        raise InvalidParams(f"{name} must be {below} {_shown(high)}.")
    return value
