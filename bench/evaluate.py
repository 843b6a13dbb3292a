"""Benchmark: scoring an evaluation set of real-length items as evaluation does now (length
buckets, `trainer.evaluation.sets.length_batches`, each forward pass on the CPU under
`CPU_SCORE_TOKENS`, in bf16 autocast where the CPU has AMX: `PRM_CPU_BFLOAT16`) against the
file order in padded fp32 batches of 16 (before issue 46, item 1), the buckets in fp32, and one
item at a time.

    .venv/bin/python bench/evaluate.py --base-model var/models/smollm2-135m-instruct [--items 162]

Items are ProcessBench-shaped: a problem and 20-40 steps of varied length, 1,000-2,000 tokens
of SmolLM2 in all, in a shuffled (file) order. The PRM is the backbone with a fresh head: the
time does not depend on what it learned. Each order scores every item; the fp32 orders' step
scores must agree to 1e-4. For each order the line gives its seconds, its speed-up over the
file order measured in the same run, and what the figures read of the scores against the file
order's: the worst step score difference, the share of step pairs in the same order (what
AUROC reads) and the items whose first step under 0.5 is the same (ProcessBench's first-error
prediction). A fresh head scores every step alike, so the pairs' order is its most fragile
here; the date and the machine come first.
"""

import argparse
import datetime
import os
import platform
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "annotate.settings")

WORDS = (
    "we", "add", "the", "sum", "of", "both", "sides", "so", "that", "x", "equals", "then",
    "divide", "by", "two", "and", "check", "it", "again", "since", "each", "term", "is",
)  # fmt: skip


def items(count: int, *, seed: int) -> list[tuple[str, list[str]]]:
    rng = random.Random(seed)
    made = []
    for n in range(count):
        steps = []
        for s in range(rng.randint(20, 40)):
            words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 45)))
            steps.append(f"Step {s + 1}: {words}, so $x_{{{s}}} = \\frac{{{n + s}}}{{{s + 2}}}$.")
        made.append((f"Problem {n}: find $x$ when $x^2 - {n + 3}x + {n + 2} = 0$.", steps))
    return made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-model", default=None, help="checkpoint directory (default: tiny)")
    parser.add_argument("--items", type=int, default=162)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-one-by-one", action="store_true")
    args = parser.parse_args()

    import django

    django.setup()
    import torch

    from trainer.evaluation.sets import length_batches
    from trainer.training.ml.prm import PRM

    data = items(args.items, seed=args.seed)
    prm = PRM.build(base_model=args.base_model, corpus=[s for _, steps in data for s in steps])
    tokens = [len(e.input_ids) for e in prm.encode_many([p for p, _ in data], [s for _, s in data])]
    print(
        f"{datetime.date.today()}, {platform.node()} ({os.cpu_count()} CPUs, torch "
        f"{torch.__version__}, {'CUDA' if torch.cuda.is_available() else 'CPU'}): {len(data)} "
        f"items of {min(tokens)}-{max(tokens)} tokens (mean {sum(tokens) / len(tokens):.0f}), "
        f"{args.base_model or 'tiny backbone'}",
        flush=True,
    )

    from trainer.training.ml import prm as prm_module

    def score(batches: list[list[int]], *, budget: int | None) -> tuple[float, list[list[float]]]:
        prm_module.CPU_SCORE_TOKENS = budget or 10**12  # None: the batch as given, padded
        out: list = [None] * len(data)
        started = time.perf_counter()
        for batch in batches:
            scored = prm.score(
                problems=[data[i][0] for i in batch],
                steps=[data[i][1] for i in batch],
                batch_size=len(batch),
            )
            for i, step_scores in zip(batch, scored, strict=True):
                out[i] = step_scores
        return time.perf_counter() - started, out

    chars = [len(p) + sum(len(s) for s in steps) for p, steps in data]
    budget = prm_module.CPU_SCORE_TOKENS
    os.environ["PRM_CPU_BFLOAT16"] = "auto"
    amx = prm_module.cpu_bfloat16()
    # name -> (batches, token budget, PRM_CPU_BFLOAT16)
    orders = {
        "file order, batches of 16, fp32 (before)": (
            [list(range(i, min(i + 16, len(data)))) for i in range(0, len(data), 16)],
            None,
            "off",
        ),
        "length buckets under the token budget, fp32": (length_batches(chars), budget, "off"),
    }
    if amx:
        orders["length buckets, bf16 autocast (now: this CPU has AMX)"] = (
            length_batches(chars),
            budget,
            "auto",
        )
    else:
        print("  this CPU has no AMX: scoring stays fp32 here (PRM_CPU_BFLOAT16=auto)")
    if not args.skip_one_by_one:
        orders["one item at a time, fp32"] = ([[i] for i in range(len(data))], None, "off")
    results = {}
    for name, (batches, tokens, bf16) in orders.items():
        os.environ["PRM_CPU_BFLOAT16"] = bf16
        results[name] = score(batches, budget=tokens)
        print(f"  {name}: {results[name][0]:.1f} s", flush=True)
    floor_seconds, reference = results["file order, batches of 16, fp32 (before)"]
    flat_reference = [x for item in reference for x in item]
    rng = random.Random(args.seed)
    pairs = [
        (rng.randrange(len(flat_reference)), rng.randrange(len(flat_reference)))
        for _ in range(200_000)
    ]
    for name, (seconds, scores) in results.items():
        flat = [x for item in scores for x in item]
        worst = max(abs(a - b) for a, b in zip(flat, flat_reference, strict=True))
        # What the figures read: the order of step scores (AUROC) and where each item's first
        # step under 0.5 falls (ProcessBench's first-error prediction, F1).
        kept = sum(
            (flat[i] < flat[j]) == (flat_reference[i] < flat_reference[j])
            for i, j in pairs
            if flat_reference[i] != flat_reference[j]
        ) / sum(flat_reference[i] != flat_reference[j] for i, j in pairs)
        same_first = sum(
            first_below(x) == first_below(y) for x, y in zip(scores, reference, strict=True)
        )
        print(
            f"{name}: {seconds:.1f} s, {floor_seconds / seconds:.2f}x the file order's speed; "
            f"step scores within {worst:.1e} of the file order's, {kept:.4%} of step pairs in "
            f"the same order, first step under 0.5 the same on {same_first} of "
            f"{len(scores)} items"
        )
        if "fp32" in name:
            assert worst < 1e-4, f"{name}: the scores changed ({worst:.1e})"


def first_below(step_scores: list[float]) -> int:
    from trainer.training.metrics import THRESHOLD  # a step scored under it is an error

    return next((i for i, x in enumerate(step_scores) if x < THRESHOLD), -1)


if __name__ == "__main__":
    main()
