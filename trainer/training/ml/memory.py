"""Memory of a training run: its estimated peak before it starts, and its measured peak.

The estimate is what the process holds when it is made (measured: the runtime, the data and
the weights, loaded by then; on CUDA the weights and RUNTIME_BYTES for the context) + the
optimizer's state of the trainable weights (fp32 gradients, AdamW's two moments, and the
working copy its step makes) + the activations of one micro-batch of
`max_tokens_per_micro_batch` tokens. Activations grow with the token budget: with gradient
checkpointing each decoder layer keeps its input and the recomputation's working set for its
backward pass; attention is torch's fused sdpa (`trainer.training.ml.attention`), which keeps
no tokens² matrices.

The constants are measured, not derived: SmolLM2-135M trained on the CPU for two optimizer
steps (the second step's peak is the steady one: AdamW's moments exist, then the activations
come) on micro-batches of 2,000 and 4,000 tokens peaked at 3.86 and 5.20 GiB in a fresh
process; the per-token cost is the difference over the tokens (about 0.7 MB a token, 1.6
times what counting the layer's vectors gives), and the rest is held + optimizer (docs/
benchmarks.md, "Training memory").
"""

import os
import resource
from dataclasses import dataclass

import torch

GB = 1024**3
RUNTIME_BYTES = int(0.6 * GB)  # on CUDA: the context, beside what the host process holds
# Hidden-sized fp32 vectors per token and layer, and whole layers' worth recomputed at once,
# fitted to the measured peaks above (the layer's own count is 4 and 3).
CHECKPOINTED_LAYER_VECTORS = 8
RECOMPUTED_LAYERS = 3
OPTIMIZER_COPIES = 4  # gradients, AdamW's two moments, and its step's working copy


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
            ("runtime and data", self.runtime),
        )
        return f"{gib(self.total)} ({', '.join(f'{name} {gib(n)}' for name, n in parts)})"


def gib(n: int | float) -> str:
    return f"{n / GB:.1f} GiB"


def estimate_peak(
    *, module: torch.nn.Module, tokens: int, checkpointing: bool, held: int | None = None
) -> Estimate:
    """The estimated peak of training `module` on micro-batches of `tokens` tokens. `held`:
    what the process holds now, the weights included (`resident_bytes()` on the CPU); without
    it, the weights and RUNTIME_BYTES."""
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
    weights = 4 * total
    runtime = RUNTIME_BYTES if held is None else max(0, held - weights)
    return Estimate(
        weights=weights,
        optimizer=OPTIMIZER_COPIES * 4 * trainable,
        activations=tokens * per_token,
        runtime=runtime,
    )


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


def resident_bytes() -> int | None:
    """This process's resident memory now (VmRSS), None where /proc does not say."""
    return _status("VmRSS:")


def reset_peak() -> None:
    """Start measuring this process's peak afresh: a worker process that scored a pool or
    trained before would otherwise report that older, higher peak as this run's (Linux keeps the
    high-water mark for the process's life; writing 5 to clear_refs resets it)."""
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as clear:
            clear.write("5")
    except OSError:
        pass  # not Linux, or not allowed: the lifetime peak stands, an overestimate


def peak_memory() -> dict:
    """This process's peak resident memory since `reset_peak` and, on CUDA, peak allocated GPU
    memory (bytes)."""
    rss = _status("VmHWM:")
    if rss is None:
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # kilobytes on Linux
    cuda = torch.cuda.max_memory_allocated() if torch.cuda.is_available() else None
    return {"peak_rss_bytes": rss, "peak_cuda_bytes": cuda}


def _status(key: str) -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith(key):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None
