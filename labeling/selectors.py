"""Read operations of the annotation domain."""

import json
import uuid
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple, TextIO

from django.db.models import Count, QuerySet, TextField
from django.db.models.functions import Cast
from tqdm import tqdm

from labeling import prm800k
from labeling.models import LabelingSession, Problem, Solution, StepLabel, StepRating

EXPORT_CHUNK = 1000
PROGRESS_MIN_LINES = 2000


@dataclass(frozen=True)
class ExportFilters:
    generation: int | None = None
    since: datetime | None = None
    labeler: uuid.UUID | None = None
    include_qc: bool = True


def problem_list() -> QuerySet[Problem]:
    return Problem.objects.order_by("subject", "level", "id").annotate(
        solution_count=Count("solutions")
    )


def overview() -> dict[str, int]:
    """Counts for the landing page."""
    return {
        "problem_count": Problem.objects.count(),
        "solution_count": Solution.objects.count(),
        "submitted_count": LabelingSession.objects.filter(submitted_at__isnull=False).count(),
    }


def submitted_sessions(
    *, filters: ExportFilters, within: QuerySet[LabelingSession] | None = None
) -> QuerySet[LabelingSession]:
    sessions = (within if within is not None else LabelingSession.objects.all()).filter(
        submitted_at__isnull=False
    )
    if filters.generation is not None:
        sessions = sessions.filter(generation__number=filters.generation)
    if filters.since is not None:
        sessions = sessions.filter(submitted_at__gte=filters.since)
    if filters.labeler is not None:
        sessions = sessions.filter(labeler__uuid=filters.labeler)
    if not filters.include_qc:
        sessions = sessions.filter(is_quality_control=False)
    return sessions


def iter_prm800k_records(
    *, filters: ExportFilters, within: QuerySet[LabelingSession] | None = None
) -> Iterator[dict]:
    """Yield one PRM800K object per submitted session, reading the database in chunks.

    `within` narrows the export to a queryset (an admin changelist selection, say).
    """
    # Plain value rows, not model instances: building five objects per session was half
    # of the export's time.
    sessions = submitted_sessions(filters=filters, within=within).values_list(*_RECORD_COLUMNS)
    last_pk = 0
    while True:
        chunk = list(sessions.filter(pk__gt=last_pk).order_by("pk")[:EXPORT_CHUNK])
        if not chunk:
            return
        last_pk = chunk[-1][0]
        steps = _steps_of(session_ids=[row[0] for row in chunk])
        for row in chunk:
            yield _record(_SessionRow(*row), steps.get(row[0], []))


_RECORD_COLUMNS = (
    "pk",
    "labeler__uuid",
    "submitted_at",
    "generation__number",
    "is_quality_control",
    "is_screening",
    "total_time",
    "finish_reason",
    "extra",
    "solution__steps",
    "solution__answer",
    "solution__source_score",
    "solution__problem__text",
    "solution__problem__answer",
    "solution__problem__solution",
)


class _SessionRow(NamedTuple):
    pk: int
    labeler: uuid.UUID
    submitted_at: datetime
    generation: int | None
    is_quality_control: bool
    is_screening: bool
    total_time: int | None
    finish_reason: str
    extra: dict
    steps: list[str]
    answer: str
    source_score: float | None
    problem: str
    problem_answer: str
    problem_solution: str


def _raw_json(field: str) -> Cast:
    # A million ratings carry an `extra` that is nearly always {}: reading it as text and
    # decoding only the rest halves the export's time in Python.
    return Cast(field, output_field=TextField())


def _loads(text: str | None) -> dict | None:
    if text is None or text == "{}":
        return None
    return json.loads(text)


def _steps_of(*, session_ids: list[int]) -> dict[int, list[dict]]:
    step_rows = list(
        StepLabel.objects.filter(session_id__in=session_ids)
        .order_by("session_id", "index")
        .values_list(
            "id",
            "session_id",
            "chosen_completion",
            _raw_json("human_completion"),
            _raw_json("extra"),
        )
    )
    # Ratings are looked up by their indexed step ids, not joined through the steps by
    # session: the join made PostgreSQL scan the whole ratings table for every chunk.
    completions: dict[int, list[dict]] = defaultdict(list)
    for step_id, text, rating, flagged, extra in (
        StepRating.objects.filter(step_id__in=[row[0] for row in step_rows])
        .order_by("step_id", "completion_index")
        .values_list("step_id", "text", "rating", "flagged", _raw_json("extra"))
    ):
        modelled = prm800k.modelled_completion(text=text, rating=rating, flagged=flagged)
        completions[step_id].append(prm800k.restore(modelled, _loads(extra)))

    steps: dict[int, list[dict]] = defaultdict(list)
    for step_id, session_id, chosen, human, extra in step_rows:
        human = json.loads(human) if human is not None else None
        modelled = {"completions": completions.get(step_id, [])}
        modelled.update(prm800k.modelled_step(human_completion=human, chosen_completion=chosen))
        steps[session_id].append(prm800k.restore(modelled, _loads(extra)))
    return steps


def _record(row: _SessionRow, steps: list[dict]) -> dict:
    kept = row.extra or {}
    record = prm800k.restore(
        prm800k.modelled_top(
            labeler=row.labeler,
            submitted_at=row.submitted_at,
            generation=row.generation,
            is_quality_control=row.is_quality_control,
            is_screening=row.is_screening,
        ),
        kept.get("record"),
    )
    question = prm800k.modelled_question(
        problem=row.problem,
        answer=row.problem_answer,
        solution=row.problem_solution,
        steps=row.steps,
        pre_answer=row.answer,
        score=row.source_score,
    )
    record["question"] = prm800k.restore(question, kept.get("question"))
    label = {"steps": steps}
    label.update(
        prm800k.restore(
            prm800k.modelled_label(total_time=row.total_time, finish_reason=row.finish_reason),
            kept.get("label"),
        )
    )
    record["label"] = label
    return record


def modelled_question(*, problem: Problem, solution: Solution) -> dict:
    return prm800k.modelled_question(
        problem=problem.text,
        answer=problem.answer,
        solution=problem.solution,
        steps=solution.steps,
        pre_answer=solution.answer,
        score=solution.source_score,
    )


def json_line(record: dict) -> str:
    return json.dumps(record, ensure_ascii=False) + "\n"


def write_prm800k(*, out: TextIO, filters: ExportFilters, progress: TextIO | None = None) -> int:
    """Write the export as JSONL to `out`; return the number of lines.

    With `progress` (a stream such as stderr), large exports show a progress bar there.
    """
    records = iter_prm800k_records(filters=filters)
    if progress is not None:
        total = submitted_sessions(filters=filters).count()
        records = tqdm(
            records,
            total=total,
            desc="exporting",
            unit=" lines",
            file=progress,
            disable=total < PROGRESS_MIN_LINES,
        )
    count = 0
    for record in records:
        out.write(json_line(record))
        count += 1
    return count
