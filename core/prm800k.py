"""The PRM800K JSONL format: validation of incoming records and lossless write-back.

Losslessness works the same way at every level of a record (the record, `question`,
`label`, each step and each completion): the importer stores what the schema models in
columns, and beside it a small *remainder*: every key whose original value differs from what
the columns would export (unknown keys included) and every modelled key that was absent.
The exporter rebuilds the modelled dict from the columns and applies the remainder, so the
object that comes out is the object that went in.
"""

import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from core.answers import final_answer

RECORD_KEYS = (
    "labeler",
    "timestamp",
    "generation",
    "is_quality_control_question",
    "is_initial_screening_question",
    "question",
    "label",
)
QUESTION_KEYS = (
    "problem",
    "ground_truth_solution",
    "ground_truth_answer",
    "pre_generated_steps",
    "pre_generated_answer",
    "pre_generated_verifier_score",
)
LABEL_KEYS = ("steps", "total_time", "finish_reason")
STEP_KEYS = ("completions", "human_completion", "chosen_completion")
COMPLETION_KEYS = ("text", "rating", "flagged")
FINISH_REASONS = ("found_error", "solution", "bad_problem", "give_up")
# The rating domain, defined once: a step is wrong (-1), correct but no progress (0), or correct
# and advancing (+1). The database constraint, the serializers, the pages' buttons and keys,
# the workbench's rules and the trainer's head classes all take it from here.
RATINGS = (-1, 0, 1)


_PLAIN = (str, int, bool, type(None))


class InvalidRecord(ValueError):
    """A record that does not follow the PRM800K schema; the message says what is wrong."""


def _same(a: Any, b: Any) -> bool:
    # Compare as JSON text: Python's == says 1 == 1.0 == True, which would lose a type.
    # The shortcuts skip that encoding for the common cases: the modelled value is the
    # original object, a list of the original objects, or an equal str/int/bool/None of the
    # same type (floats excepted: -0.0 == 0.0 but they are different JSON).
    if a is b or (type(a) is type(b) and type(a) in _PLAIN and a == b):
        return True
    if (
        type(a) is list
        and type(b) is list
        and len(a) == len(b)
        and all(x is y for x, y in zip(a, b, strict=True))
    ):
        return True
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def remainder(original: dict, modelled: dict) -> dict:
    """What must be kept beside the columns to give back `original` from `modelled`."""
    keys = {k: v for k, v in original.items() if k not in modelled or not _same(v, modelled[k])}
    absent = [k for k in modelled if k not in original]
    out: dict[str, Any] = {}
    if keys:
        out["keys"] = keys
    if absent:
        out["absent"] = absent
    return out


def restore(modelled: dict, kept: dict | None) -> dict:
    """Inverse of `remainder`: rebuild the original object."""
    if not kept:
        return modelled
    absent = set(kept.get("absent", ()))
    out = {k: v for k, v in modelled.items() if k not in absent}
    out.update(kept.get("keys", {}))
    return out


def format_timestamp(moment: datetime) -> str:
    # PRM800K writes naive UTC ISO timestamps with microseconds.
    return moment.astimezone(UTC).replace(tzinfo=None).isoformat()


def parse_timestamp(value: str) -> datetime:
    moment = datetime.fromisoformat(value)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment


@dataclass(slots=True)
class ParsedCompletion:
    text: str
    rating: int | None
    flagged: bool | None
    raw: dict


@dataclass(slots=True)
class ParsedStep:
    completions: list[ParsedCompletion]
    human_completion: Any
    chosen_completion: int | None
    raw: dict


@dataclass(slots=True)
class ParsedRecord:
    labeler: uuid.UUID
    timestamp: datetime | None
    generation: int | None
    is_quality_control: bool
    is_screening: bool
    problem: str
    ground_truth_answer: str
    ground_truth_solution: str
    steps: list[str]
    answer: str
    source_score: float | None
    is_phase1: bool
    label_steps: list[ParsedStep]
    total_time: int | None
    finish_reason: str
    raw: dict


def _require(obj: dict, key: str, where: str) -> Any:
    if key not in obj:
        raise InvalidRecord(f"missing required field '{where}{key}'")
    return obj[key]


def _typed(value: Any, types: tuple[type, ...], name: str, *, nullable: bool = False) -> Any:
    if value is None and nullable:
        return None
    # bool is an int subclass; an integer field must not accept true/false.
    is_bool = isinstance(value, bool)
    if not isinstance(value, types) or (is_bool and bool not in types):
        expected = " or ".join(t.__name__ for t in types) + (" or null" if nullable else "")
        raise InvalidRecord(f"'{name}' must be {expected}, got {json.dumps(value)[:80]}")
    return value


def _dict(value: Any, name: str) -> dict:
    return _typed(value, (dict,), name)


def _parse_completion(raw: Any, step: int, index: int) -> ParsedCompletion:
    # A PRM800K import parses a million completions: the usual shape is checked by type alone,
    # and anything else goes through the checks that name the field.
    if type(raw) is dict:
        text, rating, flagged = raw.get("text"), raw.get("rating"), raw.get("flagged")
        if (
            type(text) is str
            and (rating is None or (type(rating) is int and rating in RATINGS))
            and (flagged is None or type(flagged) is bool)
        ):
            return ParsedCompletion(text, rating, flagged, raw)
    return _checked_completion(raw, f"label.steps[{step}].completions[{index}]")


def _checked_completion(raw: Any, where: str) -> ParsedCompletion:
    raw = _dict(raw, where)
    text = _typed(_require(raw, "text", f"{where}."), (str,), f"{where}.text")
    rating = raw.get("rating")
    if rating is not None and (isinstance(rating, bool) or rating not in RATINGS):
        raise InvalidRecord(f"'{where}.rating' must be -1, 0, 1 or null, got {json.dumps(rating)}")
    flagged = _typed(raw.get("flagged"), (bool,), f"{where}.flagged", nullable=True)
    return ParsedCompletion(text=text, rating=rating, flagged=flagged, raw=raw)


def _parse_step(raw: Any, step: int) -> ParsedStep:
    # As for completions: the usual shape by type, the rest checked field by field.
    completions = chosen = None
    usual = type(raw) is dict
    if usual:
        completions, chosen = raw.get("completions"), raw.get("chosen_completion")
        usual = (completions is None or type(completions) is list) and (
            chosen is None or type(chosen) is int
        )
    if not usual:
        where = f"label.steps[{step}]"
        raw = _dict(raw, where)
        # Phase 1 has steps whose completions are null; the step label keeps that for export.
        completions = _typed(raw.get("completions"), (list,), f"{where}.completions", nullable=True)
        chosen = _typed(
            raw.get("chosen_completion"), (int,), f"{where}.chosen_completion", nullable=True
        )
    return ParsedStep(
        completions=[_parse_completion(c, step, i) for i, c in enumerate(completions or ())],
        human_completion=raw.get("human_completion"),
        chosen_completion=chosen,
        raw=raw,
    )


def _phase1_steps(label_steps: list[ParsedStep]) -> list[str]:
    # Phase 1 has no pre-generated solution: the solution is the path the labeler took,
    # their chosen completion at each step, or what they wrote themselves.
    steps = []
    for step in label_steps:
        chosen = step.chosen_completion
        human = step.human_completion
        if chosen is not None and 0 <= chosen < len(step.completions):
            steps.append(step.completions[chosen].text)
        elif isinstance(human, dict) and isinstance(human.get("text"), str):
            steps.append(human["text"])
        elif step.completions:
            steps.append(step.completions[0].text)
    return steps


def parse_record(raw: Any) -> ParsedRecord:
    """Validate one PRM800K line; raise InvalidRecord naming the offending field."""
    raw = _dict(raw, "record")
    labeler_text = _typed(_require(raw, "labeler", ""), (str,), "labeler")
    try:
        labeler = uuid.UUID(labeler_text)
    except ValueError:
        raise InvalidRecord(f"'labeler' must be a UUID, got {labeler_text!r}") from None
    timestamp = None
    if (ts := raw.get("timestamp")) is not None:
        try:
            timestamp = parse_timestamp(_typed(ts, (str,), "timestamp"))
            # A time with no UTC equivalent (9999-12-31T23:00-05:00) could be stored but
            # never exported.
            format_timestamp(timestamp)
        except (ValueError, OverflowError):
            raise InvalidRecord(f"'timestamp' is not an ISO 8601 time: {ts!r:.80}") from None
    generation = _typed(raw.get("generation"), (int,), "generation", nullable=True)
    is_qc = _typed(
        raw.get("is_quality_control_question", False), (bool,), "is_quality_control_question"
    )
    is_screening = _typed(
        raw.get("is_initial_screening_question", False), (bool,), "is_initial_screening_question"
    )

    question = _dict(_require(raw, "question", ""), "question")
    problem = _typed(_require(question, "problem", "question."), (str,), "question.problem")
    if not problem.strip():
        raise InvalidRecord("'question.problem' is empty")
    gt_answer = _typed(
        question.get("ground_truth_answer"), (str,), "question.ground_truth_answer", nullable=True
    )
    gt_solution = _typed(
        question.get("ground_truth_solution"),
        (str,),
        "question.ground_truth_solution",
        nullable=True,
    )
    pre_steps = _typed(
        question.get("pre_generated_steps"), (list,), "question.pre_generated_steps", nullable=True
    )
    if pre_steps is not None and not all(type(step) is str for step in pre_steps):
        for i, step in enumerate(pre_steps):
            _typed(step, (str,), f"question.pre_generated_steps[{i}]")
    pre_answer = _typed(
        question.get("pre_generated_answer"), (str,), "question.pre_generated_answer", nullable=True
    )
    score = _typed(
        question.get("pre_generated_verifier_score"),
        (int, float),
        "question.pre_generated_verifier_score",
        nullable=True,
    )

    label = _dict(_require(raw, "label", ""), "label")
    steps_raw = _typed(_require(label, "steps", "label."), (list,), "label.steps")
    label_steps = [_parse_step(s, i) for i, s in enumerate(steps_raw)]
    total_time = _typed(label.get("total_time"), (int,), "label.total_time", nullable=True)
    finish_reason = label.get("finish_reason")
    if finish_reason is not None and finish_reason not in FINISH_REASONS:
        raise InvalidRecord(
            f"'label.finish_reason' must be one of {', '.join(FINISH_REASONS)}, "
            f"got {json.dumps(finish_reason)}"
        )

    is_phase1 = pre_steps is None
    steps = _phase1_steps(label_steps) if is_phase1 else pre_steps
    # One rule for every importer and for `regrade` (issue 46, item 3): the sampler's own
    # answer where the record has one (phase 2), else the answer read from the steps.
    answer = (None if is_phase1 else pre_answer) or final_answer(steps)
    return ParsedRecord(
        labeler=labeler,
        timestamp=timestamp,
        generation=generation,
        is_quality_control=is_qc,
        is_screening=is_screening,
        problem=problem,
        ground_truth_answer=gt_answer or "",
        ground_truth_solution=gt_solution or "",
        steps=steps,
        answer=answer,
        source_score=float(score) if score is not None else None,
        is_phase1=is_phase1,
        label_steps=label_steps,
        total_time=total_time,
        finish_reason=finish_reason or "",
        raw=raw,
    )


def modelled_question(
    *,
    problem: str,
    answer: str,
    solution: str,
    steps: list[str],
    pre_answer: str,
    score: float | None,
) -> dict:
    return {
        "problem": problem,
        "ground_truth_solution": solution,
        "ground_truth_answer": answer,
        "pre_generated_steps": steps,
        "pre_generated_answer": pre_answer,
        "pre_generated_verifier_score": score,
    }


def modelled_top(
    *,
    labeler: uuid.UUID,
    submitted_at: datetime,
    generation: int | None,
    is_quality_control: bool,
    is_screening: bool,
) -> dict:
    """The record's own scalar keys (`question` and `label` are built separately)."""
    return {
        "labeler": str(labeler),
        "timestamp": format_timestamp(submitted_at),
        "generation": generation,
        "is_quality_control_question": is_quality_control,
        "is_initial_screening_question": is_screening,
    }


def modelled_label(*, total_time: int | None, finish_reason: str) -> dict:
    """The label's scalar keys (`steps` is built separately)."""
    return {"total_time": total_time, "finish_reason": finish_reason}


def modelled_step(*, human_completion: Any, chosen_completion: int | None) -> dict:
    """The step's scalar keys (`completions` is built separately)."""
    return {"human_completion": human_completion, "chosen_completion": chosen_completion}


def modelled_completion(*, text: str, rating: int | None, flagged: bool | None) -> dict:
    return {"text": text, "rating": rating, "flagged": flagged}
