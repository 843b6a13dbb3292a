"""The PRM's epistemic uncertainty about each pool solution, for the `ensemble_uncertainty`
strategy (`trainer.selection.strategies.ensemble_uncertainty`).

ActPRM (Duan et al., 2025) selects what its ensemble of PRM heads disagrees on. Here the
ensemble comes from the one trained PRM by Monte Carlo dropout at inference: the selection's
`ensemble_members` (8 by default), each the head reading the hidden states at the step tags
through its own dropout mask (probability `ensemble_dropout`, 0.1 by default; kept values
scaled by 1 / (1 - p)). Dropout is applied there, not in the backbone, because neither the
tiny built-in backbone nor the HF ones we train (SmolLM2, Llama-shaped) have dropout at
inference (their configs set p = 0): masking the final hidden states works for any backbone
without retraining, and one backbone pass serves every member,
the head (hidden size x 3) running once per member.

The masks are drawn once per selection from its seed (a CPU generator, the same on any device)
and shared by every solution: the members are K fixed thinned copies of the head, an ensemble
of heads over one backbone as in ActPRM. Every solution is judged by the same members, so
uncertainties compare between solutions, and a solution's value depends on neither the batch
it was scored in nor the rest of the pool. The same seed gives the same values.

A solution's uncertainty is the standard deviation over the members of its solution score
(the version's own aggregation of the member's step scores, `strategies.epistemic_uncertainty`),
not an aggregate of per-step deviations: selection ranks solutions by what the PRM is used for,
its solution score (as `uncertainty` does), a mean over steps would dilute one uncertain step
in a long solution, and with the product a doubt about a step after a surely bad one rightly
counts little.

Cost: computed only when the strategy is `ensemble_uncertainty`, for the pool solutions the
version scored (the others have no model opinion and come last anyway), through the scoring's
chunks and length-sorted batches (`trainer.scoring.store.member_scores`): one backbone forward
pass per such solution, as much as scoring the pool once (a pool of 100,000 solutions of up to
40 steps is read again in full), plus K head evaluations at each step tag (negligible); memory
per batch grows by K x tags x hidden size. It runs before the publication lock, so other
publications do not wait for it.
"""

from django.db.models import QuerySet

from labeling.models import Solution
from trainer.selection.strategies import epistemic_uncertainty
from trainer.training.models import ModelVersion


def uncertainties(
    *,
    pool: QuerySet[Solution],
    model_version: ModelVersion | None,
    seed: int,
    members: int,
    dropout: float,
    prm=None,
    batch_size: int = 32,
) -> dict[int, float]:
    """Solution id -> the epistemic uncertainty of the version's PRM about it, for the solutions
    of `pool` the version scored. `prm`: the version's loaded model (else loaded here)."""
    if model_version is None:
        return {}
    ids = list(
        pool.filter(prm_model_version=model_version, prm_step_scores__isnull=False)
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    if not ids:
        return {}
    # Imported here to keep torch out of the web process, which never selects.
    from trainer.scoring.chunks import load_prm
    from trainer.scoring.store import member_scores

    prm = prm or load_prm(model_version)
    aggregation = prm.settings.aggregation
    return {
        pk: member_uncertainty(members, aggregation=aggregation)
        for pk, members in member_scores(
            prm=prm,
            solution_ids=ids,
            members=members,
            dropout=dropout,
            seed=seed,
            batch_size=batch_size,
        )
        if members[0]  # no step fits the model's context: no score, as scoring gives none
    }


def member_uncertainty(members: list[list[float]], *, aggregation: str) -> float:
    """The epistemic uncertainty of one solution from its members' step scores."""
    from trainer.training.ml.prm import solution_score

    return epistemic_uncertainty(
        [solution_score(scores, aggregation=aggregation) for scores in members]
    )
