"""The PRM training loop, top to bottom: data, model, optimizer, steps, held-out metrics, save.
Over 500 lines because the loop is one function read in order (its schedule, time limit, cancel
and early stop touch the same variables); its helpers sit below it.

No library trainer supports PRMs any more (TRL and OpenRLHF removed theirs), so the loop is
ours, on torch + transformers schedules + accelerate (device placement, bf16 autocast, and
multi-GPU when started with `accelerate launch`). An optimizer step takes `batch_size` examples
(times the legacy `grad_accum`), cut into micro-batches of at most `max_tokens_per_micro_batch`
tokens: what activations' memory grows with. Each micro-batch is one padding-free packed row
(position ids restart per example) under `trainer.training.ml.attention.VARLEN`, so attention is
torch's fused causal kernel per example and keeps no tokens² matrix, on the CPU as on CUDA. Each
micro-batch's mean loss is weighted by its share of the step's labelled tags (of their weight),
so the step's gradient is that of one batch of all its examples, however it was cut.

Examples may carry soft targets (rollout labels' soft estimate) and a weight (rollout examples
beside human ones): then the loss is `trainer.training.ml.prm.soft_loss`, a weighted mean
cross-entropy against each step's target distribution. Hard examples of weight 1 alone take the
plain mean cross-entropy, exactly as before those existed.

The loop reads no database: it trains on the examples it is given and scores the best-of-N
problems it is given (`trainer.training.dataset` builds both), so it runs the same in a worker, a
bench, the simulation or a rank of a process group (`trainer.training.ml.distributed`).

In a process group every rank holds all the examples and takes its share of each optimizer
step's examples, in its own micro-batches (as many on every rank). Each rank's loss is scaled by
its share of the global number of labelled step tags (of the global weight, for weighted or soft
examples), times the world size, so that the gradient DDP (or FSDP) averages is exactly the
one-process gradient; the global count is known on every rank, since every rank has the data.
Stop and time-limit decisions are agreed by all ranks at each step; held-out metrics and the
save are rank 0's, and the others wait.
"""

from __future__ import annotations

import contextlib
import math
import random
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from trainer.training import metrics as m
from trainer.training.ml import tuning
from trainer.training.ml.attention import VARLEN, register
from trainer.training.ml.memory import (
    available_bytes,
    check_fits,
    estimate_peak,
    gib,
    peak_memory,
    reset_peak,
    resident_bytes,
)
from trainer.training.ml.prm import (
    IGNORE,
    NOT_SOFT,
    PRM,
    PRMModule,
    PRMSettings,
    configure_threads,
    pack,
    solution_score,
)
from trainer.training.params import TrainingParams

if TYPE_CHECKING:
    # Types only: trainer.training.dataset reads the ORM, and the loop must not need Django.
    from trainer.training.dataset import BestOfNProblem, Example

WEIGHT_DECAY = 0.01
EVAL_BATCH_SIZE = 32
# Under a time limit, the schedule is planned again once this many steps show the speed.
REPLAN_AFTER_STEPS = 3


@dataclass
class TrainResult:
    checkpoint_dir: Path
    epochs: list[dict] = field(default_factory=list)  # {"epoch": n, **metrics} per epoch
    final_metrics: dict = field(default_factory=dict)
    peak_memory: dict = field(default_factory=dict)  # memory.peak_memory() at the end


class TrainingCancelled(Exception):
    """should_stop() said stop; nothing was written."""


def train_prm(
    *,
    train: list[Example],
    eval: list[Example],
    params: TrainingParams,
    base_model: str | None,
    out_dir: Path,
    on_progress: Callable[[dict], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    best_of_n_problems: Sequence[BestOfNProblem] = (),
    prm: PRM | None = None,
    memory_limit: int | None = None,
) -> TrainResult:
    """Train a PRM on `train`, evaluate on `eval` each epoch, write it to `out_dir`.

    `out_dir` must not exist; it is written (atomically) only when training completes or
    reaches `params.max_seconds`. `should_stop` is asked at every optimizer step. The
    held-out metrics include best-of-N over `best_of_n_problems`
    (`trainer.training.dataset.best_of_n_problems` of the held-out examples); without them its
    metrics are None.

    Of `params`, the data filters and `base_model` are the caller's business (they chose
    `train`, `eval` and the `base_model` argument); the loop reads the rest. `prm` is the
    PRM to start from (`build_prm`), for the ranks of a process group, which must all start from
    the same one, or a checkpoint to train on from (a warm start); without it the loop builds it.
    In a process group (started by `trainer.training.ml.distributed`) every rank calls this with
    the same arguments; rank 0's result holds the metrics.

    Before the first step a single process estimates its peak memory
    (`trainer.training.ml.memory`) and refuses with MemoryRefused when it is above
    `memory_limit` bytes (default: the memory available now; on CUDA, the GPU's free memory).
    """
    from accelerate import Accelerator

    out_dir = Path(out_dir)
    if out_dir.exists():
        raise FileExistsError(f"{out_dir} already exists.")
    if not train:
        raise ValueError("No training examples.")
    emit = on_progress or (lambda event: None)
    stop = should_stop or (lambda: False)
    started = time.monotonic()
    configure_threads()
    random.seed(params.seed)
    torch.manual_seed(params.seed)

    cuda = torch.cuda.is_available()
    reset_peak()  # this run's peak, not the worker process's since it started
    accelerator = Accelerator(cpu=not cuda, mixed_precision="bf16" if cuda else "no")
    world, rank = accelerator.num_processes, accelerator.process_index
    sharded = world > 1 and params.distributed == "fsdp"
    if prm is None:
        emit({"log": f"Building the PRM ({base_model or 'built-in tiny backbone'})."})
        prm = build_prm(params=params, base_model=base_model, examples=[*train, *eval])
    else:
        # A model to start from (a rank's, or a warm start's) scores by this run's rule.
        prm.settings = PRMSettings(
            neutral_as_positive=params.neutral_as_positive, aggregation=params.aggregation
        )
    validation: list[Example] = []
    if params.early_stopping_patience:
        train, validation = tuning.validation_split(train, params)
        emit({"log": f"Early stopping on {len(validation)} validation examples."})
    encoded = prm.encode_many(
        [e.problem for e in train], [e.steps for e in train], [e.labels for e in train]
    )
    weighted = any(e.targets is not None or e.weight != 1.0 for e in train)
    extras = [_extras(row, e) for row, e in zip(encoded, train, strict=True)] if weighted else []
    # What each example adds to the denominator of the loss's mean: its labelled tags, each
    # counted with the example's weight when the loss is weighted.
    norms = [
        sum(label != IGNORE for label in row.labels) * (e.weight if weighted else 1.0)
        for row, e in zip(encoded, train, strict=True)
    ]
    lengths = [len(row.input_ids) for row in encoded]
    # Examples per optimizer step; how they are cut into micro-batches is the token budget's.
    step_size = max(1, params.batch_size) * max(1, params.grad_accum)
    budget = params.max_tokens_per_micro_batch
    updates_per_epoch = math.ceil(len(encoded) / step_size)
    total_steps = params.epochs * updates_per_epoch

    lora = tuning.parameter_efficient(prm, params, emit)
    if params.gradient_checkpointing:
        tuning.checkpoint(prm.module.backbone)
    # Packed rows under varlen attention: each example attends to itself through torch's
    # fused causal sdpa (or CUDA's varlen kernel), so no tokens² matrix is kept and no token is
    # padding.
    tuning.set_attention(prm.module.backbone, register())
    if world == 1:
        estimate = estimate_peak(
            module=prm.module,
            tokens=max(max(lengths), min(budget, sum(sorted(lengths)[-step_size:]))),
            checkpointing=params.gradient_checkpointing,
            held=None if cuda else resident_bytes(),
        )
        # What this process holds is already out of what the machine has available.
        limit = memory_limit or (
            torch.cuda.mem_get_info()[0] if cuda else available_bytes() + (resident_bytes() or 0)
        )
        emit(
            {
                "log": f"Estimated peak memory {estimate.describe()}; {gib(limit)} may be used.",
                "estimated_peak_bytes": estimate.total,
            }
        )
        check_fits(estimate, limit=limit, tokens=budget, lora=bool(lora))
    if sharded:
        _shard(prm.module)
    trainable = [p for p in prm.module.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=params.learning_rate, weight_decay=WEIGHT_DECAY)
    scheduler = _scheduler(params, optimizer, total_steps)
    unwrapped_optimizer = optimizer  # a re-planned schedule is built on it, as this one was
    if sharded:
        model = prm.module  # fully_shard wrapped it in place
    else:
        model, optimizer = accelerator.prepare(prm.module, optimizer)
    where = (
        f"{world} processes ({params.distributed}, {accelerator.device.type})"
        if world > 1
        else str(accelerator.device)
    )
    emit(
        {
            "log": f"{len(train)} training examples, {len(eval)} held out; "
            f"{total_steps} optimizer steps of {step_size} examples in micro-batches of at most "
            f"{budget} tokens on {where}{' (bf16)' if cuda else ' (fp32)'}."
        }
    )

    # Held-out metrics are measured against human labels when there are some: they are what
    # a rollout-trained PRM is meant to approach.
    held_out = [e for e in eval if e.source == "human"] or list(eval)
    eval_batch = max(1, min(EVAL_BATCH_SIZE, 4 * budget // max(lengths)))
    epochs: list[dict] = []
    step = 0
    out_of_time = False
    # The steps the schedule is planned for: all of them, until the time limit is seen to
    # allow fewer (`steps_the_time_allows`); then warmup and decay fit the steps that run.
    planned = total_steps
    loop_started = time.monotonic()
    best: tuple[float, int, dict] | None = None  # validation loss, epoch, weights
    for epoch in range(1, params.epochs + 1):
        model.train()
        order = list(range(len(encoded)))
        random.Random(params.seed * 1_000_003 + epoch).shuffle(order)
        losses: list[float] = []
        for group_start in range(0, len(order), step_size):
            group = order[group_start : group_start + step_size]
            total = sum(norms[i] for i in group)
            plans = [tuning.micro_batches(group[r::world], lengths, budget) for r in range(world)]
            # Every rank runs as many passes (FSDP's collectives pair them up); a rank with
            # fewer repeats a pass at weight 0.
            passes = max(len(plan) for plan in plans)
            mine = plans[rank] + [[]] * (passes - len(plans[rank]))
            group_loss = 0.0
            for index, micro in enumerate(mine):
                rows_of = micro or group[:1]
                rows = [encoded[i] for i in rows_of]
                inputs = _packed(rows, VARLEN)
                if weighted:
                    inputs.update(_extra_inputs([extras[i] for i in rows_of], packed=True))
                inputs = {k: v.to(accelerator.device) for k, v in inputs.items() if v is not None}
                with accelerator.autocast():
                    loss, _ = model(**inputs)
                # The micro-batch's mean, rescaled to its share of the step's mean over all
                # its examples, times the world size that DDP's averaging divides by.
                share = sum(norms[i] for i in micro) / total if total else 0.0
                loss = torch.nan_to_num(loss) * share
                sync = index == len(mine) - 1 or sharded or world == 1
                with contextlib.nullcontext() if sync else accelerator.no_sync(model):
                    accelerator.backward(loss * world)
                group_loss += loss.item()
            if params.max_grad_norm and params.max_grad_norm > 0:
                if sharded:
                    torch.nn.utils.clip_grad_norm_(trainable, params.max_grad_norm)
                else:
                    accelerator.clip_grad_norm_(trainable, params.max_grad_norm)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            if step == REPLAN_AFTER_STEPS and params.max_seconds is not None:
                now = time.monotonic()
                allowed = _agree_min(
                    accelerator,
                    steps_the_time_allows(
                        done=step,
                        seconds_so_far=now - loop_started,
                        seconds_left=params.max_seconds - (now - started),
                        planned=total_steps,
                    ),
                )
                if allowed < planned:
                    planned = allowed
                    scheduler = _scheduler(params, unwrapped_optimizer, planned, done=step)
                    emit(
                        {
                            "log": f"The time limit of {params.max_seconds:g} s allows about "
                            f"{planned} of the {total_steps} planned steps at this speed: the "
                            f"learning-rate schedule is planned again for {planned} steps."
                        }
                    )
            timed_out = (planned < total_steps and step >= planned) or (
                params.max_seconds is not None and time.monotonic() - started > params.max_seconds
            )
            group_loss, stopping, timed_out = _agree(
                accelerator, group_loss * world, stop(), timed_out
            )
            losses.append(group_loss)
            emit(
                {
                    "epoch": epoch,
                    "step": step,
                    "total_steps": planned,
                    "loss": group_loss,
                    "lr": scheduler.get_last_lr()[0],
                    **peak_memory(),
                }
            )
            if stopping:
                raise TrainingCancelled(f"Cancelled at step {step} of {total_steps}.")
            if timed_out:
                out_of_time = True
                break

        # Rank 0 measures while the others wait; sharded, every rank takes part in the
        # forwards (each holds a shard of the weights) and rank 0 keeps the numbers.
        measures = rank == 0 or sharded
        metrics = (
            evaluate(prm, held_out, best_of_n_problems=best_of_n_problems, batch_size=eval_batch)
            if measures
            else {}
        )
        if validation and measures:
            metrics["validation_loss"] = evaluate(prm, validation, batch_size=eval_batch)[
                "eval_loss"
            ]
        accelerator.wait_for_everyone()
        metrics["train_loss"] = sum(losses) / len(losses) if losses else None
        epochs.append({"epoch": epoch, **metrics})
        emit({"epoch": epoch, "metrics": metrics})
        emit({"log": f"Epoch {epoch}: {_summary(metrics)}"})
        if out_of_time:
            emit({"log": f"Time limit of {params.max_seconds:g} s reached at step {step}."})
            emit({"cut": f"cut at step {step} of {total_steps} by the time limit"})
            break
        if _agree(accelerator, 0.0, stop(), False)[1]:
            raise TrainingCancelled(f"Cancelled after epoch {epoch}.")
        if validation:
            best, patience_over = _early_stopping(
                best, epoch, metrics.get("validation_loss"), prm, params, accelerator
            )
            if patience_over:
                emit(
                    {
                        "log": f"Early stop after epoch {epoch}: no better validation loss for "
                        f"{params.early_stopping_patience} epoch(s); keeping epoch {best[1]}."
                    }
                )
                break
    if best is not None and best[1] != epochs[-1]["epoch"]:
        # The best epoch's weights, and its metrics as the run's final ones.
        prm.module.load_state_dict(best[2], strict=False)
        final = next(e for e in epochs if e["epoch"] == best[1])
    else:
        final = epochs[-1]

    if lora:
        prm.module.backbone = prm.module.backbone.merge_and_unload()
    tuning.set_attention(prm.module.backbone, "sdpa")
    if sharded:
        _save_sharded(prm, out_dir, rank=rank)
    elif rank == 0:
        if not lora:
            prm.module = accelerator.unwrap_model(model)
        prm.save(out_dir)
    accelerator.wait_for_everyone()
    # The folder is this host's scratch: the log names the store key once it is published.
    emit({"log": f"Saved after {time.monotonic() - started:.1f} s.", **peak_memory()})
    return TrainResult(
        checkpoint_dir=out_dir, epochs=epochs, final_metrics=dict(final), peak_memory=peak_memory()
    )


def _early_stopping(best, epoch: int, loss: float | None, prm: PRM, params, accelerator):
    """(best so far, whether patience ran out): the best epoch's trainable weights are kept."""
    loss = (
        _agree(accelerator, loss or 0.0, False, False)[0] if accelerator.num_processes > 1 else loss
    )
    if loss is not None and (best is None or loss < best[0]):
        weights = {
            name: value.detach().cpu().clone()
            for name, value in prm.module.state_dict().items()
            if tuning.trainable_name(prm.module, name)
        }
        return (loss, epoch, weights), False
    return best, best is not None and epoch - best[1] >= params.early_stopping_patience


def build_prm(*, params: TrainingParams, base_model: str | None, examples: Sequence[Example]):
    """The untrained PRM a run starts from: the same arguments give the same weights and, for
    the built-in backbone, the same tokenizer (trained on `examples`' texts)."""
    return PRM.build(
        base_model=base_model,
        corpus=tokenizer_corpus(examples),
        settings=PRMSettings(
            neutral_as_positive=params.neutral_as_positive, aggregation=params.aggregation
        ),
        seed=params.seed,
    )


def _agree(accelerator, loss: float, stop: bool, timed_out: bool) -> tuple[float, bool, bool]:
    """The step's global loss, and whether to stop, the same on every rank (which each saw
    only their share, and only rank 0 hears of a cancel): so all ranks stop at one step."""
    world = accelerator.num_processes
    if world == 1:
        return loss, stop, timed_out
    values = [loss / world, float(stop), float(timed_out)]
    agreed = torch.tensor(values, dtype=torch.float64, device=accelerator.device)
    torch.distributed.all_reduce(agreed)
    return float(agreed[0]), bool(agreed[1]), bool(agreed[2])


def _shard(module) -> None:
    """FSDP2: each decoder layer, then the rest, sharded across the ranks (in place)."""
    from torch.distributed.fsdp import fully_shard

    for layer in getattr(module.backbone, "layers", ()):
        fully_shard(layer)
    fully_shard(module)


def _save_sharded(prm: PRM, out_dir: Path, *, rank: int) -> None:
    """Gather the full weights on rank 0's CPU (a collective: every rank calls it) and save
    them there as an ordinary, unsharded PRM."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
    from transformers import AutoModel

    state = get_model_state_dict(
        prm.module, options=StateDictOptions(full_state_dict=True, cpu_offload=True)
    )
    if rank != 0:
        return
    config = prm.module.backbone.config
    with torch.device("meta"):
        module = PRMModule(AutoModel.from_config(config), config.hidden_size)
    module.load_state_dict(state, assign=True)
    prm.module = module
    prm.device = torch.device("cpu")
    prm.save(out_dir)


def steps_the_time_allows(
    *, done: int, seconds_so_far: float, seconds_left: float, planned: int
) -> int:
    """How many steps in all the time limit lets a run plan for, from the speed of its first
    `done` steps (which took `seconds_so_far`) and the seconds left; `planned` when all fit.
    A tenth of what is left is kept for the held-out evaluation and saving at the end."""
    per_step = seconds_so_far / max(1, done)
    more = int(0.9 * max(0.0, seconds_left) / per_step) if per_step > 0 else planned
    return max(done, min(planned, done + more))


def _agree_min(accelerator, value: int) -> int:
    """The smallest of the ranks' values, on every rank (one plan for the whole group)."""
    if accelerator.num_processes == 1:
        return value
    agreed = torch.tensor([value], dtype=torch.int64, device=accelerator.device)
    torch.distributed.all_reduce(agreed, op=torch.distributed.ReduceOp.MIN)
    return int(agreed[0])


def _scheduler(params: TrainingParams, optimizer, total_steps: int, *, done: int = 0):
    """The learning-rate schedule for `total_steps`; with `done`, one that takes over after
    that many steps (the optimizer's groups keep their `initial_lr` from the first)."""
    from transformers import (
        get_constant_schedule_with_warmup,
        get_cosine_schedule_with_warmup,
        get_linear_schedule_with_warmup,
    )

    warmup = round(params.warmup_ratio * total_steps)
    if params.schedule == "constant":
        return get_constant_schedule_with_warmup(
            optimizer, num_warmup_steps=warmup, last_epoch=done - 1
        )
    make = (
        get_cosine_schedule_with_warmup
        if params.schedule == "cosine"
        else get_linear_schedule_with_warmup
    )
    return make(
        optimizer,
        num_warmup_steps=warmup,
        num_training_steps=max(1, total_steps),
        last_epoch=done - 1,
    )


def _extras(row, example: Example) -> tuple[list[float], list[float]]:
    """(soft, weight) per token of an encoded example: its soft targets at its step tags, in
    step order (a truncated example keeps the targets of the steps that fit), NOT_SOFT
    elsewhere; its weight everywhere."""
    soft = [NOT_SOFT] * len(row.labels)
    if example.targets is not None:
        tags = [i for i, label in enumerate(row.labels) if label != IGNORE]
        for position, target in zip(tags, example.targets, strict=False):
            soft[position] = float(target)
    return soft, [float(example.weight)] * len(row.labels)


def _extra_inputs(extras: list[tuple[list[float], list[float]]], *, packed: bool) -> dict:
    if packed:
        return {
            "soft": torch.tensor([[v for soft, _ in extras for v in soft]]),
            "weights": torch.tensor([[v for _, weights in extras for v in weights]]),
        }
    width = max(len(soft) for soft, _ in extras)
    soft = torch.full((len(extras), width), NOT_SOFT)
    weights = torch.zeros((len(extras), width))
    for i, (row_soft, row_weights) in enumerate(extras):
        soft[i, : len(row_soft)] = torch.tensor(row_soft)
        weights[i, : len(row_weights)] = torch.tensor(row_weights)
    return {"soft": soft, "weights": weights}


def _packed(rows, attn_implementation: str) -> dict:
    input_ids, position_ids, attention_mask = pack(
        [r.input_ids for r in rows], attn_implementation=attn_implementation, dtype=torch.bfloat16
    )
    labels = torch.tensor([[t for r in rows for t in r.labels]], dtype=torch.long)
    return {
        "input_ids": input_ids,
        "position_ids": position_ids,
        "attention_mask": attention_mask,
        "labels": labels,
    }


def evaluate(
    prm: PRM,
    examples: Sequence[Example],
    *,
    best_of_n_problems: Sequence[BestOfNProblem] = (),
    batch_size: int = EVAL_BATCH_SIZE,
) -> dict:
    """Held-out metrics; every key is present, None where the data cannot tell."""
    result: dict = {"eval_examples": len(examples)}
    probs = prm.class_probabilities(
        problems=[e.problem for e in examples],
        steps=[e.steps for e in examples],
        batch_size=batch_size,
    )
    scores = [prm.step_scores_from(p) for p in probs]
    # A solution longer than the model's context is scored on its first steps only.
    labels = [e.labels[: len(p)] for e, p in zip(examples, probs, strict=True)]
    nll = [
        -math.log(max(float(p[i, label + 1]), 1e-12))
        for p, row in zip(probs, labels, strict=True)
        for i, label in enumerate(row)
    ]
    result["eval_loss"] = sum(nll) / len(nll) if nll else None
    result.update(
        m.step_metrics(scores, labels, neutral_as_positive=prm.settings.neutral_as_positive)
    )
    result.update(m.first_error_metrics(scores, labels))
    result.update(
        m.best_of_n_accuracy(score_best_of_n_candidates(prm, best_of_n_problems, batch_size))
    )
    return result


def score_best_of_n_candidates(
    prm: PRM, problems: Sequence[BestOfNProblem], batch_size: int = EVAL_BATCH_SIZE
) -> list[list[tuple[float, bool]]]:
    """Per problem, (solution score, is correct) of each of its solutions, scored by `prm`."""
    flat = [(i, steps, ok) for i, p in enumerate(problems) for steps, ok in p.solutions]
    step_scores = prm.score(
        problems=[problems[i].problem for i, _, _ in flat],
        steps=[steps for _, steps, _ in flat],
        batch_size=batch_size,
    )
    candidates: list[list[tuple[float, bool]]] = [[] for _ in problems]
    for (i, _, ok), scores in zip(flat, step_scores, strict=True):
        candidates[i].append((solution_score(scores, aggregation=prm.settings.aggregation), ok))
    return candidates


def tokenizer_corpus(examples: Sequence[Example]) -> Iterator[str]:
    """The texts a built-in tokenizer is trained on: each problem once, then every step."""
    seen: set[int] = set()
    for example in examples:
        if example.problem_id not in seen:
            seen.add(example.problem_id)
            yield example.problem
        yield from example.steps


def _summary(metrics: dict) -> str:
    keys = ("train_loss", "eval_loss", "step_accuracy", "step_auroc", "first_error_f1", "best_of_n")
    return ", ".join(
        f"{k} {metrics[k]:.4f}" if isinstance(metrics.get(k), float) else f"{k} -" for k in keys
    )
