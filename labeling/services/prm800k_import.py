"""Importing PRM800K label lines (phase 1 or 2): problems, solutions, labelers and sessions.

All-or-nothing like every import (see `importing`); the fields the importer does not model
are kept in each row's `extra`, so that an export gives back the same JSON objects.
"""

from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import NamedTuple

from django.db import transaction
from django.utils import timezone

from core import prm800k
from core.bulk import rare_collections
from labeling import grading
from labeling.grading import GradingPool, grade_answer, grade_answers, grading_pool
from labeling.models import (
    Generation,
    LabelingSession,
    Problem,
    Solution,
    StepLabel,
    StepRating,
    solution_digest,
    text_digest,
)
from labeling.services.bulk import insert_rows, refresh_planner_statistics
from labeling.services.importing import (
    BATCH_SIZE,
    ImportResult,
    batched,
    check_column,
    line_failure,
    read_jsonl,
)
from labeling.services.labelers import labelers_by_uuid
from labeling.services.workbench import recount_labels
from labeling.signals import solutions_added


def _without(obj: dict, *keys: str) -> dict:
    return {k: v for k, v in obj.items() if k not in keys}


def _compact(parts: dict) -> dict:
    return {k: v for k, v in parts.items() if v}


def _resolve_problems(records: list[prm800k.ParsedRecord]) -> dict[str, Problem]:
    """Each line's problem by its text (hashed once per text), new ones stored."""
    wanted = {r.problem: r for r in records}
    digests = {text: text_digest(text) for text in wanted}
    found = Problem.objects.in_bulk(list(digests.values()), field_name="text_hash")
    missing = [
        Problem(
            text=text,
            text_hash=digests[text],
            answer=r.ground_truth_answer,
            solution=r.ground_truth_solution,
        )
        for text, r in wanted.items()
        if digests[text] not in found
    ]
    Problem.objects.bulk_create(missing)
    found.update({p.text_hash: p for p in missing})
    return {text: found[digest] for text, digest in digests.items()}


def _resolve_generations(numbers: set[int]) -> dict[int, Generation]:
    found = Generation.objects.in_bulk(numbers, field_name="number")
    # In number order, so that generation ids follow numbers (the leftover queue relies on it).
    for number in sorted(numbers - found.keys()):
        found[number] = Generation.objects.create(number=number)
    return found


class _Stored(NamedTuple):
    """What a line's export needs of its solution, without a model instance per solution."""

    pk: int
    steps: list[str]
    answer: str
    source_score: float | None


SOLUTION_COLUMNS = [
    "problem_id",
    "steps",
    "answer",
    "content_hash",
    "is_correct",
    "source",
    "source_score",
    "generation_id",
    "alternatives",
    "labels_submitted",
]


class _Grader:
    """Grades new solutions' answers on the pool's processes while the import goes on.

    Grading a PRM800K-size file takes about as long as storing it; done batch by batch in
    line it doubled the import. A solution is stored with the verdict already known for its
    (answer, ground truth) pair, or a placeholder; `finish` waits for the rest and writes
    the verdicts that differ from the placeholder, in the import's transaction.
    """

    PLACEHOLDER = False

    def __init__(self, pool: GradingPool) -> None:
        self.pool = pool
        self.waiting: list[tuple[dict[int, tuple[str, str]], Future]] = []
        self.thread: ThreadPoolExecutor | None = None

    @staticmethod
    def known(pair: tuple[str, str]) -> grading.Verdict | None:
        """The cached verdict of `pair`, None if it has none yet. Read once per solution:
        the grading thread fills and empties the cache meanwhile."""
        return grading.cached(pair)

    def grade(self, pending: dict[int, tuple[str, str]]) -> None:
        """Grade the answers of these new solutions (id: (answer, ground truth)), stored
        with the placeholder."""
        distinct = set(pending.values())
        if self.pool.processes <= 1 or len(distinct) < self.pool.MIN_PAIRS:
            # Too few to pay for the workers (or no workers): here and now, as before.
            grade_answers(pairs=distinct, pool=self.pool)
            self._write({pk: grade_answer(*pair) for pk, pair in pending.items()})
            return
        if self.thread is None:
            # The workers are forked here, in the main thread, before any other thread runs.
            self.pool.grade([("0", "0")] * self.pool.MIN_PAIRS)
            self.thread = ThreadPoolExecutor(1, thread_name_prefix="grading")
        self.waiting.append((pending, self.thread.submit(_grade_pairs, distinct, self.pool)))

    def finish(self) -> None:
        """Wait for the grading still under way and store its verdicts."""
        for pending, future in self.waiting:
            verdicts = future.result()
            self._write({pk: verdicts[pair] for pk, pair in pending.items()})
        self.waiting.clear()

    def _write(self, verdicts: dict[int, bool | None]) -> None:
        changed: dict[bool | None, list[int]] = {}
        for pk, verdict in verdicts.items():
            if verdict is not self.PLACEHOLDER:
                changed.setdefault(verdict, []).append(pk)
        for verdict, ids in changed.items():
            for chunk in batched(ids, BATCH_SIZE):
                Solution.objects.filter(pk__in=chunk).update(is_correct=verdict)

    def close(self) -> None:
        if self.thread is not None:
            self.thread.shutdown(cancel_futures=True)
            self.thread = None

    def __enter__(self) -> "_Grader":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def _grade_pairs(pairs: set[tuple[str, str]], pool: GradingPool) -> dict[tuple[str, str], bool]:
    # Read back in the grading thread: the verdict cache may be emptied by a later batch.
    grade_answers(pairs=pairs, pool=pool)
    return {pair: grade_answer(*pair) for pair in pairs}


def _resolve_solutions(
    records: list[prm800k.ParsedRecord],
    problems: dict[str, Problem],
    generations: dict[int, Generation],
    grader: "_Grader",
) -> tuple[list["_Stored"], set[int]]:
    """Each line's solution, found by (problem id, content hash) or stored; and the ids of
    those that were there before this batch.

    A new solution is stored with this batch's labels of it counted (every imported label
    is submitted), so that only the solutions that were there need counting again.
    """
    keys = [(problems[r.problem].pk, _solution_key(r)) for r in records]
    keyed: dict[tuple[int, str], prm800k.ParsedRecord] = {}
    alternatives: dict[tuple[int, str], dict[str, list[str]]] = {}
    labels: dict[tuple[int, str], int] = {}
    for key, r in zip(keys, records, strict=True):
        keyed.setdefault(key, r)
        labels[key] = labels.get(key, 0) + 1
        if not alternatives.get(key):
            alternatives[key] = _offered_alternatives(r)
    found = {
        (problem_id, digest): _Stored(pk, steps, answer, score)
        for pk, problem_id, digest, steps, answer, score in Solution.objects.filter(
            problem_id__in={k[0] for k in keyed}, content_hash__in={k[1] for k in keyed}
        ).values_list("pk", "problem_id", "content_hash", "steps", "answer", "source_score")
    }
    existing = {stored.pk for stored in found.values()}
    new = [(k, r, problems[r.problem]) for k, r in keyed.items() if k not in found]
    pairs = [(r.answer, problem.answer) for _, r, problem in new]
    known = [grader.known(pair) for pair in pairs]
    rows = [
        (
            problem.pk,
            r.steps,
            r.answer,
            key[1],
            grader.PLACEHOLDER if verdict is None else grading.stored(verdict),
            "prm800k-phase1" if r.is_phase1 else "prm800k",
            r.source_score,
            generations[r.generation].pk if r.generation is not None else None,
            alternatives[key],
            labels[key],
        )
        for (key, r, problem), verdict in zip(new, known, strict=True)
    ]
    ids = insert_rows(Solution, SOLUTION_COLUMNS, rows)
    grader.grade(
        {pk: pair for pk, pair, verdict in zip(ids, pairs, known, strict=True) if verdict is None}
    )
    for (key, r, _), pk in zip(new, ids, strict=True):
        found[key] = _Stored(pk, r.steps, r.answer, r.source_score)
    if new:
        transaction.on_commit(partial(solutions_added.send, sender=Solution, count=len(new)))
    solutions = [found[key] for key in keys]
    # A solution served as quality control or screening in any line keeps that flag.
    for flag in ("is_quality_control", "is_screening"):
        ids = {stored.pk for stored, r in zip(solutions, records, strict=True) if getattr(r, flag)}
        if ids:
            Solution.objects.filter(pk__in=ids).update(**{flag: True})
    return solutions, existing


def _offered_alternatives(record: prm800k.ParsedRecord) -> dict[str, list[str]]:
    # In phase 2 the completions after the first at a step are the alternatives the labeler
    # was shown; kept on the solution so that the workbench offers them again. (Phase 1
    # steps are the labeler's own path, so they offer nothing to a pre-generated solution.)
    if record.is_phase1:
        return {}
    return {
        str(i): [c.text for c in step.completions[1:]]
        for i, step in enumerate(record.label_steps[: len(record.steps)])
        if len(step.completions) > 1
    }


def _solution_key(record: prm800k.ParsedRecord) -> str:
    return solution_digest(steps=record.steps, answer=record.answer)


# The usual completion index (or none) needs no look at the column's limits: a million steps.
# (A set, not a range: `None in range(…)` compares None with each of its numbers.)
_ORDINARY_CHOICES = frozenset([None, *range(1000)])


def parse_line(obj: dict) -> prm800k.ParsedRecord:
    """One PRM800K line, checked against the schema and against what its columns can hold;
    ValueError (InvalidRecord for the schema) says what is wrong."""
    record = prm800k.parse_record(obj)
    check_column(Generation, "number", record.generation, label="generation")
    check_column(LabelingSession, "total_time", record.total_time, label="label.total_time")
    check_column(
        Solution,
        "source_score",
        record.source_score,
        label="question.pre_generated_verifier_score",
    )
    for i, step in enumerate(record.label_steps):
        if step.chosen_completion in _ORDINARY_CHOICES:
            continue
        check_column(
            StepLabel,
            "chosen_completion",
            step.chosen_completion,
            label=f"label.steps[{i}].chosen_completion",
        )
    return record


_IMPORTED = (Problem, Solution, Generation, LabelingSession, StepLabel, StepRating)
# What each batch looks up (its problems, its solutions and their sessions to count): the
# million step labels and ratings are only written until the import ends.
_LOOKED_UP = (Problem, Solution, LabelingSession)


def import_prm800k(*, path: Path, name: str | None = None) -> ImportResult:
    """Import PRM800K label lines (phase 1 or 2): problems, solutions, labelers, sessions."""
    name = name or str(path)
    result = ImportResult(details={"sessions": 0, "ratings": 0})
    imported_at = timezone.now()
    with rare_collections(), transaction.atomic(), grading_pool() as pool, _Grader(pool) as grader:
        lines = read_jsonl(path=path, name=name)
        for batch_number, batch in enumerate(batched(lines, BATCH_SIZE)):
            if batch_number and not batch_number & (batch_number - 1):
                # The tables doubled since the planner last counted them (batches 1, 2, 4, …):
                # planned as the few rows there were, each batch's lookups of its solutions
                # read whole tables and the import grew quadratic.
                refresh_planner_statistics(models=_LOOKED_UP)
            records = []
            for number, obj in batch:
                try:
                    records.append(parse_line(obj))
                except ValueError as exc:
                    raise line_failure(name, number, str(exc)) from None
                result.count_control_characters(number, *_texts(records[-1]))
            result.lines += len(records)
            _store_records(records, imported_at=imported_at, result=result, grader=grader)
        grader.finish()
    refresh_planner_statistics(models=_IMPORTED)
    result.created = result.details["sessions"]
    result.note_control_characters(name)
    return result


def _texts(record: prm800k.ParsedRecord) -> Iterator[str]:
    """Every text of a line that a page shows."""
    yield from (record.problem, record.ground_truth_answer, record.ground_truth_solution)
    yield from (*record.steps, record.answer)
    for step in record.label_steps:
        yield from (c.text for c in step.completions)
        human = step.human_completion
        if isinstance(human, dict) and isinstance(human.get("text"), str):
            yield human["text"]


def _store_records(
    records: list[prm800k.ParsedRecord],
    *,
    imported_at: datetime,
    result: ImportResult,
    grader: _Grader,
) -> None:
    labelers = labelers_by_uuid(uuids={r.labeler for r in records})
    generations = _resolve_generations({r.generation for r in records if r.generation is not None})
    problems = _resolve_problems(records)
    solutions, existing = _resolve_solutions(records, problems, generations, grader)

    session_rows = []
    for r, solution in zip(records, solutions, strict=True):
        problem = problems[r.problem]
        submitted_at = r.timestamp or imported_at
        top = prm800k.modelled_top(
            labeler=r.labeler,
            submitted_at=submitted_at,
            generation=r.generation,
            is_quality_control=r.is_quality_control,
            is_screening=r.is_screening,
        )
        question = prm800k.modelled_question(
            problem=problem.text,
            answer=problem.answer,
            solution=problem.solution,
            steps=solution.steps,
            pre_answer=solution.answer,
            score=solution.source_score,
        )
        extra = _compact(
            {
                "record": prm800k.remainder(_without(r.raw, "question", "label"), top),
                "question": prm800k.remainder(r.raw["question"], question),
                "label": prm800k.remainder(
                    _without(r.raw["label"], "steps"),
                    prm800k.modelled_label(total_time=r.total_time, finish_reason=r.finish_reason),
                ),
            }
        )
        session_rows.append(
            (
                labelers[r.labeler].pk,
                solution.pk,
                generations[r.generation].pk if r.generation is not None else None,
                r.is_quality_control,
                r.is_screening,
                submitted_at,
                r.total_time,
                r.finish_reason,
                extra,
            )
        )
    session_ids = insert_rows(LabelingSession, SESSION_COLUMNS, session_rows)
    # Rows bypass the submission that keeps Solution.labels_submitted: count the solutions
    # that were there again (new ones were stored counted), so the queues stop walking past.
    if existing:
        recount_labels(solutions=Solution.objects.filter(pk__in=existing))

    step_rows = []
    step_completions = []
    for session_id, r in zip(session_ids, records, strict=True):
        for index, step in enumerate(r.label_steps):
            step_rows.append(
                (
                    session_id,
                    index,
                    step.chosen_completion,
                    step.human_completion,
                    _step_remainder(step),
                )
            )
            step_completions.append(step.completions)
    step_ids = insert_rows(
        StepLabel,
        ["session_id", "index", "chosen_completion", "human_completion", "extra"],
        step_rows,
    )

    ratings = [
        (
            step_id,
            index,
            completion.text,
            completion.rating,
            completion.flagged,
            _completion_remainder(completion),
        )
        for step_id, completions in zip(step_ids, step_completions, strict=True)
        for index, completion in enumerate(completions)
    ]
    insert_rows(
        StepRating,
        ["step_id", "completion_index", "text", "rating", "flagged", "extra"],
        ratings,
        ids=False,
    )
    result.details["sessions"] += len(session_rows)
    result.details["ratings"] += len(ratings)


SESSION_COLUMNS = [
    "labeler_id",
    "solution_id",
    "generation_id",
    "is_quality_control",
    "is_screening",
    "submitted_at",
    "total_time",
    "finish_reason",
    "extra",
]
_STEP_KEYS = {"completions", "human_completion", "chosen_completion"}
_COMPLETION_KEYS = {"text", "rating", "flagged"}


def _step_remainder(step: prm800k.ParsedStep) -> dict:
    # A million steps: the usual one (exactly the modelled keys, completions a list, which
    # parsing took as they came) keeps nothing, known without comparing values.
    raw = step.raw
    if raw.keys() == _STEP_KEYS and type(raw["completions"]) is list:
        return {}
    modelled = {"completions": [c.raw for c in step.completions]}
    modelled.update(
        prm800k.modelled_step(
            human_completion=step.human_completion, chosen_completion=step.chosen_completion
        )
    )
    return prm800k.remainder(raw, modelled)


def _completion_remainder(completion: prm800k.ParsedCompletion) -> dict:
    # Likewise for a completion with exactly the modelled keys: its values are the columns'.
    if completion.raw.keys() == _COMPLETION_KEYS:
        return {}
    return prm800k.remainder(
        completion.raw,
        prm800k.modelled_completion(
            text=completion.text, rating=completion.rating, flagged=completion.flagged
        ),
    )
