"""Where the machine label sources put each pool solution's first error, for the
`disagreement` strategy (`trainer.selection.strategies.disagreement`).

The sources are the machine sources that place a first error
(`trainer.training.label_sources.disagreement_sources`: the newest rollout labels and the
newest judge run's labels), and the PRM of the selection's model version: its first step
scored below `THRESHOLD` (what the metrics count as a bad step), "no error" when every step is
scored and none below, undecided when the steps scored stop short of the solution (a long
solution cut to the model's context). Only the solutions some of those sources labeled are
read: the PRM alone cannot disagree.
"""

from collections.abc import Sequence

from django.db.models import Q, QuerySet

from labeling.first_error import CHUNK, position
from labeling.models import Solution
from trainer.selection.strategies import spread
from trainer.training import label_sources
from trainer.training.metrics import THRESHOLD
from trainer.training.models import ModelVersion


def prm_position(*, step_scores: Sequence[float], steps: int) -> int | None:
    """The PRM's first-error position of a solution of `steps` steps."""
    ratings = {index: -1 if score < THRESHOLD else 1 for index, score in enumerate(step_scores)}
    return position(ratings=ratings, steps=steps)


def _prm_positions(*, solution_ids: list[int], model_version: ModelVersion) -> dict[int, int]:
    found = {}
    for pk, steps, scores in Solution.objects.filter(
        pk__in=solution_ids, prm_model_version=model_version
    ).values_list("pk", "steps", "prm_step_scores"):
        decided = prm_position(step_scores=scores or [], steps=len(steps))
        if decided is not None:
            found[pk] = decided
    return found


def disagreements(
    *, pool: QuerySet[Solution], model_version: ModelVersion | None
) -> dict[int, float]:
    """Solution id -> how many steps apart the sources that decide its first error put it
    (`strategies.spread`), for the solutions of `pool` two or more sources decide."""
    sources = [s.first_error for s in label_sources.disagreement_sources()]
    if not sources:
        return {}
    labeled = Q()
    for source in sources:
        labeled |= Q(pk__in=source.labeled())
    ids = list(pool.filter(labeled).order_by("pk").values_list("pk", flat=True))
    found: dict[int, float] = {}
    for start in range(0, len(ids), CHUNK):
        chunk = ids[start : start + CHUNK]
        decided = [source.positions(solution_ids=chunk) for source in sources]
        if model_version is not None:
            decided.append(_prm_positions(solution_ids=chunk, model_version=model_version))
        for pk in chunk:
            apart = spread([positions[pk] for positions in decided if pk in positions])
            if apart is not None:
                found[pk] = apart
    return found
