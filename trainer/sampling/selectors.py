"""Reads of sampling runs: how a first-error search's labels agree with every-step labels.

A first-error search (`trainer.sampling.rollouts.search_solution`) rolls out a few steps and
implies the rest by assuming that a prefix which cannot reach the answer has no longer prefix
that can. Every-step labels of the same solutions show what that assumption costs:

- *first error*: of the solutions labeled by both, the share whose first bad step (the first
  step with no rollout reaching the answer, counting from step 0 without a gap; none when no
  step is bad) is the same;
- *per step*: of the steps labeled by both, the share whose hard verdicts (reached or not)
  match; and the same over the steps the search only implied, where a mismatch is a breach of
  monotonicity the search could not see.

Each solution is compared with the newest every-step run that labeled it, whatever its
generator and settings: the page names the runs compared with.
"""

from dataclasses import dataclass, field

from trainer.sampling.models import RolloutLabel, SamplingRun
from trainer.sampling.rollouts import rollout_labels_of

CHUNK = 500


@dataclass
class SearchAgreement:
    solutions: int = 0  # labeled by the search run and by an every-step run
    first_error_agreed: int = 0
    step_pairs: int = 0
    steps_agreed: int = 0
    implied_pairs: int = 0
    implied_agreed: int = 0
    compared_with: list[int] = field(default_factory=list)  # the every-step runs, by id

    @property
    def first_error_agreement(self) -> float | None:
        return self.first_error_agreed / self.solutions if self.solutions else None

    @property
    def per_step_agreement(self) -> float | None:
        return self.steps_agreed / self.step_pairs if self.step_pairs else None

    @property
    def implied_agreement(self) -> float | None:
        return self.implied_agreed / self.implied_pairs if self.implied_pairs else None


def first_error(labels: dict[int, RolloutLabel]) -> int | None:
    """The first step, from 0 without a gap, that no rollout reached the answer from; None."""
    index = 0
    while index in labels:
        if not labels[index].reached:
            return index
        index += 1
    return None


def search_agreement(*, run: SamplingRun) -> SearchAgreement | None:
    """The agreement of a first-error search run's labels with every-step labels of the same
    solutions; None for a run that is not a first-error search."""
    if run.search != SamplingRun.Search.FIRST_ERROR:
        return None
    every_step = set(
        SamplingRun.objects.filter(
            purpose=SamplingRun.Purpose.ROLLOUTS, search=SamplingRun.Search.EVERY_STEP
        ).values_list("pk", flat=True)
    )
    solution_ids = sorted(
        set(
            RolloutLabel.objects.filter(sampling_run=run)
            .order_by()
            .values_list("solution_id", flat=True)
        )
    )
    result = SearchAgreement()
    compared: set[int] = set()
    for start in range(0, len(solution_ids), CHUNK):
        by_solution = rollout_labels_of(solution_ids[start : start + CHUNK])
        for by_run in by_solution.values():
            # Newest first: the newest every-step run of this solution.
            other_id = next((pk for pk in by_run if pk in every_step), None)
            if other_id is None or run.pk not in by_run:
                continue
            searched, other = by_run[run.pk], by_run[other_id]
            compared.add(other_id)
            result.solutions += 1
            result.first_error_agreed += first_error(searched) == first_error(other)
            for index, label in searched.items():
                if index not in other:
                    continue
                agreed = (label.reached > 0) == (other[index].reached > 0)
                result.step_pairs += 1
                result.steps_agreed += agreed
                if label.implied:
                    result.implied_pairs += 1
                    result.implied_agreed += agreed
    result.compared_with = sorted(compared)
    return result
