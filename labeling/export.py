"""PRM800K export: every submitted label as one JSON line, streamed from chunked queries.

One path for every door: `write_prm800k` for the command, `prm800k_response` for the page,
the API and the admin action. Labelers appear only by their UUID.
"""

import json
import uuid
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from itertools import groupby
from operator import itemgetter
from typing import NamedTuple, TextIO

from django.db.models import QuerySet, TextField
from django.db.models.functions import Cast
from django.http import StreamingHttpResponse
from django.utils import timezone
from tqdm import tqdm

from core import prm800k
from labeling.models import LabelingSession, Problem, Solution, StepLabel

EXPORT_CHUNK = 1000
# Below this many lines a progress bar (of an import or an export) is noise.
PROGRESS_MIN_LINES = 2000


@dataclass(frozen=True)
class ExportFilters:
    generation: int | None = None
    since: datetime | None = None
    labeler: uuid.UUID | None = None
    include_quality_control: bool = True


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
    if not filters.include_quality_control:
        sessions = sessions.filter(is_quality_control=False)
    return sessions


def iter_prm800k_records(
    *, filters: ExportFilters, within: QuerySet[LabelingSession] | None = None
) -> Iterator[dict]:
    """Yield one PRM800K object per submitted session, reading the database in chunks.

    `within` narrows the export to a queryset (an admin changelist selection, say).
    """
    sessions = submitted_sessions(filters=filters, within=within)
    # Plain value rows, not model instances: building five objects per session was half
    # of the export's time.
    rows = sessions.values_list(*_RECORD_COLUMNS).order_by("pk")
    last_pk = 0
    while True:
        chunk = list(rows.filter(pk__gt=last_pk)[:EXPORT_CHUNK])
        if not chunk:
            return
        first_pk, last_pk = chunk[0][0], chunk[-1][0]
        steps = _steps_of(sessions=sessions, first_pk=first_pk, last_pk=last_pk)
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


def _steps_of(
    *, sessions: QuerySet[LabelingSession], first_pk: int, last_pk: int
) -> dict[int, list[dict]]:
    """The PRM800K `label.steps` of each session of `sessions` with a key in the range.

    One query: steps left-joined to their ratings, in (session, step, completion) order.
    """
    rows = (
        StepLabel.objects.filter(
            # The explicit range lets PostgreSQL scan the session index over the chunk
            # alone; the subquery applies the export's filters within it. Lists of ids
            # (`IN (...)` with ten thousand step ids) cost more to build and plan than the
            # rows they fetch.
            session_id__gte=first_pk,
            session_id__lte=last_pk,
            session__in=sessions.filter(pk__gte=first_pk, pk__lte=last_pk).values("pk"),
        )
        .order_by("session_id", "index", "ratings__completion_index")
        .values_list(
            "session_id",
            "index",
            "chosen_completion",
            _raw_json("human_completion"),
            _raw_json("extra"),
            "ratings__text",
            "ratings__rating",
            "ratings__flagged",
            _raw_json("ratings__extra"),
        )
    )
    steps: dict[int, list[dict]] = defaultdict(list)
    for (session_id, _), group in groupby(rows, key=itemgetter(0, 1)):
        group = list(group)
        _, _, chosen, human, extra, *_ = group[0]
        completions = [
            prm800k.restore(
                prm800k.modelled_completion(text=text, rating=rating, flagged=flagged),
                _loads(kept),
            )
            for *_, text, rating, flagged, kept in group
            # A step without ratings (phase 1 has steps whose completions are null)
            # comes back once, with the left join's nulls; a rating's text is never null.
            if text is not None
        ]
        modelled = {"completions": completions}
        human = json.loads(human) if human is not None else None
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


def prm800k_response(
    *, filters: ExportFilters, within: QuerySet[LabelingSession] | None = None
) -> StreamingHttpResponse:
    """A streamed JSONL download: rows are written as they are read, never held in memory."""
    records = iter_prm800k_records(filters=filters, within=within)
    lines = (json_line(record) for record in records)
    response = StreamingHttpResponse(lines, content_type="application/jsonl; charset=utf-8")
    stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
    response["Content-Disposition"] = f'attachment; filename="prm800k-{stamp}.jsonl"'
    return response
