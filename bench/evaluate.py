"""Benchmark: scoring an evaluation set of real-length items as evaluation does now (length
buckets, `trainer.evaluation.sets.length_batches`, each forward pass on the CPU under
`CPU_SCORE_TOKENS`) against the file order in padded batches of 16 (before issue 46, item 1)
and one item at a time.

    .venv/bin/python bench/evaluate.py --base-model var/models/smollm2-135m-instruct [--items 162]

Items are ProcessBench-shaped: a problem and 20-40 steps of varied length, 1,000-2,000 tokens
of SmolLM2 in all, in a shuffled (file) order. The PRM is the backbone with a fresh head: the
time does not depend on what it learned. Each order scores every item; the step scores must
agree to 1e-4 (figures unchanged), and the line per order gives its seconds and its speed-up
over the file order, measured in the same run, with the date and the machine.
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
    orders = {
        "file order, batches of 16 (before)": (
            [list(range(i, min(i + 16, len(data)))) for i in range(0, len(data), 16)],
            None,
        ),
        "length buckets under the token budget (now)": (length_batches(chars), budget),
    }
    if not args.skip_one_by_one:
        orders["one item at a time"] = ([[i] for i in range(len(data))], None)
    results = {}
    for name, (batches, tokens) in orders.items():
        results[name] = score(batches, budget=tokens)
        print(f"  {name}: {results[name][0]:.1f} s", flush=True)
    floor_seconds, reference = results["file order, batches of 16 (before)"]
    for name, (seconds, scores) in results.items():
        pairs = zip(scores, reference, strict=True)
        worst = max(abs(a - b) for x, y in pairs for a, b in zip(x, y, strict=True))
        print(
            f"{name}: {seconds:.1f} s, {floor_seconds / seconds:.2f}x the file order's speed; "
            f"step scores within {worst:.1e} of the file order's"
        )
        assert worst < 1e-4, f"{name}: the scores changed ({worst:.1e})"


if __name__ == "__main__":
    main()
