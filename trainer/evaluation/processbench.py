"""ProcessBench: does the PRM find the first wrong step?

A ProcessBench file holds one item per line (or Parquet row): `problem`, `steps` (a list of
texts) and `label`, the index (from 0) of the first wrong step, or -1 when every step is right.
The PRM predicts the first step whose score falls below a threshold (-1 when none does).
Reported as the benchmark does: accuracy on the erroneous items (the predicted index is the
label), accuracy on the correct items (nothing predicted), and F1, their harmonic mean.

The threshold is ProcessBench's own (its released evaluation code takes the PRM's argmax: a
step scored below one half is wrong), the same for evaluation sets, this command and the
held-out slice of a training run (`trainer.evaluation.figures.THRESHOLD`). `sweep` shows every
threshold of a grid as a diagnostic; a threshold picked from it is tuned on the items it would
be reported on, so no figure is.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from core.errors import Invalid
from labeling.services.importing import ImportFailed
from trainer.sampling import public_formats

GRID = tuple(round(0.05 * i, 2) for i in range(1, 20))  # 0.05, 0.10, ... 0.95


class ProcessBenchInvalid(Invalid):
    """A line that is not a ProcessBench item; the message is FILE:LINE: what is wrong."""


@dataclass(frozen=True)
class Item:
    problem: str
    steps: list[str]
    label: int  # the first wrong step, or -1


@dataclass(frozen=True)
class Result:
    threshold: float
    erroneous: int
    correct: int
    accuracy_erroneous: float | None  # None without erroneous items
    accuracy_correct: float | None
    f1: float  # 0 when either accuracy is 0 or missing


def read_items(*, path: Path | str) -> list[Item]:
    """The items of a ProcessBench file, JSONL or Parquet (the one parser,
    `trainer.sampling.public_formats.read_processbench`, which the label import shares)."""
    try:
        items = public_formats.read_processbench(path=path)
    except ImportFailed as exc:
        raise ProcessBenchInvalid(str(exc)) from None
    return [Item(problem=i.problem, steps=i.steps, label=i.label) for i in items]


def first_error(step_scores: Sequence[float], threshold: float) -> int:
    """The first step scored below `threshold`, or -1."""
    return next((i for i, score in enumerate(step_scores) if score < threshold), -1)


def evaluate(
    items: Sequence[Item], step_scores: Sequence[Sequence[float]], threshold: float
) -> Result:
    hits_bad = hits_good = bad = good = 0
    for item, scores in zip(items, step_scores, strict=True):
        predicted = first_error(scores, threshold)
        if item.label == -1:
            good += 1
            hits_good += predicted == -1
        else:
            bad += 1
            hits_bad += predicted == item.label
    acc_bad = hits_bad / bad if bad else None
    acc_good = hits_good / good if good else None
    f1 = 2 * acc_bad * acc_good / (acc_bad + acc_good) if acc_bad and acc_good else 0.0
    return Result(threshold, bad, good, acc_bad, acc_good, f1)


def sweep(
    items: Sequence[Item], step_scores: Sequence[Sequence[float]], grid: Sequence[float] = GRID
) -> list[Result]:
    return [evaluate(items, step_scores, t) for t in grid]


def format_result(result: Result) -> str:
    def shown(value: float | None) -> str:
        return "  –  " if value is None else f"{value:.3f}"

    return (
        f"{result.threshold:9.2f}  {shown(result.accuracy_erroneous)} ({result.erroneous:>4})  "
        f"{shown(result.accuracy_correct)} ({result.correct:>4})  {result.f1:.3f}"
    )


HEADER = "threshold  erroneous acc (n)  correct acc (n)    F1"
