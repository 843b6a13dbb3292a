"""Overlap: a share of a generation's solutions labeled by several labelers, and settling on
one label where they disagree.

The setting lives in the generation's params (`overlap_share`, `overlap_labelers`) and is
applied to its solutions' `labels_wanted`, which the workbench's shared queues honour. Which
solutions overlap follows a fixed order per generation, so raising the share keeps the ones
already chosen (their labels so far stay useful) and lowering it releases the last ones.
The figures this yields are read in `labeling.agreement`.
"""

import hashlib
from dataclasses import dataclass
from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from core.errors import Conflict, Invalid, NotFound
from core.params import Params, param
from labeling.models import SOLUTION_WRITE_CHUNK, Generation, LabelingSession, Solution

MAX_OVERLAP_LABELERS = 20


class InvalidOverlap(Invalid):
    """An overlap setting out of range; the message names it."""


@dataclass(frozen=True)
class OverlapParams(Params):
    """A generation's overlap: `share` of its solutions labeled by `labelers` labelers each.
    The form and the API that change it are derived from it, and selection's overlap
    parameters take its ranges (`trainer.selection.services.SelectionParams`)."""

    invalid = InvalidOverlap
    noun = "overlap setting"

    share: float = param(0.0, label="Share", help="Of its solutions, 0 to 1.", low=0, high=1)
    labelers: int = param(2, label="Labelers each", low=2, high=MAX_OVERLAP_LABELERS)


def _overlap_order(generation_id: int, solution_id: int) -> bytes:
    return hashlib.sha256(f"{generation_id}:{solution_id}".encode()).digest()


def set_overlap(*, generation: Generation, share: float, labelers: int) -> int:
    """Give `share` of the generation's solutions to `labelers` labelers each (the rest to one).

    Quality-control and screening solutions are served to every labeler already and are left
    out. Returns how many solutions now overlap.
    """
    checked = OverlapParams(share=share, labelers=labelers)
    share, labelers = checked.share, checked.labelers
    with transaction.atomic():
        generation = Generation.objects.select_for_update().get(pk=generation.pk)
        ids = list(
            Solution.objects.filter(
                generation=generation, is_quality_control=False, is_screening=False
            ).values_list("pk", flat=True)
        )
        ids.sort(key=lambda pk: _overlap_order(generation.pk, pk))
        chosen = set(ids[: round(share * len(ids))])
        updates = [Solution(pk=pk, labels_wanted=labelers if pk in chosen else 1) for pk in ids]
        Solution.objects.bulk_update(updates, ["labels_wanted"], batch_size=SOLUTION_WRITE_CHUNK)
        generation.params = {
            **generation.params,
            "overlap_share": share,
            "overlap_labelers": labelers,
        }
        generation.save(update_fields=["params"])
    return len(chosen)


def adjudicate(
    *,
    solution_id: int,
    session_id: int | None,
    by: AbstractBaseUser,
    now: datetime | None = None,
) -> None:
    """Settle on one submitted label of the solution for training (None: settle on none)."""
    now = now or timezone.now()
    with transaction.atomic():
        labels = LabelingSession.objects.select_for_update().filter(
            solution_id=solution_id, submitted_at__isnull=False
        )
        # Every label of the solution locked, in one order: two settlements at once take
        # turns and the later one wins. (Locking only the chosen label let each clear the
        # other's choice before it was committed, and the second failed on the
        # one-adjudicated-label constraint.)
        list(labels.order_by("pk").values_list("pk", flat=True))
        if session_id is not None and not labels.filter(pk=session_id).exists():
            if not Solution.objects.filter(pk=solution_id).exists():
                raise NotFound(f"No solution {solution_id}.")
            raise Conflict(f"Session {session_id} is not a submitted label of this solution.")
        others = labels if session_id is None else labels.exclude(pk=session_id)
        # Cleared first: the one-adjudicated-label constraint is checked per statement.
        others.filter(adjudicated_at__isnull=False).update(adjudicated_at=None, adjudicated_by=None)
        if session_id is not None:
            labels.filter(pk=session_id).update(adjudicated_at=now, adjudicated_by=by)
