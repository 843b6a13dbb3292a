"""Benchmark: PRM training steps on one device, packed rows against padded batches.

    python bench/train_gpu.py [--shape qwen-0.5b] [--tokens-per-step 16384] [--steps 20]
                              [--attn sdpa] [--gradient-checkpointing]

Builds a PRM (`trainer.training.ml.prm.PRMModule`: a backbone and the 3-class head) on a backbone
of a named shape (`bench/shapes.py`: Qwen2.5-0.5B, Llama-3.2-1B, Qwen2.5-1.5B; random weights) and
times optimizer steps (AdamW, bf16 autocast over fp32 weights on CUDA, as
`trainer.training.ml.train` trains) on synthetic solutions shaped like PRM800K's (a problem of
40-160 tokens, 3-12 steps of 15-60 tokens, a step tag after each, labels at the tags). The same
examples go through two layouts of a micro-batch:

- packed: the examples of a step as one row with no padding (`trainer.training.ml.prm.pack`:
  position ids restart per example; `--attn stepwise_varlen`, the default, finds the boundaries
  from them, `trainer.training.ml.attention`; `--attn sdpa` gets a block-diagonal mask of the whole
  row instead);
- padded: the same examples right-padded to the longest (`trainer.training.ml.prm.pad`).

Prints tokens/s (real tokens only), step time, peak device memory and model FLOPs utilisation
(`bench/shapes.py` `training_flops` over the device's dense bf16 peak, or `--peak-tflops`),
and the ratio packed / padded. On CUDA it exits non-zero when packed MFU is under the target
(40%). Without CUDA it is a smoke test at `--shape tiny` (CI runs it): the figures are printed,
only a failure to train (a loss that is not finite) fails it.
"""

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from shapes import SHAPES, backbone_config, matmul_parameters, peak_tflops, training_flops  # noqa: E402

from trainer.training.ml.attention import VARLEN, register  # noqa: E402

TARGET_MFU = 0.40
WARMUP_STEPS = 3


def synthetic_examples(*, count: int, vocab: int, step_tag: int, seed: int) -> list:
    """(input_ids, labels) of PRM800K-shaped solutions; labels are class indices at step tags."""
    from trainer.training.ml.prm import IGNORE

    rng = random.Random(seed)
    examples = []
    for _ in range(count):
        ids = [rng.randrange(3, vocab - 1) for _ in range(rng.randint(40, 160))]
        labels = [IGNORE] * len(ids)
        for _ in range(rng.randint(3, 12)):
            ids += [rng.randrange(3, vocab - 1) for _ in range(rng.randint(15, 60))] + [step_tag]
            labels += [IGNORE] * (len(ids) - len(labels) - 1) + [rng.choice((0, 1, 2, 2, 2))]
        examples.append((ids, labels))
    return examples


def micro_batches(examples: list, tokens_per_step: int) -> list[list]:
    """Consecutive examples grouped until a group holds `tokens_per_step` tokens."""
    batches, batch, tokens = [], [], 0
    for example in examples:
        if batch and tokens + len(example[0]) > tokens_per_step:
            batches.append(batch)
            batch, tokens = [], 0
        batch.append(example)
        tokens += len(example[0])
    if batch:
        batches.append(batch)
    return batches


def inputs_for(batch: list, *, layout: str, attn: str, device, dtype) -> dict:
    import torch

    from trainer.training.ml.prm import IGNORE, pack, pad

    if layout == "packed":
        input_ids, position_ids, mask = pack(
            [ids for ids, _ in batch], attn_implementation=attn, dtype=dtype
        )
        labels = torch.tensor([[t for _, row in batch for t in row]])
        inputs = {"input_ids": input_ids, "position_ids": position_ids, "attention_mask": mask}
    else:
        input_ids, _ = pad([ids for ids, _ in batch], 0)
        labels, _ = pad([row for _, row in batch], 0, fill=IGNORE)
        inputs = {"input_ids": input_ids}
    inputs["labels"] = labels
    return {k: v.to(device) for k, v in inputs.items() if v is not None}


def measure(args, layout: str) -> dict:
    import torch
    from transformers import AutoModel

    from trainer.training.ml.prm import PRMModule, configure_threads

    configure_threads()
    torch.manual_seed(args.seed)
    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    config = backbone_config(args.shape, attn_implementation=args.attn)
    backbone = AutoModel.from_config(config)
    if args.gradient_checkpointing:
        backbone.gradient_checkpointing_enable()
    model = PRMModule(backbone, config.hidden_size).to(device)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, weight_decay=0.01)
    examples = synthetic_examples(
        count=args.examples, vocab=config.vocab_size, step_tag=config.vocab_size - 1, seed=args.seed
    )
    batches = micro_batches(examples, args.tokens_per_step)[: WARMUP_STEPS + args.steps]
    if len(batches) < WARMUP_STEPS + 1:
        raise SystemExit("Too few examples for the warm-up and one timed step: raise --examples.")
    dtype = torch.bfloat16 if cuda else torch.float32
    times, losses, lengths = [], [], []
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    for index, batch in enumerate(batches):
        inputs = inputs_for(batch, layout=layout, attn=args.attn, device=device, dtype=dtype)
        if cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=cuda):
            loss, _ = model(**inputs)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if cuda:
            torch.cuda.synchronize()
        if index >= WARMUP_STEPS:
            times.append(time.perf_counter() - start)
            losses.append(float(loss.detach()))
            lengths.append([len(ids) for ids, _ in batch])
    seconds = sum(times)
    tokens = sum(sum(row) for row in lengths)
    flops = sum(
        training_flops(
            parameters=matmul_parameters(backbone),
            layers=config.num_hidden_layers,
            hidden=config.hidden_size,
            lengths=row,
        )
        for row in lengths
    )
    padded_tokens = sum(len(row) * max(row) for row in lengths)
    return {
        "layout": layout,
        "tokens_per_s": tokens / seconds,
        "step_s": statistics.median(times),
        "tflops": flops / seconds / 1e12,
        "padding": 0.0 if layout == "packed" else 1 - tokens / padded_tokens,
        "peak_gib": torch.cuda.max_memory_allocated() / 2**30 if cuda else None,
        "losses_finite": all(loss == loss and abs(loss) != float("inf") for loss in losses),
        "device": torch.cuda.get_device_name() if cuda else "cpu",
        "parameters": sum(p.numel() for p in model.parameters()),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), default=None)
    parser.add_argument("--tokens-per-step", type=int, default=None)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--examples", type=int, default=None)
    parser.add_argument(
        "--attn", default=VARLEN, help=f"{VARLEN} | sdpa | flash_attention_2 | eager"
    )
    parser.add_argument("--gradient-checkpointing", action="store_true")
    parser.add_argument("--peak-tflops", type=float, default=None)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    import torch

    register()
    cuda = torch.cuda.is_available()
    args.shape = args.shape or ("qwen-0.5b" if cuda else "tiny")
    args.tokens_per_step = args.tokens_per_step or (16384 if cuda else 2048)
    # Enough examples for warm-up and timed steps at about 400 tokens each.
    args.examples = args.examples or (WARMUP_STEPS + args.steps + 1) * (
        args.tokens_per_step // 300 + 1
    )

    results = [measure(args, layout) for layout in ("packed", "padded")]
    device = results[0]["device"]
    peak = args.peak_tflops or (peak_tflops(device) if cuda else None)
    print(
        f"\nstepwise training benchmark: {args.shape} ({results[0]['parameters'] / 1e6:,.0f}M "
        f"parameters, random weights), {device}, attn {args.attn}"
        f"{', gradient checkpointing' if args.gradient_checkpointing else ''}"
    )
    print(
        f"{args.steps} timed steps of about {args.tokens_per_step:,} tokens, "
        f"{'bf16 autocast' if cuda else 'fp32'}"
    )
    print(
        f"{'layout':<8}{'tokens/s':>12}{'step s':>9}{'TFLOP/s':>9}{'MFU':>7}"
        f"{'padding':>9}{'peak GiB':>10}"
    )
    for r in results:
        mfu = f"{r['tflops'] / peak:.0%}" if peak else "-"
        gib = f"{r['peak_gib']:.1f}" if r["peak_gib"] is not None else "-"
        print(
            f"{r['layout']:<8}{r['tokens_per_s']:>12,.0f}{r['step_s']:>9.3f}{r['tflops']:>9.1f}"
            f"{mfu:>7}{r['padding']:>9.0%}{gib:>10}"
        )
    ratio = results[0]["tokens_per_s"] / results[1]["tokens_per_s"]
    print(f"packed / padded tokens/s: {ratio:.2f}x")
    checks = [("losses finite", all(r["losses_finite"] for r in results))]
    if cuda and peak:
        checks.append(
            (f"packed MFU at least {TARGET_MFU:.0%}", results[0]["tflops"] / peak >= TARGET_MFU)
        )
    elif cuda:
        print("unknown device peak: pass --peak-tflops to get MFU")
    else:
        print("no CUDA device: a smoke test at a tiny shape; MFU is measured on a GPU only")
    for name, ok in checks:
        print(f"[{'ok' if ok else 'FAIL'}] {name}")
    return 0 if all(ok for _, ok in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
