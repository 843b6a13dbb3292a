"""Benchmark: scoring an evaluation set of real-length items as evaluation does now (length
buckets, `trainer.evaluation.sets.length_batches`, each forward pass on the CPU under
`CPU_SCORE_TOKENS`, in fp32) against the file order in padded fp32 batches of 16 (before issue
46, item 1) and one item at a time; where the CPU has AMX, also the buckets in bf16 autocast
(`PRM_CPU_BFLOAT16=auto`, not the default), with what it does to the figures.

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

With `--train-items N` the head is fitted first, on the backbone's fp32 features of N other
items (each step's arithmetic is right or, from a random step on, wrong), so that its scores
spread as a trained PRM's do. Every order's scores then go through the evaluation's own figures
(`trainer.evaluation.figures.evaluate`: first-error F1 and accuracies at 0.5, step AUROC, with
intervals), printed to three decimals as the pages show them, and each figure is compared with
the file order's.
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


def items(count: int, *, seed: int) -> list:
    """Labeled items: each step ends in a sum, right until the item's first error (from there
    on, off by a few), none wrong in about two items of five."""
    from trainer.evaluation.figures import EvalItem

    rng = random.Random(seed)
    made = []
    for n in range(count):
        steps_n = rng.randint(20, 40)
        first_error = -1 if rng.random() < 0.4 else rng.randrange(steps_n)
        steps = []
        for s in range(steps_n):
            words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 45)))
            a, b = rng.randint(2, 60), rng.randint(2, 60)
            wrong = first_error != -1 and s >= first_error
            total = a + b + (rng.choice((-3, -2, -1, 1, 2, 3)) if wrong else 0)
            steps.append(f"Step {s + 1}: {words}, so ${a} + {b} = {total}$.")
        made.append(
            EvalItem(
                problem=f"Problem {n}: find $x$ when $x^2 - {n + 3}x + {n + 2} = 0$.",
                steps=steps,
                label=first_error,
            )
        )
    return made


def fit_head(prm, train: list, *, epochs: int = 300) -> str:
    """Fit the PRM's head on the backbone's fp32 features of `train`'s steps (the steps before
    the first error good, the first error bad, the rest unread, as training reads labels)."""
    import torch

    features, classes = [], []
    with torch.inference_mode():
        for item in train:
            encoded = prm.encode(item.problem, item.steps)
            ids = torch.tensor([encoded.input_ids])
            _, hidden = prm.module(ids, positions=ids == prm.step_tag_id, head=lambda h: h)
            for index in range(hidden.shape[0]):
                if item.label == -1 or index <= item.label:
                    features.append(hidden[index].clone())
                    classes.append(0 if index == item.label else 2)  # class of -1, of +1
    x, y = torch.stack(features), torch.tensor(classes)
    mean, spread = x.mean(0), x.std(0) + 1e-6
    head = torch.nn.Linear(x.shape[1], 3)
    optimizer = torch.optim.Adam(head.parameters(), lr=1e-2)
    bad = (y == 0).float().mean().item()
    weight = torch.tensor([0.5 / max(bad, 1e-6), 1.0, 0.5 / max(1 - bad, 1e-6)])
    for _ in range(epochs):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(head((x - mean) / spread), y, weight=weight)
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        # Folded into one linear layer on the raw features: the PRM's own head.
        prm.module.head.weight.copy_(head.weight / spread)
        prm.module.head.bias.copy_(head.bias - (head.weight / spread) @ mean)
    return f"head fitted on {len(y)} steps of {len(train)} items ({bad:.0%} bad), loss {loss:.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-model", default=None, help="checkpoint directory (default: tiny)")
    parser.add_argument("--items", type=int, default=162)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-one-by-one", action="store_true")
    parser.add_argument("--skip-file-order", action="store_true", help="(then: against fp32)")
    parser.add_argument(
        "--train-items", type=int, default=0, help="fit the head on this many other items"
    )
    parser.add_argument(
        "--bf16", action="store_true", help="score in bf16 too on a CPU without AMX (figures)"
    )
    args = parser.parse_args()

    import django

    django.setup()
    import torch

    from trainer.evaluation.figures import evaluate
    from trainer.evaluation.sets import length_batches
    from trainer.training.ml.prm import PRM

    data = items(args.items, seed=args.seed)
    train = items(args.train_items, seed=args.seed + 1)
    prm = PRM.build(base_model=args.base_model, corpus=[s for i in data + train for s in i.steps])
    tokens = [
        len(e.input_ids)
        for e in prm.encode_many([i.problem for i in data], [i.steps for i in data])
    ]
    print(
        f"{datetime.date.today()}, {platform.node()} ({os.cpu_count()} CPUs, torch "
        f"{torch.__version__}, {'CUDA' if torch.cuda.is_available() else 'CPU'}): {len(data)} "
        f"items of {min(tokens)}-{max(tokens)} tokens (mean {sum(tokens) / len(tokens):.0f}), "
        f"{args.base_model or 'tiny backbone'}",
        flush=True,
    )
    if train:
        os.environ["PRM_CPU_BFLOAT16"] = "off"
        print(f"  {fit_head(prm, train)}", flush=True)

    from trainer.training.ml import prm as prm_module

    def score(batches: list[list[int]], *, budget: int | None) -> tuple[float, list[list[float]]]:
        prm_module.CPU_SCORE_TOKENS = budget or 10**12  # None: the batch as given, padded
        out: list = [None] * len(data)
        started = time.perf_counter()
        for batch in batches:
            scored = prm.score(
                problems=[data[i].problem for i in batch],
                steps=[data[i].steps for i in batch],
                batch_size=len(batch),
            )
            for i, step_scores in zip(batch, scored, strict=True):
                out[i] = step_scores
        return time.perf_counter() - started, out

    chars = [len(i.problem) + sum(len(s) for s in i.steps) for i in data]
    budget = prm_module.CPU_SCORE_TOKENS
    os.environ["PRM_CPU_BFLOAT16"] = "auto"
    amx = prm_module.cpu_bfloat16()
    # name -> (batches, token budget, PRM_CPU_BFLOAT16)
    orders = {
        FILE_ORDER: (
            [list(range(i, min(i + 16, len(data)))) for i in range(0, len(data), 16)],
            None,
            "off",
        ),
        BUCKETS_FP32: (length_batches(chars), budget, "off"),
    }
    if args.skip_file_order:
        del orders[FILE_ORDER]
    if amx:
        orders["length buckets, bf16 autocast (PRM_CPU_BFLOAT16=auto: this CPU has AMX)"] = (
            length_batches(chars),
            budget,
            "auto",
        )
    else:
        print("  this CPU has no AMX: PRM_CPU_BFLOAT16=auto scores in fp32 here")
        if args.bf16:
            # Its figures, as an AMX CPU would give them; its time means nothing here.
            orders["length buckets, bf16 autocast (forced: no AMX, time not meaningful)"] = (
                length_batches(chars),
                budget,
                "on",
            )
    if not args.skip_one_by_one:
        orders["one item at a time, fp32"] = ([[i] for i in range(len(data))], None, "off")
    results = {}
    for name, (batches, tokens, bf16) in orders.items():
        os.environ["PRM_CPU_BFLOAT16"] = bf16
        results[name] = score(batches, budget=tokens)
        print(f"  {name}: {results[name][0]:.1f} s", flush=True)
    reference_name = FILE_ORDER if FILE_ORDER in results else BUCKETS_FP32
    floor_seconds, reference = results[reference_name]
    against = "the file order's" if reference_name == FILE_ORDER else "fp32 buckets'"
    reference_figures = shown_figures(evaluate(data, reference, resamples=200))
    print(f"  figures of the reference order: {reference_figures}")
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
            f"{name}: {seconds:.1f} s, {floor_seconds / seconds:.2f}x {against} speed; "
            f"step scores within {worst:.1e} of {against}, {kept:.4%} of step pairs in "
            f"the same order, first step under 0.5 the same on {same_first} of "
            f"{len(scores)} items"
        )
        figures = shown_figures(evaluate(data, scores, resamples=200))
        changed = {k: v for k, v in figures.items() if v != reference_figures[k]}
        print(f"  figures as shown: {changed or 'all the same'}")
        if "fp32" in name:
            assert worst < 1e-4, f"{name}: the scores changed ({worst:.1e})"


FILE_ORDER = "file order, batches of 16, fp32 (before)"
BUCKETS_FP32 = "length buckets under the token budget, fp32 (now)"


def shown_figures(result: dict) -> dict[str, str]:
    """Each figure as a page shows it: value [low, high] to three decimals."""

    def three(x) -> str:
        return "-" if x is None else f"{x:.3f}"

    return {
        name: f"{three(f['value'])} [{three(f['low'])}, {three(f['high'])}]"
        for name, f in result["figures"].items()
    }


def first_below(step_scores: list[float]) -> int:
    from trainer.training.metrics import THRESHOLD  # a step scored under it is an error

    return next((i for i, x in enumerate(step_scores) if x < THRESHOLD), -1)


if __name__ == "__main__":
    main()
