"""PRM800K export: every submitted label as one JSON line, streamed from chunked queries.

One path for every door: `write_prm800k` for the command, `prm800k_response` for the page,
the API and the admin action. Labelers appear only by their UUID.
"""

import json
import uuid
from collections import defaultdict
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from itertools import groupby
from operator import itemgetter
from typing import Any, NamedTuple, TextIO

from django.db import connection
from django.db.models import QuerySet, TextField
from django.db.models.functions import Cast
from django.http import StreamingHttpResponse
from django.utils import timezone
from tqdm import tqdm

from core import prm800k
from labeling.models import LabelingSession, Problem, Solution, StepLabel, StepRating

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


def iter_prm800k_lines(
    *, filters: ExportFilters, within: QuerySet[LabelingSession] | None = None
) -> Iterator[str]:
    """Yield one PRM800K JSON line per submitted session, reading the database in chunks.

    `within` narrows the export to a queryset (an admin changelist selection, say).
    """
    sessions = submitted_sessions(filters=filters, within=within)
    # Plain value rows, not model instances: building five objects per session was half
    # of the export's time.
    if connection.vendor == "postgresql":
        yield from _lines_with_database_steps(
            sessions.values_list(*_DATABASE_RECORD_COLUMNS).order_by("pk")
        )
        return
    rows = sessions.values_list(*_RECORD_COLUMNS).order_by("pk")
    last_pk = 0
    while True:
        chunk = list(rows.filter(pk__gt=last_pk)[:EXPORT_CHUNK])
        if not chunk:
            return
        first_pk, last_pk = chunk[0][0], chunk[-1][0]
        steps = _steps_of(sessions=sessions, first_pk=first_pk, last_pk=last_pk)
        for row in chunk:
            yield json_line(_record(_SessionRow(*row), steps.get(row[0], [])))


def _lines_with_database_steps(rows: QuerySet) -> Iterator[str]:
    """The lines of `rows` (session value rows), their steps' JSON written by PostgreSQL.

    While PostgreSQL builds one chunk's steps (in a thread, on this thread's connection:
    psycopg2 runs one statement at a time on it, and the export's transaction is the same),
    Python writes the previous chunk's lines, so that the two cores both work.
    """
    with ThreadPoolExecutor(1, thread_name_prefix="export") as fetcher, connection.cursor() as c:
        last_pk, previous = 0, None
        while True:
            chunk = list(rows.filter(pk__gt=last_pk)[:EXPORT_CHUNK])
            if chunk:
                last_pk = chunk[-1][0]
                ids = [row[0] for row in chunk]
                steps = fetcher.submit(_steps_json, cursor=c.cursor, session_ids=ids)
            if previous is not None:
                yield from _chunk_lines(*previous)
            if not chunk:
                return
            previous = (chunk, steps)


def _chunk_lines(chunk: list[tuple], steps: Future) -> Iterator[str]:
    texts = steps.result()
    for row in chunk:
        # The solution's steps stay the database's JSON text, spliced in like the label's.
        session = _SessionRow(*row)
        steps_text = session.steps
        session = session._replace(extra=_loads(session.extra), steps=_QUESTION_STEPS_MARK)
        line = json.dumps(_record(session, _STEPS_MARK), ensure_ascii=False)
        line = line.replace(_QUESTION_STEPS_MARK_JSON, steps_text, 1)
        yield line.replace(_STEPS_MARK_JSON, texts.get(row[0], "[]"), 1) + "\n"


def iter_prm800k_records(
    *, filters: ExportFilters, within: QuerySet[LabelingSession] | None = None
) -> Iterator[dict]:
    """The objects of `iter_prm800k_lines`."""
    for line in iter_prm800k_lines(filters=filters, within=within):
        yield json.loads(line)


# Stands for a session's `label.steps` while its record is encoded; PostgreSQL's text of them
# replaces it. Stored text never holds a NUL (the importer refuses it), so it cannot clash.
_STEPS_MARK = "\x00steps"
_STEPS_MARK_JSON = json.dumps(_STEPS_MARK)
_QUESTION_STEPS_MARK = "\x00pre_generated_steps"
_QUESTION_STEPS_MARK_JSON = json.dumps(_QUESTION_STEPS_MARK)


def _restored(modelled: str, alias: str) -> str:
    """SQL for the JSON text of `prm800k.restore(modelled, alias.extra)`, where `modelled` is
    SQL for JSON text. Only where extra is not {} does jsonb do the work (and order the keys)."""
    return (
        f"CASE WHEN {alias}.extra = '{{}}'::jsonb THEN {modelled} ELSE ((({modelled})::jsonb - "
        f"ARRAY(SELECT jsonb_array_elements_text(COALESCE({alias}.extra -> 'absent', '[]'))))"
        f" || COALESCE({alias}.extra -> 'keys', '{{}}'))::text END"
    )


def _json(value: str) -> str:
    """SQL for the JSON text of a column (a text, a number, a boolean or jsonb)."""
    return f"COALESCE(to_json({value})::text, 'null')"


# Each session's `label.steps` as JSON text, written by PostgreSQL: a million steps and
# ratings cost it less than Python spends on their rows alone. The text is built as
# json.dumps(..., ensure_ascii=False) writes it: keys in PRM800K's order, ", " and ": "
# between items (jsonb's text has the same separators), non-ASCII left as it is.
_COMPLETION_SQL = _restored(
    """'{"text": ' || to_json(r.text)::text"""
    + """ || ', "rating": ' || """
    + _json("r.rating")
    + """ || ', "flagged": ' || """
    + _json("r.flagged")
    + " || '}'",
    "r",
)
_STEP_SQL = _restored(
    """'{"completions": ' || COALESCE('[' || c.completions || ']', '[]')"""
    + """ || ', "human_completion": ' || """
    + _json("st.human_completion")
    + """ || ', "chosen_completion": ' || """
    + _json("st.chosen_completion")
    + " || '}'",
    "st",
)
# Each step's ratings are read through the (step, completion) index, one step at a time
# (LATERAL): a join lets the planner hash the whole ratings table for every chunk, which made
# the export quadratic (265 ms a chunk at a million ratings, against 25 ms).
_STEPS_SQL = f"""
SELECT session_id, '[' || string_agg(step, ', ' ORDER BY index) || ']' FROM (
    SELECT st.session_id, st.index, {_STEP_SQL} AS step
    FROM {StepLabel._meta.db_table} st
    LEFT JOIN LATERAL (
        SELECT string_agg({_COMPLETION_SQL}, ', ' ORDER BY r.completion_index) AS completions
        FROM {StepRating._meta.db_table} r WHERE r.step_id = st.id
    ) c ON true
    WHERE st.session_id >= %s AND st.session_id <= %s AND st.session_id = ANY(%s)
) steps GROUP BY session_id
"""


def _steps_json(*, cursor: Any, session_ids: list[int]) -> dict[int, str]:
    """The `label.steps` of each of these sessions (those with steps) as JSON text;
    `cursor` is a psycopg2 cursor."""
    # The explicit range lets PostgreSQL scan the session index over the chunk alone.
    cursor.execute(_STEPS_SQL, [min(session_ids), max(session_ids), session_ids])
    return dict(cursor.fetchall())


def _raw_json(field: str) -> Cast:
    # A million ratings carry an `extra` that is nearly always {}: reading it as text and
    # decoding only the rest halves the export's time in Python.
    return Cast(field, output_field=TextField())


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


# PostgreSQL's path reads `extra` and the solution's steps as JSON text: `extra` is nearly
# always {} (left undecoded), and the steps' text goes into the line as it is (jsonb writes
# json.dumps's separators, and leaves non-ASCII as ensure_ascii=False does).
_DATABASE_RECORD_COLUMNS = tuple(
    _raw_json(column) if column in ("extra", "solution__steps") else column
    for column in _RECORD_COLUMNS
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


def _record(row: _SessionRow, steps: list[dict] | str) -> dict:
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
    lines = iter_prm800k_lines(filters=filters)
    if progress is not None:
        total = submitted_sessions(filters=filters).count()
        lines = tqdm(
            lines,
            total=total,
            desc="exporting",
            unit=" lines",
            file=progress,
            disable=total < PROGRESS_MIN_LINES,
        )
    count = 0
    for line in lines:
        out.write(line)
        count += 1
    return count


def prm800k_response(
    *, filters: ExportFilters, within: QuerySet[LabelingSession] | None = None
) -> StreamingHttpResponse:
    """A streamed JSONL download: rows are written as they are read, never held in memory."""
    lines = iter_prm800k_lines(filters=filters, within=within)
    response = StreamingHttpResponse(lines, content_type="application/jsonl; charset=utf-8")
    stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
    response["Content-Disposition"] = f'attachment; filename="prm800k-{stamp}.jsonl"'
    return response
