"""The strategies of active learning: pure functions from candidates (a solution's score,
its problem, whether its final answer is right, for `disagreement` how far apart the machine
label sources put its first error, and for `ensemble_uncertainty` how far apart the members of
the PRM's ensemble score it) to the picks of a batch, registered by name in STRATEGIES.
`trainer/selection/services.py` reads the pool and publishes what they pick."""

import hashlib
import math
import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from labeling.models import SelectionReason


@dataclass(frozen=True)
class Candidate:
    """One solution of the pool as a strategy sees it."""

    solution_id: int
    problem_id: int
    score: float | None  # the model version's solution score; None when it has none
    # Final answer equivalent to the ground truth; None when ungraded (no readable answer, or
    # a problem without one): not known wrong, so never picked as a wrong answer.
    is_correct: bool | None
    # How many steps apart the machine label sources put its first error (`spread`); None
    # when fewer than two decide one. Read only for the `disagreement` strategy.
    disagreement: float | None = None
    # The PRM's epistemic uncertainty about it (`epistemic_uncertainty` of its ensemble's
    # solution scores); None when the version did not score it. Read only for
    # `ensemble_uncertainty`.
    epistemic: float | None = None


@dataclass(frozen=True)
class Pick:
    candidate: Candidate
    reason: str  # a SelectionReason value


def tiebreak(*, seed: int, solution_id: int) -> int:
    """A seeded pseudo-random number per solution: the same for the same seed, on any pool."""
    digest = hashlib.blake2b(f"{seed}:{solution_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def in_order(candidates: Sequence[Candidate], *, seed: int, key: Callable) -> list[Candidate]:
    return sorted(
        candidates, key=lambda c: (*key(c), tiebreak(seed=seed, solution_id=c.solution_id))
    )


def most_convincing(c: Candidate) -> tuple:
    return (c.score is None, -(c.score or 0.0))


def at_random(c: Candidate) -> tuple:
    return ()


def nearest_half(c: Candidate) -> tuple:
    return (c.score is None, abs((c.score or 0.0) - 0.5))


def most_disagreeing(c: Candidate) -> tuple:
    # Sources that agree, and solutions fewer than two sources decide, are equally without
    # disagreement: both come after, in seeded-random order.
    return (-(c.disagreement or 0.0),)


def most_uncertain(c: Candidate) -> tuple:
    return (c.epistemic is None, -(c.epistemic or 0.0))


def epistemic_uncertainty(member_scores: Sequence[float]) -> float:
    """How far apart the members of an ensemble score one solution: the standard deviation of
    their solution scores (over the members, not a sample's estimate)."""
    return statistics.pstdev(member_scores)


def spread(positions: Sequence[int]) -> float | None:
    """How many steps apart the earliest and the latest of these first-error positions are
    (`labeling.first_error.position`: "no error" is one past the last step); None for fewer
    than two."""
    if len(positions) < 2:
        return None
    return float(max(positions) - min(positions))


def _take(
    ordered: Sequence[Candidate], *, count: int, cap: int, taken: Counter, reason: str
) -> list[Pick]:
    """The first `count` candidates in order, skipping problems that already have `cap`."""
    picks: list[Pick] = []
    for candidate in ordered:
        if len(picks) >= count:
            break
        if taken[candidate.problem_id] >= cap:
            continue
        taken[candidate.problem_id] += 1
        picks.append(Pick(candidate, reason))
    return picks


def wrong_answer_count(*, batch_size: int, wrong_share: float) -> int:
    """How many of the batch are convincing wrong answers (rounded half up)."""
    return min(batch_size, math.floor(batch_size * wrong_share + 0.5))


def convincing_wrong_answer(
    candidates: Sequence[Candidate],
    *,
    batch_size: int,
    per_problem_cap: int,
    wrong_share: float,
    seed: int,
) -> list[Pick]:
    """The paper's: the most convincing wrong answers, then the most convincing of the rest.

    When there are too few wrong answers, the most convincing of the rest fill the batch.
    Ungraded solutions are not wrong answers; they compete only among the rest.
    """
    taken: Counter = Counter()
    wrong = _take(
        in_order([c for c in candidates if _is_wrong(c)], seed=seed, key=most_convincing),
        count=wrong_answer_count(batch_size=batch_size, wrong_share=wrong_share),
        cap=per_problem_cap,
        taken=taken,
        reason=SelectionReason.WRONG_ANSWER_CONVINCING,
    )
    chosen = {pick.candidate.solution_id for pick in wrong}
    rest = _take(
        in_order(
            [c for c in candidates if c.solution_id not in chosen],
            seed=seed,
            key=most_convincing,
        ),
        count=batch_size - len(wrong),
        cap=per_problem_cap,
        taken=taken,
        reason=SelectionReason.CONVINCING,
    )
    return wrong + rest


def uniform(
    candidates: Sequence[Candidate],
    *,
    batch_size: int,
    per_problem_cap: int,
    wrong_share: float,
    seed: int,
) -> list[Pick]:
    """A seeded random sample of the pool (the baseline active learning is measured against)."""
    return _take(
        in_order(candidates, seed=seed, key=at_random),
        count=batch_size,
        cap=per_problem_cap,
        taken=Counter(),
        reason=SelectionReason.UNIFORM,
    )


def uncertainty(
    candidates: Sequence[Candidate],
    *,
    batch_size: int,
    per_problem_cap: int,
    wrong_share: float,
    seed: int,
) -> list[Pick]:
    """The solutions whose score is nearest 0.5 (unscored ones last)."""
    return _take(
        in_order(candidates, seed=seed, key=nearest_half),
        count=batch_size,
        cap=per_problem_cap,
        taken=Counter(),
        reason=SelectionReason.UNCERTAINTY,
    )


def disagreement(
    candidates: Sequence[Candidate],
    *,
    batch_size: int,
    per_problem_cap: int,
    wrong_share: float,
    seed: int,
) -> list[Pick]:
    """The solutions whose first error the machine sources (rollouts, judge, PRM) put furthest
    apart, most first; then, when too few disagree, a seeded random sample of the rest."""
    return _by_signal(
        candidates,
        key=most_disagreeing,
        signal=lambda c: bool(c.disagreement),
        reason=SelectionReason.DISAGREEMENT,
        batch_size=batch_size,
        per_problem_cap=per_problem_cap,
        seed=seed,
    )


def ensemble_uncertainty(
    candidates: Sequence[Candidate],
    *,
    batch_size: int,
    per_problem_cap: int,
    wrong_share: float,
    seed: int,
) -> list[Pick]:
    """The solutions the PRM is least sure of in the ActPRM sense (the members of its ensemble
    disagree most on their score, `trainer.selection.ensemble`), most first; then, those the
    version did not score, a seeded random sample (recorded as `uniform`)."""
    return _by_signal(
        candidates,
        key=most_uncertain,
        signal=lambda c: c.epistemic is not None,
        reason=SelectionReason.UNCERTAINTY,
        batch_size=batch_size,
        per_problem_cap=per_problem_cap,
        seed=seed,
    )


def _by_signal(
    candidates: Sequence[Candidate],
    *,
    key: Callable,
    signal: Callable[[Candidate], bool],
    reason: str,
    batch_size: int,
    per_problem_cap: int,
    seed: int,
) -> list[Pick]:
    """The batch in `key`'s order (which puts the candidates without the signal last, in
    seeded-random order): picks with the signal for `reason`, the rest as `uniform` ones."""
    picks = _take(
        in_order(candidates, seed=seed, key=key),
        count=batch_size,
        cap=per_problem_cap,
        taken=Counter(),
        reason=reason,
    )
    return [p if signal(p.candidate) else Pick(p.candidate, SelectionReason.UNIFORM) for p in picks]


Strategy = Callable[..., list[Pick]]
STRATEGIES: dict[str, Strategy] = {
    "convincing_wrong_answer": convincing_wrong_answer,
    "uniform": uniform,
    "uncertainty": uncertainty,
    "disagreement": disagreement,
    "ensemble_uncertainty": ensemble_uncertainty,
}
DEFAULT_STRATEGY = "convincing_wrong_answer"
# Each strategy as a person reads it (forms, pages); the key is its name in the API and CLI.
STRATEGY_WORDS: dict[str, str] = {
    "convincing_wrong_answer": "Convincing wrong answers (the PRM likes them; the answer is wrong)",
    "uniform": "Uniform (at random)",
    "uncertainty": "Uncertainty (the PRM's score nearest one half)",
    "disagreement": "Disagreement (the label sources put the first error far apart)",
    "ensemble_uncertainty": "Ensemble uncertainty (the ensemble's members disagree most)",
}
assert set(STRATEGY_WORDS) == set(STRATEGIES)


def _is_wrong(c: Candidate) -> bool:
    return c.is_correct is False


# What each strategy can still pick from one problem, as (which candidates, in which order)
# lists of at most `per_problem_cap` each: every strategy walks its order and skips a problem
# once it has `per_problem_cap`, so a candidate behind the first `per_problem_cap` of its
# problem in an order is never reached while that problem has room. convincing_wrong_answer
# walks two orders: its wrong answers, then every candidate (whose first `per_problem_cap` hold
# every pick of the second pass, whatever the first took).
SHORTLISTS: dict[str, tuple[tuple[Callable[[Candidate], bool] | None, Callable], ...]] = {
    "convincing_wrong_answer": ((_is_wrong, most_convincing), (None, most_convincing)),
    "uniform": ((None, at_random),),
    "uncertainty": ((None, nearest_half),),
    "disagreement": ((None, most_disagreeing),),
    "ensemble_uncertainty": ((None, most_uncertain),),
}
assert set(SHORTLISTS) == set(STRATEGIES)
