"""What a training run trains and on what: token-budget micro-batches, the frozen and adapted
weights of parameter-efficient runs (LoRA through peft, or the top layers), gradient
checkpointing, the training attention, and the validation split of early stopping."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TYPE_CHECKING

from trainer.training.params import TrainingParams

if TYPE_CHECKING:
    from trainer.training.dataset import Example
    from trainer.training.ml.prm import PRM


def micro_batches(indices: Sequence[int], lengths: Sequence[int], budget: int) -> list[list[int]]:
    """`indices` cut into packed micro-batches of at most `budget` tokens, in order; an example
    longer than the budget goes alone."""
    batches: list[list[int]] = []
    tokens = 0
    for i in indices:
        if batches and tokens + lengths[i] <= budget:
            batches[-1].append(i)
            tokens += lengths[i]
        else:
            batches.append([i])
            tokens = lengths[i]
    return batches


def validation_split(train: list[Example], params: TrainingParams):
    """(train, validation): a share of the training problems, all their examples, held out."""
    problems = sorted({e.problem_id for e in train})
    random.Random(params.seed + 7).shuffle(problems)
    count = min(len(problems) - 1, max(1, round(params.validation_fraction * len(problems))))
    if count < 1:
        raise ValueError("Early stopping needs training examples of at least two problems.")
    held = set(problems[:count])
    return [e for e in train if e.problem_id not in held], [
        e for e in train if e.problem_id in held
    ]


def trainable_name(module, name: str) -> bool:
    parameter = dict(module.named_parameters()).get(name)
    return parameter is None or parameter.requires_grad


def parameter_efficient(prm: PRM, params: TrainingParams, emit) -> bool:
    """Freeze what the run does not train: LoRA adapters (peft) or the top layers and the head.
    True when the backbone was wrapped in LoRA adapters (merged back before the save)."""
    backbone = prm.module.backbone
    if params.lora_rank:
        from peft import LoraConfig, get_peft_model

        config = LoraConfig(
            r=params.lora_rank, lora_alpha=2 * params.lora_rank, target_modules="all-linear"
        )
        prm.module.backbone = get_peft_model(backbone, config)
    elif params.train_top_layers:
        layers = list(getattr(backbone, "layers", ()))
        keep = set(range(max(0, len(layers) - params.train_top_layers), len(layers)))
        for parameter in backbone.parameters():
            parameter.requires_grad_(False)
        for i in keep:
            for parameter in layers[i].parameters():
                parameter.requires_grad_(True)
        norm = getattr(backbone, "norm", None)
        for parameter in norm.parameters() if norm is not None else ():
            parameter.requires_grad_(True)
    else:
        return False
    trainable = sum(p.numel() for p in prm.module.parameters() if p.requires_grad)
    total = sum(p.numel() for p in prm.module.parameters())
    emit({"log": f"Training {trainable:,} of {total:,} weights."})
    return bool(params.lora_rank)


def checkpoint(backbone) -> None:
    # transformers 5 renamed it; both default to the non-reentrant variant here, since the
    # reentrant one breaks DDP's per-parameter gradient hooks (and frozen embeddings).
    enable = getattr(backbone, "activation_checkpointing_enable", None)
    if enable is not None:
        enable({"use_reentrant": False})
    else:
        backbone.gradient_checkpointing_enable({"use_reentrant": False})


def set_attention(backbone, implementation: str) -> None:
    backbone.set_attn_implementation(implementation)
