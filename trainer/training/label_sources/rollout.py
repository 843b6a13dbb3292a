"""Rollout labels (Math-Shepherd): the share of rollouts from each step that reached the
answer (`trainer.sampling.rollouts`). Training reads the newest sampling run's labels of a
solution (or the run the parameters name); a consensus and the first-error figures read its
hard estimate: a step is bad when no rollout from it reached the answer (a step a first-error
search implied good counts as reached)."""

from trainer.training.label_sources.base import (
    FirstErrorReader,
    LabelSource,
    MachineReader,
    Trains,
    positions_of_steps,
    register,
)


def examples(*, params, weight: float = 1.0) -> list:
    from trainer.training import dataset

    return dataset.rollout_examples(
        estimate=params.rollout_estimate,
        weight=weight,
        run_id=params.rollout_run,
        **dataset.data_filters(params),
    )


def labeled():
    from django.db.models import Q

    return Q(rollout_labels__isnull=False)


def read(*, solution_ids: list[int]) -> dict:
    from trainer.sampling.rollouts import latest_run_labels, rollout_labels_of

    found = {}
    for pk, by_run in rollout_labels_of(list(solution_ids)).items():
        latest = latest_run_labels(by_run)
        if latest is not None:
            found[pk] = latest
    return found


def labeled_ids():
    from trainer.sampling.models import RolloutLabel

    return RolloutLabel.objects.values("solution_id")


SOURCE = register(
    LabelSource(
        name="rollout",
        title="Rollout labels",
        trains=Trains(
            examples=examples,
            missing=lambda *, params: "no rollout label",
            help="rollout labels (Math-Shepherd estimates)",
            soft=True,
        ),
        machine=MachineReader(
            labeled=labeled,
            read=read,
            bad=lambda label: not label.reached,
            help="no rollout of the newest rollout run reached the answer from the step",
        ),
        first_error=FirstErrorReader(
            title="Rollouts (hard)",
            labeled=labeled_ids,
            positions=positions_of_steps(read, lambda label: label.hard),
        ),
    )
)
