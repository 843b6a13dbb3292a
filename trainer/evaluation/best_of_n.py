"""Best-of-N and majority voting, measured the way PRM800K's `eval/eval.py` measures them.

The protocol, per N and per trial: for every problem, draw N of its samples at random
without replacement from a pool padded to `pool_size` entries (PRM800K pads every problem to
its 1,860 samples, so a problem with fewer samples sometimes draws nothing); samples without
a final answer are dropped; the method picks one sample (best-of-N: the highest score,
majority voting: a sample of the most common answer); the problem counts as solved when the
pick is correct, and a draw with nothing to pick counts as unsolved. A trial's accuracy is
the share of all problems solved; the estimate is the mean and (population) standard
deviation over trials.

Ungraded samples (`is_correct` None: no readable final answer, or a problem with no ground
truth) are left out before drawing, as if never sampled: not known right or wrong, they would
otherwise count as wrong picks. Each estimate says how many it left out (`Estimate.ungraded`);
a problem with only ungraded samples is left out of the problem count.

Ties go to a random one of the tied (the first in the shuffled draw). With the same seed,
every method sees exactly the same draws, so methods are compared on the same subsets.

Works on in-memory `Sample`s, on stored solutions (`samples_from_solutions`) and on a JSONL
file of scored samples such as PRM800K's `scored-test-samples.jsonl` (`read_scored_samples`;
`python manage.py evaluate FILE`).
"""

import gzip
import json
import math
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from django.db.models import QuerySet

    from labeling.models import Solution

MAJORITY = "majority"
DEFAULT_METHODS = ("prm_score", "orm_score", MAJORITY)
# A sample with an answer but no score under the method ranks below every scored one.
UNSCORED = -1e300


@dataclass(frozen=True)
class Sample:
    """One scored solution: which problem, its final answer, whether that answer is right."""

    problem: Hashable  # the problem's text or any key that groups a problem's samples
    answer: str | None  # None: no final answer, never picked
    is_correct: bool | None  # None: ungraded, left out of every estimate
    scores: Mapping[str, float] = field(default_factory=dict)  # e.g. {"prm_score": 0.93}


@dataclass(frozen=True)
class Estimate:
    method: str  # a score name ("prm_score", "orm_score", ...) or "majority"
    n: int
    mean: float  # share of problems solved, averaged over trials
    std: float  # population standard deviation over trials
    trials: int
    problems: int
    ungraded: int = 0  # samples left out as ungraded


# --- reading samples --------------------------------------------------------------------------


def _open(path: Path):
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return path.open(encoding="utf-8")


def _number(value, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"'{what}' must be a finite number, got {json.dumps(value)[:80]}")
    return float(value)


def parse_sample(obj: dict) -> Sample:
    """A sample from one line of a scored-samples file (ValueError saying what is wrong).

    Keys: `problem`; `answer` or `given_answer` (null or missing: no answer); `is_correct`
    (true, false, or null for ungraded);
    any number of `*_score` numbers (`prm_score`, `orm_score`, ...). Other keys are ignored.
    """
    problem = obj.get("problem")
    if not isinstance(problem, str) or not problem:
        raise ValueError("'problem' must be a non-empty string")
    answer = obj.get("answer", obj.get("given_answer"))
    if answer is not None and not isinstance(answer, str):
        answer = json.dumps(answer)  # a bare number in the file
    is_correct = obj.get("is_correct")
    if is_correct is not None and not isinstance(is_correct, bool):
        raise ValueError(
            f"'is_correct' must be true, false or null, got {json.dumps(is_correct)[:80]}"
        )
    scores = {
        key: _number(value, key)
        for key, value in obj.items()
        if key.endswith("_score") and value is not None
    }
    return Sample(problem=problem, answer=answer, is_correct=is_correct, scores=scores)


def read_scored_samples(*, path: Path | str) -> list[Sample]:
    """Every sample of a JSONL (or .jsonl.gz) file; ValueError names FILE:LINE when one is bad."""
    path = Path(path)
    samples = []
    with _open(path) as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
                if not isinstance(obj, dict):
                    raise ValueError("expected a JSON object")
                samples.append(parse_sample(obj))
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{number}: not valid JSON ({exc.msg})") from None
            except ValueError as exc:
                raise ValueError(f"{path}:{number}: {exc}") from None
    return samples


def samples_from_solutions(*, solutions: "QuerySet[Solution] | None" = None) -> list[Sample]:
    """Stored solutions as samples, grouped by problem id, scored by their latest PRM score.

    An empty final answer counts as no answer.
    """
    from labeling.models import Solution

    rows = (solutions if solutions is not None else Solution.objects.all()).values_list(
        "problem_id", "answer", "is_correct", "prm_score"
    )
    return [
        Sample(
            problem=problem_id,
            answer=answer or None,
            is_correct=is_correct,
            scores={"prm_score": score} if score is not None else {},
        )
        for problem_id, answer, is_correct, score in rows.order_by("pk").iterator(chunk_size=5000)
    ]


# --- the protocol -----------------------------------------------------------------------------


def _by_problem(samples: Iterable[Sample]) -> tuple[dict[Hashable, list[Sample]], int]:
    """The graded samples grouped by problem, and how many ungraded ones were left out."""
    groups: dict[Hashable, list[Sample]] = {}
    ungraded = 0
    for sample in samples:
        if sample.is_correct is None:
            ungraded += 1
            continue
        groups.setdefault(sample.problem, []).append(sample)
    return groups, ungraded


def _pool_size(groups: Mapping[Hashable, list[Sample]], pool_size: int | None, n: int) -> int:
    largest = max((len(g) for g in groups.values()), default=0)
    size = largest if pool_size is None else pool_size
    if size < largest:
        raise ValueError(f"pool_size {size} is below a problem's {largest} samples")
    if not 1 <= n <= size:
        raise ValueError(f"N must be between 1 and the pool size ({size}), got {n}")
    return size


def _draws(rng: np.random.Generator, *, trials: int, pool: int, n: int) -> np.ndarray:
    """(trials, n) pool indices: a uniformly random n-subset per trial, in random order."""
    return np.argsort(rng.random((trials, pool)), axis=1)[:, :n]


def _check(trials: int) -> None:
    if trials < 1:
        raise ValueError("trials must be at least 1")


def _estimate(method: str, n: int, solved: np.ndarray, problems: int, ungraded: int) -> Estimate:
    accuracy = solved / problems if problems else np.zeros_like(solved, dtype=float)
    return Estimate(
        method=method,
        n=n,
        mean=float(np.mean(accuracy)),
        std=float(np.std(accuracy)),
        trials=len(solved),
        problems=problems,
        ungraded=ungraded,
    )


def estimate_best_of_n(
    *,
    samples: Sequence[Sample],
    n: int,
    score: str = "prm_score",
    trials: int = 100,
    seed: int = 0,
    pool_size: int | None = None,
) -> Estimate:
    """Pick the highest `score` among N random samples per problem; how often is it right?

    `pool_size`: entries each problem draws from (default: the most samples any problem
    has); entries beyond a problem's samples are empty draws.
    """
    _check(trials)
    groups, ungraded = _by_problem(samples)
    pool = _pool_size(groups, pool_size, n)
    rng = np.random.default_rng(seed)
    solved = np.zeros(trials)
    for group in groups.values():
        # Padded to the pool: -inf marks an entry that cannot be picked (empty, no answer).
        keys = np.full(pool, -np.inf)
        correct = np.zeros(pool, dtype=bool)
        for i, sample in enumerate(group):
            if sample.answer is not None:
                keys[i] = sample.scores.get(score, UNSCORED)
                correct[i] = sample.is_correct
        drawn = _draws(rng, trials=trials, pool=pool, n=n)
        drawn_keys = keys[drawn]
        # argmax takes the first maximum: the first of the tied in the shuffled draw.
        picked = drawn[np.arange(trials), np.argmax(drawn_keys, axis=1)]
        pickable = np.isfinite(drawn_keys).any(axis=1)
        solved += pickable & correct[picked]
    return _estimate(score, n, solved, len(groups), ungraded)


def answer_classes(
    answers: Sequence[str],
    *,
    answer_key: Mapping[str, Hashable] | None = None,
    same_answer: Callable[[str, str], bool] | None = None,
) -> list[int]:
    """A class number per answer: equal numbers for equivalent answers (of one problem).

    With `answer_key` (answer -> canonical form) answers of the same form share a class;
    otherwise each answer joins the first class whose first answer it is equivalent to,
    by `same_answer` (default `labeling.grading.is_equivalent`).
    """
    if answer_key is not None:
        forms: dict[Hashable, int] = {}
        return [forms.setdefault(answer_key.get(a, a), len(forms)) for a in answers]
    if same_answer is None:
        from labeling.grading import is_equivalent

        same_answer = is_equivalent
    representatives: list[str] = []
    known: dict[str, int] = {}
    classes = []
    for answer in answers:
        if answer not in known:
            known[answer] = next(
                (k for k, rep in enumerate(representatives) if same_answer(answer, rep)),
                len(representatives),
            )
            if known[answer] == len(representatives):
                representatives.append(answer)
        classes.append(known[answer])
    return classes


def majority_vote(
    *,
    samples: Sequence[Sample],
    n: int,
    trials: int = 100,
    seed: int = 0,
    pool_size: int | None = None,
    answer_key: Mapping[str, Hashable] | None = None,
    same_answer: Callable[[str, str], bool] | None = None,
) -> Estimate:
    """Pick the most common answer among N random samples per problem; how often is it right?

    Answers are grouped by `answer_classes`; a group counts as correct when at least half of
    its samples are graded correct. Ties between groups go to a random one of them. Draws are
    the same as `estimate_best_of_n`'s with the same seed.
    """
    _check(trials)
    groups, ungraded = _by_problem(samples)
    pool = _pool_size(groups, pool_size, n)
    rng = np.random.default_rng(seed)
    ties = np.random.default_rng([seed, 1])  # its own stream: the draws stay estimate_best_of_n's
    solved = np.zeros(trials)
    for group in groups.values():
        answered = [i for i, s in enumerate(group) if s.answer is not None]
        classes = np.full(pool, -1)
        count = 0
        class_correct = np.zeros(0, dtype=bool)
        if answered:
            numbers = answer_classes(
                [group[i].answer for i in answered], answer_key=answer_key, same_answer=same_answer
            )
            classes[answered] = numbers
            count = max(numbers) + 1
            right = np.bincount(numbers, weights=[group[i].is_correct for i in answered])
            class_correct = right >= np.bincount(numbers) / 2
        drawn = _draws(rng, trials=trials, pool=pool, n=n)
        if count == 0:
            continue
        drawn_classes = classes[drawn]
        votes = np.zeros((trials, count))
        rows, cols = np.nonzero(drawn_classes >= 0)
        np.add.at(votes, (rows, drawn_classes[rows, cols]), 1)
        # Counts are integers: noise below 1 only orders the tied (and never lifts a 0).
        winner = np.argmax(votes + ties.random(votes.shape) * 0.5, axis=1)
        pickable = votes.max(axis=1) > 0
        solved += pickable & class_correct[winner]
    return _estimate(MAJORITY, n, solved, len(groups), ungraded)


def evaluate(
    *,
    samples: Sequence[Sample],
    ns: Sequence[int],
    methods: Sequence[str] = DEFAULT_METHODS,
    trials: int = 100,
    seed: int = 0,
    pool_size: int | None = None,
    answer_key: Mapping[str, Hashable] | None = None,
    same_answer: Callable[[str, str], bool] | None = None,
) -> list[Estimate]:
    """Every method at every N: score names for best-of-N, "majority" for majority voting.

    A score name that no sample has is left out.
    """
    present = {key for sample in samples for key in sample.scores}
    estimates = []
    for method in methods:
        if method != MAJORITY and method not in present:
            continue
        for n in ns:
            if method == MAJORITY:
                estimate = majority_vote(
                    samples=samples,
                    n=n,
                    trials=trials,
                    seed=seed,
                    pool_size=pool_size,
                    answer_key=answer_key,
                    same_answer=same_answer,
                )
            else:
                estimate = estimate_best_of_n(
                    samples=samples,
                    n=n,
                    score=method,
                    trials=trials,
                    seed=seed,
                    pool_size=pool_size,
                )
            estimates.append(estimate)
    return estimates


def format_table(estimates: Sequence[Estimate]) -> str:
    """A plain-text table: one row per N, one column per method, "mean ± std" in percent."""
    methods = list(dict.fromkeys(e.method for e in estimates))
    ns = sorted({e.n for e in estimates})
    cell = {(e.method, e.n): f"{100 * e.mean:.1f} ± {100 * e.std:.1f}" for e in estimates}
    header = ["N", *methods]
    rows = [[str(n), *(cell.get((m, n), "–") for m in methods)] for n in ns]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(text.rjust(w) for text, w in zip(row, widths, strict=True)) for row in rows]
    head = "  ".join(text.rjust(w) for text, w in zip(header, widths, strict=True))
    return "\n".join([head, "  ".join("-" * w for w in widths), *lines])
