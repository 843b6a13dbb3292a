"""Reading public step-label datasets: ProcessBench, PRMBench and TRL stepwise supervision.

Each format's row becomes one or more `Record`s: a problem, a solution's steps, the rating of
each step the dataset labels (+1 or -1) and the final answer's correctness when the dataset
says it (else None: ungraded, never "wrong"). Rows come from JSON Lines (strict JSON, numbered
by line) or Parquet (numbered by row from 1), so a bad row is refused as FILE:LINE or FILE:ROW.
No database here: `trainer.sampling.imported` stores the records, and the ProcessBench
evaluation (`trainer.evaluation.processbench`) reads its items with `parse_processbench`.

- ProcessBench (Qwen/ProcessBench): `problem`, `steps`, `label` (index of the first wrong
  step, -1 when none), optional `id`, `generator`, `final_answer_correct`. Steps up to the
  first wrong one are labeled (+1 before it, -1 on it); with label -1 every step is +1.
- PRMBench (hitsmy/PRMBench_Preview): `modified_question`, `modified_process`,
  `error_steps` (1-based), `original_question`, `original_process`, `classification`, `idx`,
  `reason`. The modified process is labeled -1 on its error steps and +1 elsewhere; the
  original process, as PRMBench's own evaluation does, is one more record, every step +1.
- TRL stepwise supervision (trl-lib/math_shepherd, trl-lib/prm800k): `prompt`,
  `completions`, `labels` (one bool per completion): True is +1, False -1.
"""

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings

from labeling.services.importing import ImportFailed, line_failure, read_jsonl

FORMATS = ("processbench", "prmbench", "trl")
PARQUET_BATCH_ROWS = 1000


@dataclass(frozen=True)
class Record:
    problem: str
    steps: list[str]
    ratings: list[int]  # +1 / -1 per labeled step, from step 0; may be shorter than steps
    is_correct: bool | None = None  # the dataset's verdict on the final answer, if it gives one
    source: str = ""  # the model that wrote the solution, when the dataset names it


@dataclass(frozen=True)
class ProcessBenchItem:
    problem: str
    steps: list[str]
    label: int  # the first wrong step, or -1
    id: str = ""
    generator: str = ""
    final_answer_correct: bool | None = None


def _text(obj: dict, key: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{key} must be a non-empty text")
    return value


def _texts(obj: dict, key: str) -> list[str]:
    value = obj.get(key)
    if not isinstance(value, list) or not value:
        raise ValueError(f"{key} must be a non-empty list of texts")
    for i, step in enumerate(value):
        if not isinstance(step, str) or not step.strip():
            raise ValueError(f"{key}[{i}] must be a non-empty text")
    return value


def _optional(obj: dict, key: str, kind: type) -> Any:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise ValueError(f"{key} must be a {kind.__name__}, got {json.dumps(value)[:80]}")
    return value


def parse_processbench(obj: dict) -> ProcessBenchItem:
    """One ProcessBench row; ValueError says what is wrong."""
    problem, steps, label = _text(obj, "problem"), _texts(obj, "steps"), obj.get("label")
    if isinstance(label, bool) or not isinstance(label, int) or not -1 <= label < len(steps):
        raise ValueError(f"label must be -1 or a step index from 0 to {len(steps) - 1}")
    item_id = obj.get("id")
    return ProcessBenchItem(
        problem=problem,
        steps=steps,
        label=label,
        id="" if item_id is None else str(item_id),
        generator=_optional(obj, "generator", str) or "",
        final_answer_correct=_optional(obj, "final_answer_correct", bool),
    )


def processbench_records(obj: dict) -> list[Record]:
    item = parse_processbench(obj)
    labeled = len(item.steps) if item.label == -1 else item.label + 1
    ratings = [1] * labeled
    if item.label != -1:
        ratings[-1] = -1
    return [Record(item.problem, item.steps, ratings, item.final_answer_correct, item.generator)]


def prmbench_records(obj: dict) -> list[Record]:
    steps = _texts(obj, "modified_process")
    question = obj.get("modified_question") or obj.get("original_question")
    if not isinstance(question, str) or not question.strip():
        raise ValueError("modified_question must be a non-empty text")
    errors = obj.get("error_steps")
    if not isinstance(errors, list) or not all(
        type(e) is int and 1 <= e <= len(steps) for e in errors
    ):
        raise ValueError(f"error_steps must be a list of step numbers from 1 to {len(steps)}")
    wrong = set(errors)
    records = [Record(question, steps, [-1 if i + 1 in wrong else 1 for i in range(len(steps))])]
    if obj.get("original_process") is not None:
        original = _texts(obj, "original_process")
        records.append(Record(_text(obj, "original_question"), original, [1] * len(original)))
    return records


def trl_records(obj: dict) -> list[Record]:
    prompt, completions = _text(obj, "prompt"), _texts(obj, "completions")
    labels = obj.get("labels")
    if (
        not isinstance(labels, list)
        or len(labels) != len(completions)
        or not all(isinstance(label, bool) for label in labels)
    ):
        raise ValueError(f"labels must be {len(completions)} booleans, one per completion")
    return [Record(prompt, completions, [1 if good else -1 for good in labels])]


PARSERS: dict[str, Callable[[dict], list[Record]]] = {
    "processbench": processbench_records,
    "prmbench": prmbench_records,
    "trl": trl_records,
}


def is_parquet(path: Path) -> bool:
    with path.open("rb") as f:
        return f.read(4) == b"PAR1"


def _parquet_failure(name: str, row: int, exc: Exception) -> ImportFailed:
    """A broken Parquet file as the uploader's problem (a 400), never a crash (a 500)."""
    if isinstance(exc, UnicodeDecodeError):
        return line_failure(name, row, f"a text is not UTF-8 ({exc.reason})")
    return line_failure(name, row, f"corrupt Parquet data ({str(exc)[:200]})")


def check_parquet_footer(metadata, *, name: str) -> None:
    """Refuse a Parquet file whose footer declares more rows or more uncompressed bytes than
    an import may hold, before any of its pages is read (they are compressed: a small file
    on the wire can expand to far more than IMPORT_MAX_UPLOAD_BYTES)."""
    max_rows, max_bytes = settings.IMPORT_MAX_ROWS, settings.IMPORT_MAX_EXPANDED_BYTES
    if metadata.num_rows > max_rows:
        raise ImportFailed(
            f"{name}: the file declares {metadata.num_rows:,} rows, more than the limit "
            f"of {max_rows:,} (IMPORT_MAX_ROWS)"
        )
    declared = 0
    for i in range(metadata.num_row_groups):
        group = metadata.row_group(i)
        # Both sizes are the writer's word; take the larger so that neither one understating
        # the data lets it through (reading counts again, for a footer that lies in both).
        columns = sum(group.column(j).total_uncompressed_size for j in range(group.num_columns))
        declared += max(group.total_byte_size, columns)
    if declared > max_bytes:
        raise ImportFailed(
            f"{name}: the file expands to {declared:,} bytes, more than the limit of "
            f"{max_bytes:,} (IMPORT_MAX_EXPANDED_BYTES)"
        )


def read_parquet(*, path: Path, name: str) -> Iterator[tuple[int, dict]]:
    """Yield (row number from 1, row as a dict) in batches, failing with FILE:ROW.

    The one reader of Parquet, uploads and commands alike: its footer is checked against the
    import limits before the data is read, and the rows and bytes actually decoded are
    counted against the same limits, so a footer that understates them is stopped too.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq  # only imports that read Parquet pay for pyarrow

    try:
        table = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow raises several types for a broken file
        raise ImportFailed(f"{name}: not a Parquet file ({exc})") from None
    check_parquet_footer(table.metadata, name=name)
    max_rows, max_bytes = settings.IMPORT_MAX_ROWS, settings.IMPORT_MAX_EXPANDED_BYTES
    number = expanded = 0
    batches = table.iter_batches(batch_size=PARQUET_BATCH_ROWS)
    while True:
        try:
            batch = next(batches, None)
            if batch is None:
                return
            expanded += batch.nbytes
            if number + batch.num_rows > max_rows or expanded > max_bytes:
                raise ImportFailed(
                    f"{name}:{number + 1}: the file holds more than its footer declares, past "
                    f"the limit of {max_rows:,} rows or {max_bytes:,} bytes"
                )
            rows = batch.to_pylist()  # Python objects only for a batch within the limits
        except (pa.ArrowException, OSError, ValueError) as exc:  # ValueError: bad UTF-8 too
            raise _parquet_failure(name, number + 1, exc) from None
        for row in rows:
            number += 1
            yield number, row


def read_rows(*, path: Path, name: str) -> Iterator[tuple[int, dict]]:
    """Rows of a JSONL or Parquet file (told apart by Parquet's magic bytes)."""
    if is_parquet(path):
        return read_parquet(path=path, name=name)
    return read_jsonl(path=path, name=name)


def read_records(*, path: Path, name: str, format: str) -> Iterator[tuple[int, list[Record]]]:
    """(line or row, its records) of a file in `format`; ImportFailed names FILE:LINE."""
    if format not in PARSERS:
        raise ImportFailed(f"unknown format {format!r}; one of {', '.join(FORMATS)}")
    parse = PARSERS[format]
    for number, obj in read_rows(path=path, name=name):
        try:
            yield number, parse(obj)
        except ValueError as exc:
            raise line_failure(name, number, str(exc)) from None


def read_processbench(*, path: Path | str, name: str | None = None) -> list[ProcessBenchItem]:
    """Every item of a ProcessBench file (JSONL or Parquet); ImportFailed names FILE:LINE."""
    path = Path(path)
    name = name or path.name
    items = []
    for number, obj in read_rows(path=path, name=name):
        try:
            items.append(parse_processbench(obj))
        except ValueError as exc:
            raise line_failure(name, number, str(exc)) from None
    return items
