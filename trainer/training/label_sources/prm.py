"""The active model version's step scores, as a consensus asks them: a step is bad when its
score is below 0.5 (`metrics.THRESHOLD`). Scores written by another version are not the active
PRM's and count as no label."""

from trainer.training.label_sources.base import LabelSource, MachineReader, register
from trainer.training.metrics import THRESHOLD


def labeled():
    from django.db.models import Q

    return Q(prm_model_version__is_active=True)


def read(*, solution_ids: list[int]) -> dict:
    from labeling.models import Solution
    from trainer.training.selectors import active_model_version

    active = active_model_version()
    if active is None:
        return {}
    rows = Solution.objects.filter(pk__in=list(solution_ids), prm_model_version=active)
    return {
        pk: (None, dict(enumerate(scores if isinstance(scores, list) else [])))
        for pk, scores in rows.values_list("pk", "prm_step_scores")
    }


SOURCE = register(
    LabelSource(
        name="prm",
        title="Active PRM",
        machine=MachineReader(
            labeled=labeled,
            read=read,
            bad=lambda score: score < THRESHOLD,
            help="the active model version scored the step below 0.5",
        ),
    )
)
