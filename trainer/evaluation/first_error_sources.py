"""The machine label sources, as the first-error figures of the quality page read them.

Labeling measures agreement on the first-error position (`labeling.first_error`) but cannot
import the rooms that hold machine labels, so each is registered there from here, one entry of
`SOURCES` apiece (a judge's labels are one more entry):

- *rollout*: the newest sampling run that labeled the solution
  (`trainer.sampling.rollouts.latest_run_labels`), read by its hard estimate: the first step
  that no rollout reached the answer from (Math-Shepherd's -1). A first-error search run
  decides it too: the steps before its first bad step are labeled good (implied).
- *imported*: the newest imported label of the solution (ProcessBench, PRMBench, TRL), whose
  ratings are +1 / -1 from step 0.
- *judge*: the newest judge run that labeled the solution (`trainer.judging`): its first -1;
  no error when it rated every step and none -1.

A source decides no position for a solution it labeled only in part (a cancelled run).
"""

from django.db.models import Max, QuerySet

from labeling.first_error import Source, position, register_source, step_counts
from trainer.judging.models import JudgeLabel
from trainer.judging.selectors import newest_judge_labels
from trainer.sampling.models import ImportedLabel, RolloutLabel
from trainer.sampling.rollouts import latest_run_labels, rollout_labels_of


def _rollout_labeled() -> QuerySet:
    return RolloutLabel.objects.values("solution_id")


def rollout_positions(*, solution_ids: list[int]) -> dict[int, int]:
    steps, found = step_counts(solution_ids), {}
    for solution_id, by_run in rollout_labels_of(solution_ids).items():
        latest = latest_run_labels(by_run)
        if latest is None:
            continue
        hard = {index: label.hard for index, label in latest[1].items()}
        decided = position(ratings=hard, steps=steps[solution_id])
        if decided is not None:
            found[solution_id] = decided
    return found


def _imported_labeled() -> QuerySet:
    return ImportedLabel.objects.values("solution_id")


def imported_positions(*, solution_ids: list[int]) -> dict[int, int]:
    steps, found = step_counts(solution_ids), {}
    newest = (
        ImportedLabel.objects.filter(solution_id__in=solution_ids)
        .order_by()
        .values("solution_id")
        .annotate(newest=Max("pk"))
        .values("newest")
    )
    for solution_id, ratings in ImportedLabel.objects.filter(pk__in=newest).values_list(
        "solution_id", "ratings"
    ):
        decided = position(ratings=ratings, steps=steps[solution_id])
        if decided is not None:
            found[solution_id] = decided
    return found


def _judge_labeled() -> QuerySet:
    return JudgeLabel.objects.values("solution_id")


def judge_positions(*, solution_ids: list[int]) -> dict[int, int]:
    steps, found = step_counts(solution_ids), {}
    for solution_id, labels in newest_judge_labels(solution_ids=solution_ids).items():
        ratings = {index: label.rating for index, label in labels.items()}
        decided = position(ratings=ratings, steps=steps[solution_id])
        if decided is not None:
            found[solution_id] = decided
    return found


SOURCES = (
    Source(
        name="rollout",
        title="Rollouts (hard)",
        labeled=_rollout_labeled,
        positions=rollout_positions,
    ),
    Source(
        name="imported",
        title="Imported",
        labeled=_imported_labeled,
        positions=imported_positions,
    ),
    Source(name="judge", title="Judge", labeled=_judge_labeled, positions=judge_positions),
)


def register_first_error_sources() -> None:
    for source in SOURCES:
        register_source(source)
