"""A simulated judge for the triage simulation (`triage`): judge labels with a set error rate
and bias, against the domain's exact step ratings."""

import random
from dataclasses import dataclass

from trainer.evaluation.simulation.domain import Sample


@dataclass(frozen=True)
class SimulatedJudge:
    """A judge that rates each step as its truth, except that it misses a wrong step (rates it
    +1) with probability `error * (1 + bias)` and flags a right one -1 with probability
    `error * (1 - bias)`: a positive bias is a lenient judge, the usual failure of LLM judges
    (ProcessBench). Like a per_step judge run read up to its first -1, it stops there."""

    error: float = 0.2
    bias: float = 0.5

    @property
    def miss(self) -> float:
        return min(1.0, self.error * (1 + self.bias))

    @property
    def false_alarm(self) -> float:
        return min(1.0, self.error * (1 - self.bias))

    def ratings(self, sample: Sample, *, rng: random.Random) -> list[int]:
        given: list[int] = []
        for step in sample.steps:
            if step.rating == -1:
                given.append(1 if rng.random() < self.miss else -1)
            else:
                given.append(-1 if rng.random() < self.false_alarm else step.rating)
            if given[-1] == -1:
                break
        return given
