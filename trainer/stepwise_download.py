"""The TRL stepwise-supervision export of what the data filters (labeling/filters.py) keep:
its count and first lines before the download, and the download, both from the one writer
(trainer/training/stepwise_export.py) that `manage.py export_stepwise` uses.

It lives in the trainer app because the writer does: the labeling app may not import trainer
(core/tests/test_imports.py), so its PRM800K export page links here with the same filters.
"""

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice

from django.http import StreamingHttpResponse
from django.utils import timezone

from labeling import filters
from labeling.filters import DataFilters
from trainer.training.params import TrainingParams
from trainer.training.stepwise_export import stepwise_line, stepwise_rows

PREVIEW_LINES = 3

# The training parameters that choose the examples, as train_prm and export_stepwise spell
# them (the rest of a run's parameters do not change what is exported).
EXAMPLE_PARAMS = (
    "include_quality_control",
    "include_screening",
    "generation_min",
    "generation_max",
    "label_source",
    "consensus_sources",
    "rollout_estimate",
    "rollout_run",
    "neutral_as_positive",
)


def solution_ids(*, data: DataFilters) -> set[int] | None:
    """The solutions the filters keep, or None (every one) when no filter is set."""
    if not data.active:
        return None
    return set(filters.solutions(filters=data).values_list("pk", flat=True))


def stepwise_lines(*, data: DataFilters, params: TrainingParams) -> Iterator[str]:
    for row in stepwise_rows(params=params, solution_ids=solution_ids(data=data)):
        yield stepwise_line(row)


@dataclass(frozen=True)
class PreviewRow:
    problem: str
    summary: str
    line: str


@dataclass(frozen=True)
class Preview:
    count: int  # lines the download will hold
    rows: list[PreviewRow]

    @property
    def lines(self) -> list[str]:
        return [row.line for row in self.rows]


def stepwise_preview(
    *, data: DataFilters, params: TrainingParams, lines: int = PREVIEW_LINES
) -> Preview:
    """The count (the examples are built in full, as the download builds them) and the first
    `lines` lines."""
    rows = list(stepwise_rows(params=params, solution_ids=solution_ids(data=data)))
    shown = [
        PreviewRow(
            problem=row["prompt"],
            summary=f"{len(row['completions'])} steps, labels "
            + " ".join(str(label).lower() for label in row["labels"]),
            line=stepwise_line(row),
        )
        for row in islice(rows, lines)
    ]
    return Preview(count=len(rows), rows=shown)


def stepwise_response(*, data: DataFilters, params: TrainingParams) -> StreamingHttpResponse:
    response = StreamingHttpResponse(
        stepwise_lines(data=data, params=params), content_type="application/jsonl; charset=utf-8"
    )
    stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
    response["Content-Disposition"] = f'attachment; filename="stepwise-{stamp}.jsonl"'
    return response
