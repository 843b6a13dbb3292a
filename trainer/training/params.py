"""Training parameters, defined once.

`TrainingParams` is the one definition: the data filters a run trains on, the loop's
settings, the scoring rule its model version keeps, and its limits. The web form
(`trainer.forms.TrainingRunForm`), the API's validation, `manage.py train_prm`'s options and
the stored `TrainingRun.params` are all derived from it (`core.params`), so a parameter
added here appears everywhere, checked the same way. Each value is checked where the run is
requested (`requested`) and again on the worker that reads the stored run (`from_dict`).
This module imports no torch: the web process reads it to draw a form.
"""

from dataclasses import dataclass, replace
from typing import Any

from core import aggregation
from core.errors import Invalid
from core.params import Params, param, refused
from trainer.training import label_sources
from trainer.training.base_models import BaseModelRefused, check_base_model

SCHEDULES = ("cosine", "linear", "constant")
# Solution score from step scores: the names of the one registry, core.aggregation.
AGGREGATIONS = tuple(aggregation.AGGREGATIONS)
ROLLOUT_ESTIMATES = ("hard", "soft")
# How a run on several processes (settings.PRM_TRAIN_PROCESSES) spreads the model: a whole
# copy per process (DDP), or sharded across them (FSDP), for backbones one device cannot hold.
DISTRIBUTED = ("ddp", "fsdp")


class InvalidParams(Invalid, ValueError):
    """A training parameter that is unknown, of the wrong type or out of range.

    Also a ValueError: the loop, which benches and the simulation call without Django, refuses
    a bad parameter as any library would."""


@dataclass(frozen=True)
class TrainingParams(Params):
    invalid = InvalidParams
    noun = "training parameter"

    # Which submitted labels the run trains on.
    include_quality_control: bool = param(True, label="Include quality-control sessions")
    include_screening: bool = param(False, label="Include screening sessions")
    # Generation numbers are stored in a 32-bit column; screening is -1.
    generation_min: int | None = param(None, label="From generation", low=-1, high=2**31 - 1)
    generation_max: int | None = param(None, label="To generation", low=-1, high=2**31 - 1)
    label_source: str = param(
        "human",
        label="Label source",
        help="Where the run's step labels come from: "
        + "; ".join(f"{s.name}, {s.trains.help}" for s in label_sources.all_sources() if s.trains)
        + ".",
        # The registry's, read each time: a source registered later is offered too.
        choices=label_sources.training_choices,
    )
    consensus_sources: str = param(
        "rollout,judge",
        label="Consensus sources",
        help="With label source consensus: the machine sources that must agree on a step "
        "(at least two of them deciding it, or the one chosen), comma-separated.",
        choices=label_sources.consensus_choices,
    )
    rollout_estimate: str = param(
        "hard",
        label="Rollout estimate",
        help="hard: +1 when some rollout reached the answer, else -1 (cut after the first -1); "
        "soft: the share that reached it, as the target p(+1), on every step.",
        choices=ROLLOUT_ESTIMATES,
    )
    rollout_weight: float = param(
        1.0,
        label="Rollout weight",
        help="Weight of rollout examples in the loss beside human ones (human examples weigh 1).",
        low=0,
        high=10,
        low_open=True,
    )
    rollout_run: int | None = param(
        None,
        label="Rollout sampling run",
        help="Use this sampling run's rollout labels; empty for each solution's latest.",
        low=1,
        high=2**63 - 1,
    )
    # The loop.
    epochs: int = param(3, label="Epochs", low=1, high=1000)
    learning_rate: float = param(3e-4, label="Learning rate", low=0, high=1, low_open=True)
    batch_size: int = param(
        16,
        label="Batch size",
        help="Examples per optimizer step; they are fed in micro-batches of at most the token "
        "budget, and the loss is their mean whatever the micro-batching.",
        low=1,
        high=4096,
    )
    max_tokens_per_micro_batch: int = param(
        4096,
        label="Tokens per micro-batch",
        help="Token budget of one forward and backward pass (padding included on the CPU): "
        "what the activations' memory grows with. An example longer than it goes alone.",
        low=64,
        high=2**20,
    )
    grad_accum: int = param(
        1,
        label="Gradient accumulation",
        help="Optimizer steps take batch_size times this many examples (kept for runs recorded "
        "before the token budget decided the micro-batches).",
        low=1,
        high=1024,
        form=False,
    )
    warmup_ratio: float = param(
        0.1,
        label="Warmup ratio",
        help="Share of the steps spent warming up.",
        low=0,
        high=1,
        form=False,
    )
    schedule: str = param("cosine", label="Learning-rate schedule", choices=SCHEDULES)
    max_grad_norm: float = param(
        1.0, label="Gradient clipping norm", help="0 turns clipping off.", low=0, form=False
    )
    seed: int = param(0, label="Seed", low=0, high=2**31 - 1, form=False)
    eval_fraction: float = param(
        0.1,
        label="Held-out share",
        help="Share of problems held out for the metrics.",
        low=0,
        high=1,
        low_open=True,
        high_open=True,
        form=False,
    )
    distributed: str = param(
        "ddp",
        label="Several processes",
        help="On several processes (PRM_TRAIN_PROCESSES): ddp keeps a whole copy of the model "
        "in each; fsdp shards it across them, for backbones one device cannot hold.",
        choices=DISTRIBUTED,
        form=False,
    )
    gradient_checkpointing: bool = param(
        True,
        label="Gradient checkpointing",
        help="Recompute the backbone's activations in the backward pass: a fraction of the "
        "memory for about a third more compute.",
        form=False,
    )
    lora_rank: int = param(
        0,
        label="LoRA rank",
        help="Train low-rank adapters of this rank (peft) and the head instead of every weight, "
        "for small label sets and small machines; 0 trains every weight.",
        low=0,
        high=1024,
    )
    train_top_layers: int = param(
        0,
        label="Train top layers",
        help="Train only the top N decoder layers and the head (the rest frozen); 0 trains all.",
        low=0,
        high=1024,
        form=False,
    )
    early_stopping_patience: int = param(
        0,
        label="Early-stopping patience",
        help="Hold out a validation share of the training problems and stop after this many "
        "epochs without a better validation loss, keeping the best epoch's weights; 0 is off.",
        low=0,
        high=1000,
    )
    validation_fraction: float = param(
        0.1,
        label="Validation share",
        help="Share of the training problems held out for early stopping (with a patience).",
        low=0,
        high=1,
        low_open=True,
        high_open=True,
        form=False,
    )
    warm_start: bool = param(
        False,
        label="Start from the active model",
        help="Train on from the active model version's weights (trained on the same base model) "
        "instead of a fresh model: a retrain keeps what the last one learned, so more labels do "
        "not come out worse by the luck of a fresh start. Without an active version it starts "
        "fresh.",
        form=False,
    )
    # The scoring rule the model version keeps.
    neutral_as_positive: bool = param(
        True, label="Neutral counts as positive", help="Step score p(+1) + p(0), else p(+1)."
    )
    aggregation: str = param("product", label="Solution score", choices=AGGREGATIONS)
    # Limits and backbone.
    max_minutes: float | None = param(
        None,
        label="Max minutes",
        help="Stop training after this long (optional).",
        low=0,
        low_open=True,
    )
    base_model: str | None = param(
        None,
        label="Base model",
        help="The name of a recorded checkpoint model (its files come from the artifact "
        "store), or the absolute path of a Hugging Face checkpoint directory inside "
        "PRM_MODEL_DIR (a recorded model's path is stored as its name, any other is looked "
        "for on the GPU worker); empty for the configured default (PRM_BASE_MODEL or the tiny "
        "built-in model).",
    )

    def __post_init__(self) -> None:
        if isinstance(self.consensus_sources, str):
            # Any order and spacing names the same set: "judge, rollout" is "rollout,judge".
            named = {name.strip() for name in self.consensus_sources.split(",")}
            ordered = label_sources.ordered_machine_names(self.consensus_sources)
            if named == set(ordered):
                object.__setattr__(self, "consensus_sources", ",".join(ordered))
        super().__post_init__()
        low, high = self.generation_min, self.generation_max
        if low is not None and high is not None and low > high:
            raise refused(InvalidParams, None, "generation_min is above generation_max.")
        if self.lora_rank and self.train_top_layers:
            raise refused(
                InvalidParams, "lora_rank", "Choose LoRA or training the top layers, not both."
            )

    @classmethod
    def requested(cls, values: "dict[str, Any] | TrainingParams | None") -> "TrainingParams":
        """The parameters a person asks for (the form, the API, `manage.py train_prm`, the
        schedule): checked, and a recorded model named in base_model by its path made its
        name, which any host resolves (from the artifact store). The worker reads them back
        with `from_dict` and resolves base_model on its own host
        (`trainer.training.base_models.resolve_base_model`)."""
        params = values if isinstance(values, cls) else cls.from_dict(values)
        if params.base_model is None:
            return params
        try:
            return replace(params, base_model=check_base_model(params.base_model))
        except BaseModelRefused as exc:
            raise refused(InvalidParams, "base_model", str(exc)) from None

    @property
    def max_seconds(self) -> float | None:
        return self.max_minutes * 60 if self.max_minutes else None
