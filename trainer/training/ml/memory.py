"""Memory of a training run: its estimated peak before it starts, and its measured peak.

The estimate is weights + gradients + AdamW's two moments (fp32, gradients and moments of the
trainable weights only) + activations of one micro-batch of `max_tokens_per_micro_batch` tokens
+ the runtime itself. Activations are what grows with the token budget: per token and decoder
layer a Llama-shaped layer keeps about 11 hidden-sized and 4 intermediate-sized fp32 vectors
for its backward pass. With gradient checkpointing it keeps each layer's input (plus the
recomputation's working set of about three layers' worth); attention is torch's fused sdpa
(`trainer.training.ml.attention`), which keeps no tokens² matrices. The constants were measured
on SmolLM2-135M on the CPU (2,000-token rows) and err on the high side.
"""

import os
import resource
from dataclasses import dataclass

import torch

GB = 1024**3
RUNTIME_BYTES = int(0.6 * GB)  # torch, transformers, the tokenizer and the data
CHECKPOINTED_LAYER_VECTORS = 4  # hidden-sized fp32 vectors kept per token and layer
RECOMPUTED_LAYERS = 3


class MemoryRefused(ValueError):
    """The run's estimated peak is above the memory the worker may use; nothing was trained."""


@dataclass(frozen=True)
class Estimate:
    weights: int
    optimizer: int  # gradients and AdamW's moments of the trainable weights
    activations: int
    runtime: int = RUNTIME_BYTES

    @property
    def total(self) -> int:
        return self.weights + self.optimizer + self.activations + self.runtime

    def describe(self) -> str:
        parts = (
            ("weights", self.weights),
            ("gradients and optimizer", self.optimizer),
            ("activations", self.activations),
            ("runtime", self.runtime),
        )
        return f"{gib(self.total)} ({', '.join(f'{name} {gib(n)}' for name, n in parts)})"


def gib(n: int | float) -> str:
    return f"{n / GB:.1f} GiB"


def estimate_peak(*, module: torch.nn.Module, tokens: int, checkpointing: bool) -> Estimate:
    """The estimated peak of training `module` on micro-batches of `tokens` tokens."""
    total = sum(p.numel() for p in module.parameters())
    trainable = sum(p.numel() for p in module.parameters() if p.requires_grad)
    config = module.backbone.config
    hidden = config.hidden_size
    layers = config.num_hidden_layers
    intermediate = getattr(config, "intermediate_size", 4 * hidden)
    layer = 4 * (11 * hidden + 4 * intermediate)  # bytes per token of one layer, whole
    if checkpointing:
        per_token = layers * hidden * 4 * CHECKPOINTED_LAYER_VECTORS + RECOMPUTED_LAYERS * layer
    else:
        per_token = layers * layer
    return Estimate(weights=4 * total, optimizer=3 * 4 * trainable, activations=tokens * per_token)


def available_bytes() -> int:
    """Memory the machine can give a new process now (MemAvailable), or its total RAM."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def check_fits(estimate: Estimate, *, limit: int, tokens: int, lora: bool) -> None:
    """Refuse, saying what would fit, when the estimate is above `limit` bytes."""
    if estimate.total <= limit:
        return
    spare = limit - (estimate.total - estimate.activations)
    per_token = estimate.activations / max(1, tokens)
    hints = []
    if spare > 0 and per_token:
        hints.append(f"max_tokens_per_micro_batch {max(64, int(spare / per_token) // 64 * 64)}")
    if not lora:
        hints.append(
            "LoRA (lora_rank 8), which needs no gradients or optimizer state for the "
            "backbone's weights"
        )
    hints.append("a smaller base model, or a worker with more memory (PRM_TRAIN_MEMORY_GB)")
    raise MemoryRefused(
        f"This run would need about {estimate.describe()}, above the {gib(limit)} this worker "
        f"may use. Try {'; or '.join(hints)}."
    )


def peak_memory() -> dict:
    """This process's peak resident memory and, on CUDA, peak allocated GPU memory (bytes)."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # kilobytes on Linux
    cuda = torch.cuda.max_memory_allocated() if torch.cuda.is_available() else None
    return {"peak_rss_bytes": rss, "peak_cuda_bytes": cuda}
