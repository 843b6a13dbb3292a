"""What the evaluation room tells training, which cannot import it (its arrows point down).

The evaluation room (`trainer.evaluation.sets`) registers three answers when the app starts
(`trainer.pipeline`): which problems are held out (the dataset leaves them out), which set
decides promotion (a new version then waits for its evaluation there), and how two versions
compare on it (activating a worse one by hand asks for confirmation). Unregistered, nothing is
held out, nothing waits, and versions compare on their own held-out slice's metric.
"""

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Comparison:
    """A version beside the active one on one figure of one evaluation set."""

    metric: str
    where: str  # "evaluation set X" or "its held-out slice"
    new: float | None
    active: float | None
    active_high: float | None = None  # the top of the active's interval
    baseline: float | None = None  # the best of the trivial baselines on the same items
    baseline_name: str = ""

    @property
    def worse(self) -> bool:
        return self.new is not None and self.active is not None and self.new < self.active


_evaluation_keys: Callable[[], set[str]] = set
_promotion_set: Callable[[], str | None] = lambda: None  # noqa: E731
_compare: Callable[..., Comparison | None] = lambda **_: None  # noqa: E731


def register(
    *,
    evaluation_problem_keys: Callable[[], set[str]],
    promotion_set: Callable[[], str | None],
    compare: Callable[..., Comparison | None],
) -> None:
    global _evaluation_keys, _promotion_set, _compare
    _evaluation_keys, _promotion_set, _compare = evaluation_problem_keys, promotion_set, compare


def evaluation_problem_keys() -> set[str]:
    """`labeling.models.problem_key` of every problem an evaluation set holds: never trained
    on."""
    return _evaluation_keys()


def promotion_set() -> str | None:
    """The name of the evaluation set promotion waits for, or None."""
    return _promotion_set()


def compare(*, new_id: int, active_id: int) -> Comparison | None:
    """The two versions on the promotion set's metric, when both were evaluated there."""
    return _compare(new_id=new_id, active_id=active_id)
