"""A solution's score from its step scores, by name: the one registry of aggregations.

Torch-free, so that the web process offers these names on the training form
(`trainer.training.params.AGGREGATIONS`) and the scorer (`trainer.training.ml.prm`) computes them
from the same definition: a name cannot be offered without a way to compute it, nor the other way
round.
"""

import math
from collections.abc import Callable, Sequence

# Chosen by a run's `aggregation` parameter and kept with its model version (PRMSettings).
AGGREGATIONS: dict[str, Callable[[Sequence[float]], float]] = {
    "product": math.prod,
    "min": min,
    "last": lambda scores: scores[-1],
}


def solution_score(step_scores: Sequence[float], *, aggregation: str = "product") -> float:
    """How likely the whole solution is right, from the probability that each step is ok."""
    if aggregation not in AGGREGATIONS:
        raise ValueError(f"Unknown aggregation {aggregation!r}: use one of {sorted(AGGREGATIONS)}.")
    if not step_scores:
        raise ValueError("A solution without steps has no score.")
    return float(AGGREGATIONS[aggregation](step_scores))
