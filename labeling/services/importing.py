"""Importing problems and candidate solutions from JSONL, and the reading every import shares
(the bulk writing is `bulk`).

Every import is all-or-nothing: it runs in one transaction, and the first bad line raises
`ImportFailed("FILE:LINE: what is wrong")`, which rolls back everything from that file.
Files are read line by line and written in batches, so memory does not grow with file size.
"""

import functools
import json
import math
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import partial
from itertools import islice
from pathlib import Path
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import MaxLengthValidator, MaxValueValidator, MinValueValidator
from django.db import transaction
from django.db.backends.base.operations import BaseDatabaseOperations
from django.db.models import Field, FloatField, Model
from tqdm import tqdm

from core import strictjson
from core.answers import final_answer
from core.bulk import rare_collections
from core.errors import Invalid
from labeling.export import PROGRESS_MIN_LINES
from labeling.grading import grade_answer, grade_answers, grading_pool, regrade_solutions
from labeling.mathtext import control_characters
from labeling.models import Problem, Solution, solution_digest, text_digest
from labeling.signals import solutions_added

BATCH_SIZE = 1000


class ImportFailed(Invalid):
    """An import stopped at a bad line; nothing from the file was stored."""


@dataclass
class ImportResult:
    lines: int = 0
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    details: dict[str, int] = field(default_factory=dict)
    # What an admin should know about the file that did not stop it.
    notes: list[str] = field(default_factory=list)
    # Invisible format and control characters (bidi overrides, zero-width spaces) in its text,
    # by code point. The text is stored as it came; every page shows them as visible marks.
    control_characters: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._control_lines: list[int] = []  # not a field: not part of the job's result

    def count_control_characters(self, number: int, *texts: str) -> None:
        """Count the invisible characters of line `number`'s `texts`."""
        # One scan of the texts joined by a space (neither a control character nor a line
        # feed that would turn a lone \r into \r\n): a PRM800K line has two dozen texts.
        found = control_characters(" ".join(texts))
        if found:
            self._control_lines.append(number)
            for code, count in found.items():
                self.control_characters[code] = self.control_characters.get(code, 0) + count

    def note_control_characters(self, name: str) -> None:
        lines = self._control_lines
        if not lines:
            return
        codes = ", ".join(f"{code} ×{n}" for code, n in sorted(self.control_characters.items()))
        first = ", ".join(f"{name}:{n}" for n in lines[:5]) + (", …" if len(lines) > 5 else "")
        self.notes.append(
            f"{len(lines):,} line(s) hold invisible format or control characters ({codes}): "
            f"kept as they are, and shown on every page as marks like ⟨U+202E⟩ ({first})"
        )
        lines.clear()


# ---------------------------------------------------------------------------------------------
# Reading JSONL


def _count_lines(path: Path) -> int:
    with path.open("rb") as f:
        return strictjson.count_lines(f)


def read_jsonl(*, path: Path, name: str, progress: bool = True) -> Iterator[tuple[int, dict]]:
    """Yield (line number, object) for each non-blank line, failing with FILE:LINE.

    Lines are strict JSON (core/strictjson.py), as request bodies are, and at most
    MAX_UPLOAD_LINE_BYTES long: a longer one is refused before it is read whole.
    """
    total = _count_lines(path)
    with path.open("rb") as f:
        lines = tqdm(
            strictjson.bounded_lines(f),
            total=total,
            desc=f"importing {name}",
            unit=" lines",
            file=sys.stderr,
            disable=not progress or total < PROGRESS_MIN_LINES,
        )
        number = 0
        try:
            for number, raw in enumerate(lines, start=1):
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise ImportFailed(f"{name}:{number}: not UTF-8 ({exc.reason})") from None
                if not text.strip():
                    continue
                try:
                    obj = strictjson.loads(text)
                except strictjson.InvalidJSON as exc:
                    raise ImportFailed(f"{name}:{number}: {exc}") from None
                if not isinstance(obj, dict):
                    raise ImportFailed(f"{name}:{number}: expected a JSON object")
                yield number, obj
        except strictjson.LineTooLong as exc:  # raised reading the line after `number`
            raise ImportFailed(f"{name}:{number + 1}: {exc}") from None


def batched(items: Iterable, size: int) -> Iterator[list]:
    it = iter(items)
    while batch := list(islice(it, size)):
        yield batch


def line_failure(name: str, number: int, message: str) -> ImportFailed:
    return ImportFailed(f"{name}:{number}: {message}")


PORTABLE_INTEGER_RANGES = BaseDatabaseOperations.integer_field_ranges


def check_column(model: type[Model], name: str, value: Any, *, label: str | None = None) -> None:
    """Refuse, as a ValueError naming `label`, a value that `model.name`'s column cannot hold.

    The limits are the model field's own validators (max_length, the range of its integer
    type), so they are written once, in models.py; a line is refused with its FILE:LINE here
    instead of failing the whole import later with a database message.
    """
    if value is None:
        return
    label = label or name
    field, validators = _column_limits(model, name)
    if isinstance(value, str) and "\x00" in value:
        raise ValueError(f"'{label}' contains a NUL character, which cannot be stored")
    if isinstance(field, FloatField):
        try:
            finite = math.isfinite(value)
        except OverflowError:  # an integer beyond any float
            finite = False
        if not finite:
            raise ValueError(f"'{label}' must be a finite number, got {str(value)[:40]}")
    for validator in validators:
        try:
            validator(value)
        except ValidationError as exc:
            limit = getattr(validator, "limit_value", None)
            if isinstance(validator, MaxLengthValidator):
                message = f"is longer than {limit} characters ({len(value)})"
            elif isinstance(validator, MinValueValidator):
                message = f"must be at least {limit}, got {value}"
            elif isinstance(validator, MaxValueValidator):
                message = f"must be at most {limit}, got {value}"
            else:
                message = exc.messages[0]
            raise ValueError(f"'{label}' {message}") from None


@functools.cache
def _column_limits(model: type[Model], name: str) -> tuple[Field, list]:
    """The field and the validators of its column's limits, built once (an import checks a few
    columns of every line)."""
    field = model._meta.get_field(name)
    # The portable ranges of the integer types, whatever this database's are: SQLite's columns
    # hold any integer, and a line SQLite took would fail the same data's move to PostgreSQL.
    low, high = PORTABLE_INTEGER_RANGES.get(field.get_internal_type(), (None, None))
    portable = [MinValueValidator(low)] if low is not None else []
    portable += [MaxValueValidator(high)] if high is not None else []
    return field, [*field.validators, *portable]


# ---------------------------------------------------------------------------------------------
# Problems


def _problem_level(value: Any) -> int | None:
    """A level as written in MATH ("Level 3", or 3); its range is the model field's, checked
    with the other columns. MATH writes "Level ?" for a few problems: no level."""
    if value is None or value == "" or value == "Level ?":
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        digits = value.removeprefix("Level").strip()
        # ASCII digits only: int() also reads other scripts' digits, and refuses 5,000 of them.
        if digits.isascii() and digits.isdigit() and len(digits) <= 20:
            return int(digits)
    raise ValueError(f"'level' must be an integer or 'Level N', got {json.dumps(value)[:80]}")


def _string(obj: dict, key: str, *, required: bool) -> str:
    value = obj.get(key)
    if value is None:
        if required:
            raise ValueError(f"missing required field '{key}'")
        return ""
    if not isinstance(value, str):
        raise ValueError(f"'{key}' must be a string, got {json.dumps(value)[:80]}")
    return value


def parse_problem(obj: dict) -> tuple[str | None, dict[str, Any]]:
    """One problems line as (unique_id, column values); ValueError says what is wrong."""
    text = _string(obj, "problem", required=True)
    if not text.strip():
        raise ValueError("'problem' is empty")
    values = {
        "text": text,
        "answer": _string(obj, "answer", required=True),
        "solution": _string(obj, "solution", required=False),
        "subject": _string(obj, "subject", required=False),
        "level": _problem_level(obj.get("level")),
        "split": _string(obj, "split", required=False),
    }
    unique_id = _string(obj, "unique_id", required=False) or None
    for column, value in [*values.items(), ("unique_id", unique_id)]:
        check_column(Problem, column, value, label="problem" if column == "text" else column)
    return unique_id, values


def import_problems(*, path: Path, name: str | None = None) -> ImportResult:
    """Import MATH-style problems; lines with a known `unique_id` update that problem."""
    name = name or str(path)
    result = ImportResult()
    first_line_of: dict[str, int] = {}
    with rare_collections(), transaction.atomic():
        for number, obj in read_jsonl(path=path, name=name):
            result.lines += 1
            try:
                unique_id, values = parse_problem(obj)
                text = values["text"]
                result.count_control_characters(number, text, values["answer"], values["solution"])
                if unique_id in first_line_of:
                    # Two lines claiming one id is a broken file, not an update.
                    raise ValueError(
                        f"unique_id '{unique_id}' is already on line {first_line_of[unique_id]}"
                    )
                if unique_id:
                    first_line_of[unique_id] = number
            except ValueError as exc:
                raise line_failure(name, number, str(exc)) from None
            problem = (
                Problem.objects.filter(unique_id=unique_id).first() if unique_id else None
            ) or Problem.objects.filter(text_hash=text_digest(text)).first()
            if problem is None:
                Problem.objects.create(unique_id=unique_id, **values)
                result.created += 1
                continue
            if unique_id and problem.unique_id not in (None, unique_id):
                raise line_failure(
                    name, number, f"this problem text is already imported as '{problem.unique_id}'"
                )
            if (
                unique_id
                and Problem.objects.exclude(pk=problem.pk)
                .filter(text_hash=text_digest(text))
                .exists()
            ):
                raise line_failure(name, number, "another problem already has this text")
            updates = {k: v for k, v in values.items() if getattr(problem, k) != v}
            if unique_id and problem.unique_id is None:
                updates["unique_id"] = unique_id
            if not updates:
                result.unchanged += 1
                continue
            for key, value in updates.items():
                setattr(problem, key, value)
            problem.save()
            result.updated += 1
            if "answer" in updates:
                regrade_solutions(problem_ids=[problem.pk])
    result.note_control_characters(name)
    return result


# ---------------------------------------------------------------------------------------------
# Solutions

SOLUTION_KEYS = {"unique_id", "problem", "steps", "answer", "source", "score", "alternatives"}


def _steps(value: Any) -> list[str]:
    if not isinstance(value, list) or not value:
        raise ValueError("'steps' must be a non-empty list of strings")
    for i, step in enumerate(value):
        if not isinstance(step, str):
            raise ValueError(f"'steps[{i}]' must be a string, got {json.dumps(step)[:80]}")
        if not step.strip():
            raise ValueError(f"'steps[{i}]' is empty: a labeler cannot rate an empty step")
    return value


def _alternatives(value: Any, steps: list[str]) -> dict[str, list[str]]:
    """Alternative completions as stored: {"step index": [texts]}, from either input form.

    Accepted: an object keyed by step index ({"3": ["..."]}) or a list aligned with the
    steps whose items are lists of texts (or null/[] for steps without alternatives).
    """
    if value is None:
        return {}
    if isinstance(value, list):
        if len(value) != len(steps):
            raise ValueError(
                f"'alternatives' as a list must have one item per step "
                f"({len(steps)}), got {len(value)}"
            )
        pairs = [(str(i), texts) for i, texts in enumerate(value) if texts is not None]
    elif isinstance(value, dict):
        pairs = list(value.items())
    else:
        raise ValueError("'alternatives' must be an object keyed by step index or a list")
    out = {}
    for key, texts in pairs:
        if not (isinstance(key, str) and key.isascii() and key.isdigit() and int(key) < len(steps)):
            raise ValueError(
                f"'alternatives' key {json.dumps(key)} is not a step index (0 to {len(steps) - 1})"
            )
        if not isinstance(texts, list) or not all(isinstance(t, str) and t.strip() for t in texts):
            raise ValueError(f"'alternatives[{key}]' must be a list of non-empty strings")
        if texts:
            out[str(int(key))] = texts
    return out


def parse_solution(obj: dict) -> tuple:
    """One solutions line as (unique_id, problem text, steps, answer, source, score, meta,
    alternatives); ValueError says what is wrong."""
    unique_id = _string(obj, "unique_id", required=False)
    text = _string(obj, "problem", required=False)
    if not unique_id and not text:
        raise ValueError("needs 'unique_id' or 'problem' to name its problem")
    steps = _steps(obj.get("steps"))
    # No "answer" given: read from the last steps; none readable leaves it ungraded.
    answer = _string(obj, "answer", required=False) or final_answer(steps)
    score = obj.get("score")
    if score is not None and (isinstance(score, bool) or not isinstance(score, int | float)):
        raise ValueError(f"'score' must be a number, got {json.dumps(score)[:80]}")
    source = _string(obj, "source", required=False)
    check_column(Solution, "source", source)
    check_column(Solution, "source_score", score, label="score")
    alternatives = _alternatives(obj.get("alternatives"), steps)
    meta = {k: v for k, v in obj.items() if k not in SOLUTION_KEYS}
    return unique_id, text, steps, answer, source, score, meta, alternatives


def import_solutions(*, path: Path, name: str | None = None) -> ImportResult:
    """Import candidate solutions to label, graded against their problem on the way in.

    A solution already present (same problem, steps and answer) is left as it is, except
    that alternatives are added to one that has none.
    """
    name = name or str(path)
    result = ImportResult()
    with rare_collections(), transaction.atomic(), grading_pool() as pool:
        for batch in batched(read_jsonl(path=path, name=name), BATCH_SIZE):
            parsed = []
            for number, obj in batch:
                result.lines += 1
                try:
                    parsed.append((number, *parse_solution(obj)))
                except ValueError as exc:
                    raise line_failure(name, number, str(exc)) from None
                _, _, _, steps, answer, *_, alternatives = parsed[-1]
                texts = [t for ts in alternatives.values() for t in ts]
                result.count_control_characters(number, *steps, answer, *texts)

            by_uid = Problem.objects.in_bulk({p[1] for p in parsed if p[1]}, field_name="unique_id")
            by_hash = Problem.objects.in_bulk(
                {text_digest(p[2]) for p in parsed if p[2] and not p[1]}, field_name="text_hash"
            )
            candidates: dict[tuple[int, str], Solution] = {}
            for number, unique_id, text, steps, answer, source, score, meta, alts in parsed:
                problem = by_uid.get(unique_id) if unique_id else by_hash.get(text_digest(text))
                if problem is None:
                    what = f"unique_id '{unique_id}'" if unique_id else "that problem text"
                    raise line_failure(
                        name, number, f"no problem with {what}; import problems first"
                    )
                digest = solution_digest(steps=steps, answer=answer)
                candidates.setdefault(
                    (problem.pk, digest),
                    Solution(
                        problem=problem,
                        steps=steps,
                        answer=answer,
                        content_hash=digest,
                        source=source,
                        source_score=float(score) if score is not None else None,
                        meta=meta,
                        alternatives=alts,
                    ),
                )
            pairs = [(s.answer, s.problem.answer) for s in candidates.values()]
            grade_answers(pairs=pairs, pool=pool)
            for solution in candidates.values():
                solution.is_correct = grade_answer(solution.answer, solution.problem.answer)
            existing = {
                (problem_id, digest): (pk, alts)
                for pk, problem_id, digest, alts in Solution.objects.filter(
                    problem_id__in={k[0] for k in candidates},
                    content_hash__in={k[1] for k in candidates},
                ).values_list("pk", "problem_id", "content_hash", "alternatives")
            }
            new = [s for key, s in candidates.items() if key not in existing]
            Solution.objects.bulk_create(new)
            # Alternatives shipped later (e.g. a regenerated demo file) reach a solution that
            # has none; alternatives already there are never replaced under a labeler.
            gaining = [
                (existing[key][0], s.alternatives)
                for key, s in candidates.items()
                if key in existing and s.alternatives and not existing[key][1]
            ]
            for pk, alternatives in gaining:
                Solution.objects.filter(pk=pk).update(alternatives=alternatives)
            result.created += len(new)
            result.updated += len(gaining)
            result.unchanged += len(batch) - len(new) - len(gaining)
        if result.created:
            transaction.on_commit(
                partial(solutions_added.send, sender=Solution, count=result.created)
            )
    result.note_control_characters(name)
    return result
