"""Agreement between the two label sources: human ratings and rollout labels of the same steps.

A human rating is read as a verdict on the step: +1 and 0 are *ok*, -1 is *bad*. A neutral
step counts as ok because the rollout estimate asks whether the solution can still reach the
right answer from the step, and a step that makes no progress leaves that possible. A rollout
label's hard estimate is ok when some rollout reached the answer; its soft estimate is the
share that did.

- *per step*: of the (human rating, rollout label) pairs of the same step, the share whose
  verdicts match (a step rated by two labelers gives two pairs);
- *first error*: of the pairs of a complete human label (an error found, or the solution
  reached) and a rollout labeling that decides the first error (every step labeled, or every
  step up to a bad one, as a first-error search labels), the share whose first bad step is
  the same, or neither has one;
- *soft error*: the mean |soft estimate - human value| over the per-step pairs, the human
  value being 1 for ok and 0 for bad.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from labeling.agreement import Label


def human_ok(rating: int) -> bool:
    return rating != -1


@dataclass
class SourceAgreement:
    solutions: int = 0  # solutions with a human label and rollout labels
    step_pairs: int = 0
    steps_agreed: int = 0
    first_error_pairs: int = 0
    first_error_agreed: int = 0
    soft_error_total: float = 0.0

    @property
    def per_step_agreement(self) -> float | None:
        return self.steps_agreed / self.step_pairs if self.step_pairs else None

    @property
    def first_error_agreement(self) -> float | None:
        return self.first_error_agreed / self.first_error_pairs if self.first_error_pairs else None

    @property
    def soft_mean_abs_error(self) -> float | None:
        return self.soft_error_total / self.step_pairs if self.step_pairs else None

    def __add__(self, other: "SourceAgreement") -> "SourceAgreement":
        return SourceAgreement(
            solutions=self.solutions + other.solutions,
            step_pairs=self.step_pairs + other.step_pairs,
            steps_agreed=self.steps_agreed + other.steps_agreed,
            first_error_pairs=self.first_error_pairs + other.first_error_pairs,
            first_error_agreed=self.first_error_agreed + other.first_error_agreed,
            soft_error_total=self.soft_error_total + other.soft_error_total,
        )


def step_agrees(*, rating: int, reached: int) -> bool:
    """Whether a human rating and a rollout label's hard estimate give the same verdict."""
    return human_ok(rating) == (reached > 0)


def soft_error(*, rating: int, reached: int, rollouts: int) -> float:
    return abs(reached / rollouts - (1.0 if human_ok(rating) else 0.0))


def _first_bad(verdicts: Mapping[int, bool]) -> int | None:
    return min((index for index, ok in verdicts.items() if not ok), default=None)


def compare(
    *, human: Iterable[Label], rollout: Mapping[int, tuple[int, int]], steps: int
) -> SourceAgreement:
    """Agreement of one solution's human labels with one run's rollout labels of it.

    `rollout`: step index -> (reached, rollouts); `steps`: how many steps the solution has.
    """
    result = SourceAgreement()
    labels = [label for label in human if label.ratings]
    if not labels or not rollout:
        return result
    result.solutions = 1
    rollout_first = _first_bad({index: reached > 0 for index, (reached, _) in rollout.items()})
    decided = steps if rollout_first is None else rollout_first + 1
    rollout_complete = all(index in rollout for index in range(decided))
    for label in labels:
        for index, rating in label.ratings.items():
            if index not in rollout:
                continue
            reached, rollouts = rollout[index]
            result.step_pairs += 1
            result.steps_agreed += step_agrees(rating=rating, reached=reached)
            result.soft_error_total += soft_error(rating=rating, reached=reached, rollouts=rollouts)
        if label.is_complete and rollout_complete:
            human_first = _first_bad({i: human_ok(r) for i, r in label.ratings.items()})
            result.first_error_pairs += 1
            result.first_error_agreed += human_first == rollout_first
    return result
