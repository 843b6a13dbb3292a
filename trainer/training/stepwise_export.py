"""Labels in the stepwise-supervision format of TRL and Hugging Face datasets.

One JSON object per training example: `prompt` (the problem), `completions` (its steps, up to
and including the first -1) and `labels` (one per step), the columns TRL's stepwise-supervision
type names and `datasets.load_dataset("json", ...)` reads. The examples are exactly what a
training run with the same parameters trains on (`dataset.build_training_examples`: one label
per solution by the training rule, rollout labels when the label source asks for them), so an
outside trainer sees the data stepwise's own loop sees.

A label is a bool, the step is good: +1, and 0 when `neutral_as_positive` (the default, the
paper's rule). With soft rollout estimates every label is a float (the share of rollouts that
reached the answer; a human label's 1.0 or 0.0), so one file holds one type per column.
"""

import json
from collections.abc import Collection, Iterator
from typing import TextIO

from trainer.training import dataset, label_sources
from trainer.training.params import TrainingParams


def _soft(params: TrainingParams) -> bool:
    soft = label_sources.source(params.label_source).trains.soft
    return soft and params.rollout_estimate == "soft"


def stepwise_rows(
    *, params: TrainingParams, solution_ids: Collection[int] | None = None
) -> Iterator[dict]:
    """The rows; `solution_ids` keeps only the examples of those solutions (the data pages'
    filters), all of them when None."""
    soft = _soft(params)
    for example in dataset.build_training_examples(params=params):
        if solution_ids is not None and example.solution_id not in solution_ids:
            continue
        good = [r == 1 or (r == 0 and params.neutral_as_positive) for r in example.labels]
        shares = example.targets or [float(g) for g in good]
        yield {
            "prompt": example.problem,
            "completions": example.steps,
            "labels": shares if soft else good,
        }


def stepwise_line(row: dict) -> str:
    return json.dumps(row, ensure_ascii=False) + "\n"


def write_stepwise(
    *, out: TextIO, params: TrainingParams, solution_ids: Collection[int] | None = None
) -> int:
    """Write the rows as JSON Lines; returns how many."""
    count = 0
    for row in stepwise_rows(params=params, solution_ids=solution_ids):
        out.write(stepwise_line(row))
        count += 1
    return count
