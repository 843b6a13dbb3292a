"""Write operations of the annotation domain: imports, labelers, grading.

Every import is all-or-nothing: it runs in one transaction, and the first bad line raises
`ImportFailed("FILE:LINE: what is wrong")`, which rolls back everything from that file.
Files are read line by line and written in batches, so memory does not grow with file size.
"""

import json
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import islice
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import IntegrityError, connection, transaction
from django.db.models import Exists, JSONField, Model, OuterRef, Q, QuerySet, Value
from django.db.models.functions import Coalesce
from django.utils import timezone
from tqdm import tqdm

from labeling import prm800k, quality
from labeling.grading import GradingPool, grade_pair
from labeling.models import (
    Generation,
    Labeler,
    LabelingSession,
    Problem,
    Solution,
    StepLabel,
    StepRating,
    solution_digest,
    text_digest,
)
from labeling.roles import sync_role_groups
from labeling.selectors import PROGRESS_MIN_LINES, modelled_question

BATCH_SIZE = 1000


class ImportFailed(Exception):
    """An import stopped at a bad line; nothing from the file was stored."""


@dataclass
class ImportResult:
    lines: int = 0
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    details: dict[str, int] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------
# Reading JSONL


def _count_lines(path: Path) -> int:
    with path.open("rb") as f:
        return sum(1 for _ in f)


def read_jsonl(*, path: Path, name: str, progress: bool = True) -> Iterator[tuple[int, dict]]:
    """Yield (line number, object) for each non-blank line, failing with FILE:LINE."""
    total = _count_lines(path)
    with path.open("rb") as f:
        lines = tqdm(
            f,
            total=total,
            desc=f"importing {name}",
            unit=" lines",
            file=sys.stderr,
            disable=not progress or total < PROGRESS_MIN_LINES,
        )
        for number, raw in enumerate(lines, start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ImportFailed(f"{name}:{number}: not UTF-8 ({exc.reason})") from None
            if not text.strip():
                continue
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ImportFailed(f"{name}:{number}: not valid JSON ({exc.msg})") from None
            if not isinstance(obj, dict):
                raise ImportFailed(f"{name}:{number}: expected a JSON object")
            yield number, obj


def _batched(items: Iterable, size: int) -> Iterator[list]:
    it = iter(items)
    while batch := list(islice(it, size)):
        yield batch


INSERT_ROWS = 2000


def _insert_rows(model: type[Model], columns: list[str], rows: list[tuple]) -> list[int]:
    """Insert plain value rows (Python values, JSON as objects); return their new ids in order.

    On PostgreSQL one multi-row INSERT ... RETURNING per INSERT_ROWS rows: for the million
    step labels and ratings of a PRM800K import, building model instances and letting
    bulk_create compile each value costs more than the database's work. Elsewhere bulk_create.
    """
    if connection.vendor != "postgresql":
        objects = [model(**dict(zip(columns, row, strict=True))) for row in rows]
        return [o.pk for o in model.objects.bulk_create(objects, batch_size=INSERT_ROWS)]
    meta, quote = model._meta, connection.ops.quote_name
    fields = [meta.get_field(column.removesuffix("_id")) for column in columns]
    as_json = [isinstance(field, JSONField) for field in fields]
    placeholder = "(" + ", ".join("%s::jsonb" if j else "%s" for j in as_json) + ")"
    head = f"INSERT INTO {quote(meta.db_table)} ({', '.join(quote(f.column) for f in fields)}) "
    tail = f" RETURNING {quote(meta.pk.column)}"
    ids: list[int] = []
    with connection.cursor() as cursor:
        for batch in _batched(rows, INSERT_ROWS):
            params = [
                json.dumps(value) if j and value is not None else value
                for row in batch
                for value, j in zip(row, as_json, strict=True)
            ]
            cursor.execute(
                head + "VALUES " + ", ".join([placeholder] * len(batch)) + tail,
                params,
            )
            # PostgreSQL returns the rows in VALUES order; Django's bulk_create relies on it too.
            ids += [pk for (pk,) in cursor.fetchall()]
    return ids


def _fail(name: str, number: int, message: str) -> ImportFailed:
    return ImportFailed(f"{name}:{number}: {message}")


# ---------------------------------------------------------------------------------------------
# Grading


# Verdicts by (answer, ground truth): a pool repeats the same few final answers per problem
# many times over. Emptied when full rather than evicted one by one; it only saves work.
_verdicts: dict[tuple[str, str], bool] = {}
VERDICTS_MAX = 65536


def grade_answer(answer: str, ground_truth: str) -> bool:
    pair = (answer, ground_truth)
    verdict = _verdicts.get(pair)
    if verdict is None:
        grade_answers(pairs=[pair], pool=None)
        verdict = _verdicts[pair]
    return verdict


def grade_answers(*, pairs: Iterable[tuple[str, str]], pool: GradingPool | None) -> None:
    """Grade the pairs not graded yet (on `pool`'s processes when given), so that
    `grade_answer` then finds them."""
    pending = list(dict.fromkeys(p for p in pairs if p not in _verdicts))
    if not pending:
        return
    verdicts = pool.grade(pending) if pool else [grade_pair(p) for p in pending]
    if len(_verdicts) + len(pending) > VERDICTS_MAX:
        _verdicts.clear()
    _verdicts.update(zip(pending, verdicts, strict=True))


def grading_pool() -> GradingPool:
    return GradingPool(processes=settings.IMPORT_GRADING_PROCESSES)


def regrade_solutions(*, problem_ids: list[int] | None = None) -> int:
    """Grade solutions again (after a grader or ground-truth change); return how many changed."""
    solutions = Solution.objects.select_related("problem").only(
        "id", "answer", "is_correct", "problem__answer"
    )
    if problem_ids is not None:
        solutions = solutions.filter(problem_id__in=problem_ids)
    changed = []
    for solution in solutions.iterator(chunk_size=2000):
        verdict = grade_answer(solution.answer, solution.problem.answer)
        if verdict != solution.is_correct:
            solution.is_correct = verdict
            changed.append(solution)
    for batch in _batched(changed, BATCH_SIZE):
        Solution.objects.bulk_update(batch, ["is_correct"])
    return len(changed)


# ---------------------------------------------------------------------------------------------
# Labelers


def get_or_create_labeler(*, user) -> Labeler:
    labeler, _ = Labeler.objects.get_or_create(user=user)
    return labeler


def _labelers_by_uuid(uuids: set) -> dict:
    found = {lab.uuid: lab for lab in Labeler.objects.filter(uuid__in=uuids)}
    missing = uuids - found.keys()
    if missing:
        user_model = get_user_model()
        annotators = Group.objects.get_or_create(name="annotator")[0]
        for value in sorted(missing, key=str):
            # Imported labelers are pseudonymous: a user that cannot log in, named by UUID.
            user = user_model(username=f"labeler-{value}")
            user.set_unusable_password()
            user.save()
            user.groups.add(annotators)
            found[value] = Labeler.objects.create(user=user, uuid=value)
    return found


# ---------------------------------------------------------------------------------------------
# Problems


def _problem_level(value: Any) -> int | None:
    if value is None or value == "":
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        digits = value.removeprefix("Level").strip()
        if digits.isdigit():
            return int(digits)
    raise ValueError(f"'level' must be an integer or 'Level N', got {json.dumps(value)}")


def _string(obj: dict, key: str, *, required: bool) -> str:
    value = obj.get(key)
    if value is None:
        if required:
            raise ValueError(f"missing required field '{key}'")
        return ""
    if not isinstance(value, str):
        raise ValueError(f"'{key}' must be a string, got {json.dumps(value)[:80]}")
    return value


def import_problems(*, path: Path, name: str | None = None) -> ImportResult:
    """Import MATH-style problems; lines with a known `unique_id` update that problem."""
    name = name or str(path)
    result = ImportResult()
    first_line_of: dict[str, int] = {}
    with transaction.atomic():
        for number, obj in read_jsonl(path=path, name=name):
            result.lines += 1
            try:
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
                if unique_id in first_line_of:
                    # Two lines claiming one id is a broken file, not an update.
                    raise ValueError(
                        f"unique_id '{unique_id}' is already on line {first_line_of[unique_id]}"
                    )
                if unique_id:
                    first_line_of[unique_id] = number
            except ValueError as exc:
                raise _fail(name, number, str(exc)) from None
            problem = (
                Problem.objects.filter(unique_id=unique_id).first() if unique_id else None
            ) or Problem.objects.filter(text_hash=text_digest(text)).first()
            if problem is None:
                Problem.objects.create(unique_id=unique_id, **values)
                result.created += 1
                continue
            if unique_id and problem.unique_id not in (None, unique_id):
                raise _fail(
                    name, number, f"this problem text is already imported as '{problem.unique_id}'"
                )
            if (
                unique_id
                and Problem.objects.exclude(pk=problem.pk)
                .filter(text_hash=text_digest(text))
                .exists()
            ):
                raise _fail(name, number, "another problem already has this text")
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
        if not (isinstance(key, str) and key.isdigit() and int(key) < len(steps)):
            raise ValueError(
                f"'alternatives' key {json.dumps(key)} is not a step index (0 to {len(steps) - 1})"
            )
        if not isinstance(texts, list) or not all(isinstance(t, str) and t for t in texts):
            raise ValueError(f"'alternatives[{key}]' must be a list of non-empty strings")
        if texts:
            out[str(int(key))] = texts
    return out


def import_solutions(*, path: Path, name: str | None = None) -> ImportResult:
    """Import candidate solutions to label, graded against their problem on the way in.

    A solution already present (same problem, steps and answer) is left as it is, except
    that alternatives are added to one that has none.
    """
    name = name or str(path)
    result = ImportResult()
    with transaction.atomic(), grading_pool() as pool:
        for batch in _batched(read_jsonl(path=path, name=name), BATCH_SIZE):
            parsed = []
            for number, obj in batch:
                result.lines += 1
                try:
                    unique_id = _string(obj, "unique_id", required=False)
                    text = _string(obj, "problem", required=False)
                    if not unique_id and not text:
                        raise ValueError("needs 'unique_id' or 'problem' to name its problem")
                    steps = _steps(obj.get("steps"))
                    answer = _string(obj, "answer", required=False) or prm800k.extract_answer(steps)
                    score = obj.get("score")
                    if score is not None and (
                        isinstance(score, bool) or not isinstance(score, int | float)
                    ):
                        raise ValueError(f"'score' must be a number, got {json.dumps(score)}")
                    source = _string(obj, "source", required=False)
                    alternatives = _alternatives(obj.get("alternatives"), steps)
                except ValueError as exc:
                    raise _fail(name, number, str(exc)) from None
                meta = {k: v for k, v in obj.items() if k not in SOLUTION_KEYS}
                parsed.append(
                    (number, unique_id, text, steps, answer, source, score, meta, alternatives)
                )

            by_uid = Problem.objects.in_bulk({p[1] for p in parsed if p[1]}, field_name="unique_id")
            by_hash = Problem.objects.in_bulk(
                {text_digest(p[2]) for p in parsed if p[2] and not p[1]}, field_name="text_hash"
            )
            candidates: dict[tuple[int, str], Solution] = {}
            for number, unique_id, text, steps, answer, source, score, meta, alts in parsed:
                problem = by_uid.get(unique_id) if unique_id else by_hash.get(text_digest(text))
                if problem is None:
                    what = f"unique_id '{unique_id}'" if unique_id else "that problem text"
                    raise _fail(name, number, f"no problem with {what}; import problems first")
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
    return result


# ---------------------------------------------------------------------------------------------
# PRM800K labels


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


def import_prm800k(*, path: Path, name: str | None = None) -> ImportResult:
    """Import PRM800K label lines (phase 1 or 2): problems, solutions, labelers, sessions."""
    name = name or str(path)
    result = ImportResult(details={"sessions": 0, "ratings": 0})
    imported_at = timezone.now()
    with transaction.atomic(), grading_pool() as pool:
        for batch in _batched(read_jsonl(path=path, name=name), BATCH_SIZE):
            records = []
            for number, obj in batch:
                try:
                    records.append(prm800k.parse_record(obj))
                except prm800k.InvalidRecord as exc:
                    raise _fail(name, number, str(exc)) from None
            result.lines += len(records)
            _store_records(records, imported_at=imported_at, result=result, pool=pool)
    result.created = result.details["sessions"]
    return result


def _store_records(
    records: list[prm800k.ParsedRecord],
    *,
    imported_at: datetime,
    result: ImportResult,
    pool: GradingPool,
) -> None:
    labelers = _labelers_by_uuid({r.labeler for r in records})
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
    step_ids = _insert_rows(
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
    _insert_rows(
        StepRating, ["step_id", "completion_index", "text", "rating", "flagged", "extra"], ratings
    )
    result.details["sessions"] += len(sessions)
    result.details["ratings"] += len(ratings)


# ---------------------------------------------------------------------------------------------
# Demo data

DEMO_DIR = Path(__file__).resolve().parent / "demo"
# Demo credentials are public on purpose: they exist only on installs seeded with demo data.
DEMO_ACCOUNTS = (
    ("admin", "admin-demo", "admin"),
    ("researcher", "researcher-demo", "researcher"),
    ("annotator", "annotator-demo", "annotator"),
    ("annotator2", "annotator2-demo", "annotator"),
)


def create_demo_accounts() -> list[tuple[str, str, str]]:
    """Create (or reset) one account per role; return (username, password, role) triples."""
    sync_role_groups()
    user_model = get_user_model()
    for username, password, role in DEMO_ACCOUNTS:
        user, _ = user_model.objects.get_or_create(username=username)
        user.set_password(password)
        user.is_staff = role == "admin"
        user.is_superuser = role == "admin"
        user.is_active = True
        user.save()
        user.groups.set([Group.objects.get_or_create(name=role)[0]])
        get_or_create_labeler(user=user)
    return list(DEMO_ACCOUNTS)


def seed_demo() -> dict[str, ImportResult]:
    """Load the shipped demo problems and solutions, a few as QC/screening; idempotent."""
    with transaction.atomic():
        results = {
            "problems": import_problems(path=DEMO_DIR / "problems.jsonl", name="problems.jsonl"),
            "solutions": import_solutions(
                path=DEMO_DIR / "solutions.jsonl", name="solutions.jsonl"
            ),
        }
        changed, unchanged = quality.mark_demo_quality_control()
        results["quality-control solutions"] = ImportResult(created=changed, unchanged=unchanged)
        return results


# ---------------------------------------------------------------------------------------------
# Assignment, rating and submission (the annotator's workbench)

LEASE = timedelta(minutes=30)
# Gaps between a labeler's actions longer than this count as idle, not as time on task.
IDLE_GAP = timedelta(minutes=3)


LEASE_LAPSED = (
    "This session's lease ran out and it went to someone else. Your ratings so far are kept "
    "with it; choose Label for your next solution."
)


class LabelingRefused(Exception):
    """A labeling request that cannot be applied; the message says why."""


class NotYourSession(LabelingRefused):
    """The session belongs to another labeler."""


@dataclass
class Assignment:
    session: LabelingSession
    queue: str  # screening, quality_control, generation, leftover or resumed


def _current_generation() -> Generation | None:
    return Generation.objects.filter(number__gte=0).order_by("-number").first()


def _open_sessions() -> QuerySet[LabelingSession]:
    return LabelingSession.objects.filter(submitted_at__isnull=True, abandoned_at__isnull=True)


def _queues(labeler: Labeler, now: datetime) -> list[tuple[str, QuerySet[Solution], bool]]:
    """Named queues tried in order: (name, candidates, shared by labelers?)."""
    done_by_me = LabelingSession.objects.filter(
        labeler=labeler, solution=OuterRef("pk"), submitted_at__isnull=False
    )
    available = Solution.objects.filter(problem__is_bad=False).exclude(Exists(done_by_me))
    held = _open_sessions().filter(solution=OuterRef("pk"), lease_expires_at__gt=now)
    labeled = LabelingSession.objects.filter(solution=OuterRef("pk"), submitted_at__isnull=False)
    shared = available.filter(is_quality_control=False, is_screening=False).exclude(
        Exists(held) | Exists(labeled)
    )
    current = _current_generation()
    queues = [
        ("screening", available.filter(is_screening=True).order_by("id"), False),
        (
            "quality_control",
            available.filter(is_quality_control=True, is_screening=False)
            .filter(Q(generation=current) | Q(generation__isnull=True))
            .order_by("id"),
            False,
        ),
    ]
    if current is not None:
        queues.append(
            ("generation", shared.filter(generation=current).order_by("-priority", "id"), True)
        )
    queues.append(
        # Newest generation first: generation ids follow their numbers (generations are
        # created in number order), and ordering by the id column lets the claim walk an
        # index rather than sort every unlabeled solution.
        # Solutions of no generation (0) come last.
        ("leftover", shared.order_by(Coalesce("generation_id", Value(0)).desc(), "id"), True)
    )
    return queues


def _claim(candidates: QuerySet[Solution]) -> Solution | None:
    # On PostgreSQL this is one SELECT ... FOR UPDATE SKIP LOCKED: concurrent requests skip
    # each other's rows instead of queueing behind them. SQLite has no row locks; there the
    # write transaction and the partial unique constraint keep the guarantee.
    if connection.features.has_select_for_update_skip_locked:
        candidates = candidates.select_for_update(skip_locked=True, of=("self",))
    return candidates.first()


def next_assignment(*, labeler: Labeler, now: datetime | None = None) -> Assignment | None:
    """Give the labeler their open session, or assign the next solution with a lease."""
    now = now or timezone.now()
    if not labeler.user.is_active:
        raise LabelingRefused("This labeler is deactivated.")
    mine = _open_sessions().filter(labeler=labeler).select_related("solution").first()
    if mine is not None:
        mine.lease_expires_at = now + LEASE
        mine.save(update_fields=["lease_expires_at"])
        return Assignment(session=mine, queue="resumed")
    for _attempt in range(5):
        try:
            with transaction.atomic():
                return _assign_from_queues(labeler=labeler, now=now)
        except IntegrityError:
            # Another request took the same solution between our read and our insert.
            continue
    return None


def _assign_from_queues(*, labeler: Labeler, now: datetime) -> Assignment | None:
    for name, candidates, shared in _queues(labeler, now):
        solution = _claim(candidates)
        if solution is None:
            continue
        if shared:
            # A lapsed lease: the solution goes back to the queue and the old session ends.
            _open_sessions().filter(solution=solution, lease_expires_at__lte=now).update(
                abandoned_at=now
            )
        session = LabelingSession.objects.create(
            labeler=labeler,
            solution=solution,
            generation_id=solution.generation_id,
            is_quality_control=solution.is_quality_control,
            is_screening=solution.is_screening,
            queue=name,
            started_at=now,
            last_activity_at=now,
            lease_expires_at=now + LEASE,
            total_time=0,
        )
        return Assignment(session=session, queue=name)
    return None


def _locked_session(*, session_id: int, labeler: Labeler) -> LabelingSession:
    # The session's row alone: its solution (a QC one is served to every labeler) and that
    # solution's problem are shared, and locking them would queue other labelers' ratings.
    session = (
        LabelingSession.objects.select_for_update(of=("self",))
        .select_related("solution__problem")
        .filter(pk=session_id)
        .first()
    )
    if session is None:
        raise LabelingRefused(f"No session {session_id}.")
    if session.labeler_id != labeler.pk:
        raise NotYourSession("This session belongs to another labeler.")
    return session


def _touch(session: LabelingSession, now: datetime) -> None:
    last = session.last_activity_at or session.started_at or now
    gap = min(max(now - last, timedelta(0)), IDLE_GAP)
    session.total_time = (session.total_time or 0) + int(gap.total_seconds() * 1000)
    session.last_activity_at = now
    session.lease_expires_at = now + LEASE


def rated_steps(session: LabelingSession) -> dict[int, int | None]:
    """Step index -> rating of the solution's own completion, for rated steps."""
    return dict(
        StepRating.objects.filter(step__session=session, completion_index=0).values_list(
            "step__index", "rating"
        )
    )


def alternatives_at(*, solution: Solution, step_index: int) -> list[str]:
    """The alternative completions offered for one step (PRM800K phase 2), in order."""
    return list((solution.alternatives or {}).get(str(step_index), []))


def rated_alternatives(session: LabelingSession) -> dict[tuple[int, int], StepRating]:
    """(step index, completion index) -> rating, for the alternatives rated in a session."""
    ratings = StepRating.objects.filter(step__session=session, completion_index__gt=0)
    return {(r.step.index, r.completion_index): r for r in ratings.select_related("step")}


def rate_step(
    *,
    session_id: int,
    labeler: Labeler,
    step_index: int,
    rating: int,
    flagged: bool = False,
    completion_index: int = 0,
    now: datetime | None = None,
) -> LabelingSession:
    """Rate (or re-rate) one step, or one alternative completion of the step rated -1.

    Completion 0 is the solution's own step; 1..n are the step's alternatives, rated in
    order once the step itself is rated -1. Repeating the same request changes nothing.
    """
    now = now or timezone.now()
    if rating not in prm800k.RATINGS:
        raise LabelingRefused("A rating is -1, 0 or 1.")
    with transaction.atomic():
        session = _locked_session(session_id=session_id, labeler=labeler)
        if session.abandoned_at is not None:
            # A tab left open past the lease: say why, not "finished" (the page shows this).
            raise LabelingRefused(LEASE_LAPSED)
        if not session.is_open:
            raise LabelingRefused("This session is already finished.")
        steps = session.solution.steps
        rated = rated_steps(session)
        if not 0 <= step_index < len(steps):
            raise LabelingRefused(f"Step {step_index} does not exist.")
        if step_index > len(rated) or any(r == -1 for i, r in rated.items() if i < step_index):
            raise LabelingRefused(f"Step {step_index} is not reached yet.")
        if completion_index:
            _rate_alternative(
                session=session,
                step_index=step_index,
                completion_index=completion_index,
                rating=rating,
                flagged=flagged,
                own_rating=rated.get(step_index),
            )
        else:
            # Plain inserts and updates, no get_or_create: the session's row lock already
            # serialises every rating of this session. (This is the hottest write.)
            chosen = None if rating == -1 else 0
            if step_index in rated:
                StepLabel.objects.filter(session=session, index=step_index).update(
                    chosen_completion=chosen
                )
                StepRating.objects.filter(
                    step__session=session, step__index=step_index, completion_index=0
                ).update(rating=rating, flagged=flagged)
            else:
                step = StepLabel.objects.create(
                    session=session, index=step_index, chosen_completion=chosen
                )
                StepRating.objects.create(
                    step=step,
                    completion_index=0,
                    text=steps[step_index],
                    rating=rating,
                    flagged=flagged,
                )
            if rating == -1 and any(i > step_index for i in rated):
                # Labels stop at the first error: steps after it are no longer part of it.
                StepLabel.objects.filter(session=session, index__gt=step_index).delete()
            elif rating != -1 and rated.get(step_index) == -1:
                # Alternatives are rated only in place of a wrong step.
                StepRating.objects.filter(
                    step__session=session, step__index=step_index, completion_index__gt=0
                ).delete()
        _touch(session, now)
        session.save(update_fields=["total_time", "last_activity_at", "lease_expires_at"])
    return session


def _rate_alternative(
    *,
    session: LabelingSession,
    step_index: int,
    completion_index: int,
    rating: int,
    flagged: bool,
    own_rating: int | None,
) -> None:
    alternatives = alternatives_at(solution=session.solution, step_index=step_index)
    if not 1 <= completion_index <= len(alternatives):
        raise LabelingRefused(f"Step {step_index} has no alternative {completion_index}.")
    if own_rating != -1:
        raise LabelingRefused(f"Alternatives of step {step_index} follow a -1 on that step.")
    step = StepLabel.objects.get(session=session, index=step_index)
    if completion_index > step.ratings.filter(completion_index__gt=0).count() + 1:
        raise LabelingRefused(f"Alternative {completion_index} is not reached yet.")
    StepRating.objects.update_or_create(
        step=step,
        completion_index=completion_index,
        defaults={
            "text": alternatives[completion_index - 1],
            "rating": rating,
            "flagged": flagged,
        },
    )


def unrated_alternatives(session: LabelingSession, *, error_step: int) -> int:
    """How many alternatives of the -1 step are still to rate before the session can end."""
    offered = len(alternatives_at(solution=session.solution, step_index=error_step))
    done = StepRating.objects.filter(
        step__session=session, step__index=error_step, completion_index__gt=0
    ).count()
    return max(offered - done, 0)


def submit_session(
    *,
    session_id: int,
    labeler: Labeler,
    finish_reason: str,
    reason_text: str = "",
    now: datetime | None = None,
) -> LabelingSession:
    """Finish a session. Submitting the same outcome twice is a no-op."""
    now = now or timezone.now()
    with transaction.atomic():
        session = _locked_session(session_id=session_id, labeler=labeler)
        if session.is_submitted:
            if session.finish_reason == finish_reason:
                return session
            raise LabelingRefused("This session is already finished.")
        if session.abandoned_at is not None:
            raise LabelingRefused(LEASE_LAPSED)
        rated = rated_steps(session)
        steps = session.solution.steps
        if finish_reason == "found_error":
            if -1 not in rated.values():
                raise LabelingRefused("No step is rated -1.")
            error_step = next(i for i, r in rated.items() if r == -1)
            if unrated_alternatives(session, error_step=error_step):
                raise LabelingRefused("Rate the alternatives of the -1 step first.")
        elif finish_reason == "solution":
            if len(rated) < len(steps) or -1 in rated.values():
                raise LabelingRefused("Rate every step first; a -1 step ends with found_error.")
        elif finish_reason in ("bad_problem", "give_up"):
            if not reason_text.strip():
                raise LabelingRefused("Please give a short reason.")
            if finish_reason == "bad_problem":
                Problem.objects.filter(pk=session.solution.problem_id).update(is_bad=True)
        else:
            raise LabelingRefused(f"Unknown finish reason {finish_reason!r}.")
        _touch(session, now)
        session.finish_reason = finish_reason
        session.finish_reason_text = reason_text.strip()
        session.submitted_at = now
        session.save()
    return session


def renew_lease(
    *, session_id: int, labeler: Labeler, now: datetime | None = None
) -> LabelingSession:
    """Keep the solution while the labeler's page is open (idle time is not counted)."""
    now = now or timezone.now()
    with transaction.atomic():
        session = _locked_session(session_id=session_id, labeler=labeler)
        if not session.is_open:
            raise LabelingRefused("This session is no longer open.")
        session.lease_expires_at = now + LEASE
        session.save(update_fields=["lease_expires_at"])
    return session
