"""Model versions: record a trained checkpoint, promote it when it beats the active one, activate.

One version is active at a time (a database constraint): the one that scores the pool and
selects. Activating a version queues the rescoring of every solution with it
(`trainer.pipeline` listens to `model_version_activated` and queues it).
"""

from functools import partial
from pathlib import Path

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from core import locks
from core.errors import Conflict
from trainer.training.models import ModelVersion, TrainingRun
from trainer.training.selectors import active_model_version
from trainer.training.signals import model_version_activated


class ActivationConflict(Conflict):
    """Another model version was activated at the same moment."""


def record_model_version(
    *, run: TrainingRun, checkpoint_dir: Path, metrics: dict
) -> tuple[ModelVersion, str]:
    """Record the run's checkpoint as a version and promote it if it beats the active one.

    Returns the version and a sentence for the run's log saying whether it was promoted and
    why. Called inside the transaction that finishes the run.
    """
    version = ModelVersion.objects.create(
        name=f"run {run.pk}",
        checkpoint_path=str(checkpoint_dir),
        metrics=metrics,
        training_run=run,
    )
    promote, reason = _beats_active(version)
    if promote:
        _activate(version)
    return version, reason


def _beats_active(version: ModelVersion) -> tuple[bool, str]:
    metric = settings.PRM_PROMOTE_METRIC
    if not settings.PRM_AUTO_PROMOTE:
        return False, "automatic promotion is off (PRM_AUTO_PROMOTE)"
    new = version.metrics.get(metric)
    if new is None:
        return False, f"not promoted: its {metric} could not be computed"
    active = active_model_version()  # not `version`: it was just recorded, inactive
    if active is None:
        return True, "promoted: no model was active"
    old = active.metrics.get(metric)
    if old is None or new > old:
        return True, f"promoted: {metric} {new:.4f} beats {active}'s {_fmt(old)}"
    return False, f"not promoted: {metric} {new:.4f} does not beat {active}'s {_fmt(old)}"


def _fmt(value: float | None) -> str:
    return "none" if value is None else f"{value:.4f}"


# Held while the active version changes (an activation, a promotion at the end of a run).
ACTIVATION_LOCK = (
    "trainer.model_versions.activation"  # the name it had: a lock is shared across deploys
)


def _activate(version: ModelVersion) -> None:
    # Two activations at once both read "B is not active" and both write: without the lock
    # one of them met the other's uncommitted row in the one-active constraint and failed.
    # Serialised, the second deactivates the first's version: the last activation wins.
    locks.hold(ACTIVATION_LOCK)
    ModelVersion.objects.filter(is_active=True).exclude(pk=version.pk).update(is_active=False)
    version.is_active = True
    version.promoted_at = timezone.now()
    version.save(update_fields=["is_active", "promoted_at"])


def activate_model_version(*, model_version_id: int) -> ModelVersion:
    """Make this version the active one (the one that scores and selects) and rescore with it.

    Activations take turns (ACTIVATION_LOCK): of two at once, the later one wins, and each
    queues its rescoring once committed (a superseded version's is skipped by the worker).
    """
    try:
        with transaction.atomic():
            # Taken before the version's row, in the order every activation takes them.
            locks.hold(ACTIVATION_LOCK)
            version = ModelVersion.objects.select_for_update().get(pk=model_version_id)
            if not version.is_active:
                _activate(version)
                transaction.on_commit(
                    partial(
                        model_version_activated.send,
                        sender=ModelVersion,
                        model_version_id=version.pk,
                    )
                )
    except IntegrityError:
        raise ActivationConflict(
            "Another model version was activated at the same moment."
        ) from None
    return version
