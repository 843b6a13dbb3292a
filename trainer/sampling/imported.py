"""Imported labels: the step labels of a public dataset stored as problems, solutions and a
label source of their own (`ImportedLabel`), kept apart from human and rollout labels.

All or nothing, as every import: one transaction, and the first bad row raises
`ImportFailed("FILE:LINE: what is wrong")` (FILE:ROW for Parquet) with nothing stored.
Problems are matched on their text (a new one has no ground truth); solutions on their problem,
steps and answer. A solution's correctness is the dataset's own (ProcessBench's
`final_answer_correct`), else None (ungraded): a dataset without answers grades nothing wrong.
Importing a file again stores nothing twice.
"""

from functools import partial
from pathlib import Path

from django.db import transaction

from core.answers import final_answer
from core.bulk import rare_collections
from labeling.models import Problem, Solution, solution_digest, text_digest
from labeling.services.importing import (
    BATCH_SIZE,
    ImportResult,
    batched,
    check_column,
    line_failure,
)
from labeling.signals import solutions_added
from trainer.sampling.models import ImportedLabel
from trainer.sampling.public_formats import FORMATS, Record, read_records


def _check(record: Record) -> None:
    check_column(Problem, "text", record.problem, label="problem")
    check_column(Solution, "source", record.source, label="source")
    for step in record.steps:
        check_column(Solution, "answer", step, label="step")


def check_file(*, path: Path, name: str, format: str) -> int:
    """Check a whole file without the database (an upload, before its job is queued): every
    row read and parsed, every value fit for its column. Returns the rows read."""
    rows = 0
    for number, records in read_records(path=path, name=name, format=format):
        rows += 1
        for record in records:
            try:
                _check(record)
            except ValueError as exc:
                raise line_failure(name, number, str(exc)) from None
    return rows


def register_import_jobs() -> None:
    """Serve uploads of each format through labeling's import jobs (`POST /api/imports/`)."""
    from labeling.services import import_jobs

    for format in FORMATS:
        import_jobs.register_importer(
            kind=format,
            importer=partial(import_labels, format=format),
            check_file=partial(check_file, format=format),
        )


def import_labels(*, path: Path, format: str, name: str | None = None) -> ImportResult:
    """Import a ProcessBench, PRMBench or TRL stepwise-supervision file (JSONL or Parquet)."""
    name = name or str(path)
    file_name = Path(name).name
    check_column(ImportedLabel, "file_name", file_name, label="file name")
    result = ImportResult(details={"problems created": 0, "solutions created": 0})
    with rare_collections(), transaction.atomic():
        for batch in batched(read_records(path=path, name=name, format=format), BATCH_SIZE):
            for number, records in batch:
                result.lines += 1
                for record in records:
                    try:
                        _check(record)
                    except ValueError as exc:
                        raise line_failure(name, number, str(exc)) from None
                    result.count_control_characters(number, record.problem, *record.steps)
                    _store(record, row=number, format=format, file_name=file_name, result=result)
        if result.details["solutions created"]:
            count = result.details["solutions created"]
            transaction.on_commit(partial(solutions_added.send, sender=Solution, count=count))
    result.note_control_characters(name)
    return result


def _store(record: Record, *, row: int, format: str, file_name: str, result: ImportResult):
    problem = Problem.objects.filter(text_hash=text_digest(record.problem)).first()
    if problem is None:
        # No ground truth in these formats: its solutions stay ungraded.
        problem = Problem.objects.create(text=record.problem, answer="")
        result.details["problems created"] += 1
    answer = final_answer(record.steps)
    digest = solution_digest(steps=record.steps, answer=answer)
    solution = Solution.objects.filter(problem=problem, content_hash=digest).first()
    if solution is None:
        solution = Solution.objects.create(
            problem=problem,
            steps=record.steps,
            answer=answer,
            is_correct=record.is_correct,
            source=record.source,
            meta={"imported_from": f"{format}:{file_name}:{row}"},
        )
        result.details["solutions created"] += 1
    # The same labels of a solution from this file (PRMBench repeats an original process on
    # each of its modified rows) or a second import of it are stored once.
    same = ImportedLabel.objects.filter(solution=solution, format=format, file_name=file_name)
    if any(ratings == record.ratings for ratings in same.values_list("ratings", flat=True)):
        result.unchanged += 1
        return
    ImportedLabel.objects.create(
        solution=solution, format=format, file_name=file_name, row=row, ratings=record.ratings
    )
    result.created += 1
