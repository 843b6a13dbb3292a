"""Importing PRM800K label lines (phase 1 or 2): problems, solutions, labelers and sessions.

All-or-nothing like every import (see `importing`); the fields the importer does not model
are kept in each row's `extra`, so that an export gives back the same JSON objects.
"""

from collections.abc import Iterator
from datetime import datetime
from functools import partial
from pathlib import Path

from django.db import transaction
from django.utils import timezone

from core import prm800k
from labeling.export import modelled_question
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
from labeling.services.importing import (
    BATCH_SIZE,
    ImportResult,
    batched,
    check_column,
    insert_rows,
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
    wanted = {text_digest(r.problem): r for r in records}
    found = Problem.objects.in_bulk(list(wanted), field_name="text_hash")
    missing = [
        Problem(
            text=r.problem,
            text_hash=digest,
            answer=r.ground_truth_answer,
            solution=r.ground_truth_solution,
        )
        for digest, r in wanted.items()
        if digest not in found
    ]
    Problem.objects.bulk_create(missing)
    found.update({p.text_hash: p for p in missing})
    return found


def _resolve_generations(numbers: set[int]) -> dict[int, Generation]:
    found = Generation.objects.in_bulk(numbers, field_name="number")
    # In number order, so that generation ids follow numbers (the leftover queue relies on it).
    for number in sorted(numbers - found.keys()):
        found[number] = Generation.objects.create(number=number)
    return found


def _resolve_solutions(
    records: list[prm800k.ParsedRecord],
    problems: dict[str, Problem],
    generations: dict[int, Generation],
    pool: GradingPool,
) -> dict[tuple[int, str], Solution]:
    keyed: dict[tuple[int, str], prm800k.ParsedRecord] = {}
    alternatives: dict[tuple[int, str], dict[str, list[str]]] = {}
    for r in records:
        key = (problems[text_digest(r.problem)].pk, _solution_key(r))
        keyed.setdefault(key, r)
        if not alternatives.get(key):
            alternatives[key] = _offered_alternatives(r)
    found = {
        (s.problem_id, s.content_hash): s
        for s in Solution.objects.filter(
            problem_id__in={k[0] for k in keyed}, content_hash__in={k[1] for k in keyed}
        )
    }
    new = [(k, r, problems[text_digest(r.problem)]) for k, r in keyed.items() if k not in found]
    grade_answers(pairs=[(r.answer, problem.answer) for _, r, problem in new], pool=pool)
    missing = []
    for key, r, problem in new:
        solution = Solution(
            problem=problem,
            steps=r.steps,
            answer=r.answer,
            content_hash=key[1],
            is_correct=grade_answer(r.answer, problem.answer),
            source="prm800k-phase1" if r.is_phase1 else "prm800k",
            source_score=r.source_score,
            generation=generations.get(r.generation) if r.generation is not None else None,
            alternatives=alternatives[key],
        )
        missing.append(solution)
        found[key] = solution
    Solution.objects.bulk_create(missing)
    if missing:
        transaction.on_commit(partial(solutions_added.send, sender=Solution, count=len(missing)))
    # A solution served as quality control or screening in any line keeps that flag.
    for flag in ("is_quality_control", "is_screening"):
        ids = {
            found[(problems[text_digest(r.problem)].pk, _solution_key(r))].pk
            for r in records
            if getattr(r, flag)
        }
        if ids:
            Solution.objects.filter(pk__in=ids).update(**{flag: True})
    return found


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
        check_column(
            StepLabel,
            "chosen_completion",
            step.chosen_completion,
            label=f"label.steps[{i}].chosen_completion",
        )
    return record


def import_prm800k(*, path: Path, name: str | None = None) -> ImportResult:
    """Import PRM800K label lines (phase 1 or 2): problems, solutions, labelers, sessions."""
    name = name or str(path)
    result = ImportResult(details={"sessions": 0, "ratings": 0})
    imported_at = timezone.now()
    with transaction.atomic(), grading_pool() as pool:
        for batch in batched(read_jsonl(path=path, name=name), BATCH_SIZE):
            records = []
            for number, obj in batch:
                try:
                    records.append(parse_line(obj))
                except ValueError as exc:
                    raise line_failure(name, number, str(exc)) from None
                result.count_control_characters(number, *_texts(records[-1]))
            result.lines += len(records)
            _store_records(records, imported_at=imported_at, result=result, pool=pool)
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
    pool: GradingPool,
) -> None:
    labelers = labelers_by_uuid(uuids={r.labeler for r in records})
    generations = _resolve_generations({r.generation for r in records if r.generation is not None})
    problems = _resolve_problems(records)
    solutions = _resolve_solutions(records, problems, generations, pool)

    sessions = []
    for r in records:
        problem = problems[text_digest(r.problem)]
        solution = solutions[(problem.pk, _solution_key(r))]
        generation = generations.get(r.generation) if r.generation is not None else None
        session = LabelingSession(
            labeler=labelers[r.labeler],
            solution=solution,
            generation=generation,
            is_quality_control=r.is_quality_control,
            is_screening=r.is_screening,
            submitted_at=r.timestamp or imported_at,
            total_time=r.total_time,
            finish_reason=r.finish_reason,
        )
        top = prm800k.modelled_top(
            labeler=r.labeler,
            submitted_at=session.submitted_at,
            generation=r.generation,
            is_quality_control=r.is_quality_control,
            is_screening=r.is_screening,
        )
        session.extra = _compact(
            {
                "record": prm800k.remainder(_without(r.raw, "question", "label"), top),
                "question": prm800k.remainder(
                    r.raw["question"], modelled_question(problem=problem, solution=solution)
                ),
                "label": prm800k.remainder(
                    _without(r.raw["label"], "steps"),
                    prm800k.modelled_label(total_time=r.total_time, finish_reason=r.finish_reason),
                ),
            }
        )
        sessions.append(session)
    LabelingSession.objects.bulk_create(sessions)
    # bulk_create bypasses the submission that keeps Solution.labels_submitted: count the
    # labeled solutions again, so the queues stop walking past them.
    recount_labels(solutions=Solution.objects.filter(pk__in={s.solution_id for s in sessions}))

    step_rows = []
    step_completions = []
    for session, r in zip(sessions, records, strict=True):
        for index, step in enumerate(r.label_steps):
            modelled = {"completions": [c.raw for c in step.completions]}
            modelled.update(
                prm800k.modelled_step(
                    human_completion=step.human_completion,
                    chosen_completion=step.chosen_completion,
                )
            )
            step_rows.append(
                (
                    session.pk,
                    index,
                    step.chosen_completion,
                    step.human_completion,
                    prm800k.remainder(step.raw, modelled),
                )
            )
            step_completions.append(step.completions)
    step_ids = insert_rows(
        StepLabel,
        ["session_id", "index", "chosen_completion", "human_completion", "extra"],
        step_rows,
    )

    ratings = []
    for step_id, completions in zip(step_ids, step_completions, strict=True):
        for index, completion in enumerate(completions):
            ratings.append(
                (
                    step_id,
                    index,
                    completion.text,
                    completion.rating,
                    completion.flagged,
                    prm800k.remainder(
                        completion.raw,
                        prm800k.modelled_completion(
                            text=completion.text,
                            rating=completion.rating,
                            flagged=completion.flagged,
                        ),
                    ),
                )
            )
    insert_rows(
        StepRating, ["step_id", "completion_index", "text", "rating", "flagged", "extra"], ratings
    )
    result.details["sessions"] += len(sessions)
    result.details["ratings"] += len(ratings)
