"""Model versions: record a trained checkpoint, promote it when it beats the active one, activate.

One version is active at a time (a database constraint): the one that scores the pool and
selects. Activating a version queues the rescoring of every solution with it
(`trainer.pipeline` listens to `model_version_activated` and queues it).

Promotion never goes backwards silently. With an evaluation set that decides promotion
(`trainer.training.gates.promotion_set`), a new version waits for its evaluation there and is
promoted (`promote_after_evaluation`) only when its PRM_PROMOTE_METRIC is above the top of the
active version's bootstrap interval and above every trivial baseline on the same items.
Without one, today's rule (beat the active one's held-out metric) stands, but a version at or
below its held-out slice's baseline is never promoted. Activating by hand a version that is
worse than the active one asks for confirmation (`WorseThanActive`), saying by how much.
"""

from functools import partial

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from core import jobs, locks
from core.errors import Conflict
from trainer.training import gates
from trainer.training.gates import Comparison
from trainer.training.models import ModelVersion, TrainingRun
from trainer.training.selectors import active_model_version
from trainer.training.signals import model_version_activated


class ActivationConflict(Conflict):
    """Another model version was activated at the same moment."""


class WorseThanActive(Conflict):
    """Activating this version by hand would replace a better one: confirm to go ahead."""


# The trivial baseline of each held-out metric, where one is known: a version at or below it
# learned nothing a constant or a coin would not give (its held-out slice, no evaluation set).
def _held_out_baseline(metric: str, metrics: dict) -> tuple[float | None, str]:
    if metric == "step_auroc":
        return 0.5, "random scoring"
    if metric == "first_error_f1":
        return metrics.get("first_error_f1_random"), "a random first-error guess"
    if metric == "best_of_n":
        return metrics.get("best_of_n_random"), "a random choice"
    return None, ""


def _below_baselines(metrics: dict) -> list[str]:
    """The held-out figures at or below their baseline, as the log says them."""
    notes = []
    for metric in ("step_auroc", "first_error_f1", "best_of_n"):
        value = metrics.get(metric)
        baseline, what = _held_out_baseline(metric, metrics)
        if value is not None and baseline is not None and value <= baseline:
            notes.append(f"{metric} {value:.4f} is at or below {what} {baseline:.4f}")
    return notes


def record_model_version(
    *, run: TrainingRun, checkpoint: str, metrics: dict
) -> tuple[ModelVersion, str]:
    """Record the run's checkpoint as a version and promote it if it beats the active one.

    Returns the version and a sentence for the run's log saying whether it was promoted and
    why. Called inside the transaction that finishes the run.
    """
    version = ModelVersion.objects.create(checkpoint=checkpoint, metrics=metrics, training_run=run)
    # One name for one thing: a version is "model version N" on every page, API and log; its
    # training run is a link beside it, never its name ("run 1" read as the run).
    version.name = f"model version {version.pk}"
    version.save(update_fields=["name"])
    promote, reason = _beats_active(version)
    if promote:
        _activate(version)
    notes = _below_baselines(metrics)
    if notes:
        reason += " (held-out slice: " + "; ".join(notes) + ")"
    version.promotion = reason[:1000]
    version.save(update_fields=["promotion"])
    return version, reason


def _beats_active(version: ModelVersion) -> tuple[bool, str]:
    metric = settings.PRM_PROMOTE_METRIC
    if not settings.PRM_AUTO_PROMOTE:
        return False, "automatic promotion is off (PRM_AUTO_PROMOTE)"
    decides = gates.promotion_set()
    if decides is not None:
        return False, f"promotion waits for its evaluation on evaluation set {decides}"
    new = version.metrics.get(metric)
    if new is None:
        return False, f"not promoted: its {metric} could not be computed"
    baseline, what = _held_out_baseline(metric, version.metrics)
    if baseline is not None and new <= baseline:
        return False, (
            f"not promoted: its held-out {metric} {new:.4f} is at or below {what} {baseline:.4f}"
        )
    active = active_model_version()  # not `version`: it was just recorded, inactive
    if active is None:
        return True, "promoted: no model was active"
    old = active.metrics.get(metric)
    if old is None or new > old:
        return True, f"promoted: {metric} {new:.4f} beats {active}'s {_fmt(old)}"
    return False, f"not promoted: {metric} {new:.4f} does not beat {active}'s {_fmt(old)}"


def promotion_verdict(comparison: Comparison, *, active: ModelVersion | None) -> tuple[bool, str]:
    """Whether a version evaluated on the promotion set is promoted, and why (a sentence)."""
    c = comparison
    if not settings.PRM_AUTO_PROMOTE:
        return False, "automatic promotion is off (PRM_AUTO_PROMOTE)"
    if c.new is None:
        return False, f"not promoted: its {c.metric} on {c.where} could not be computed"
    if c.baseline is not None and c.new <= c.baseline:
        return False, (
            f"not promoted: its {c.metric} {c.new:.4f} on {c.where} is at or below the "
            f"{c.baseline_name} baseline {c.baseline:.4f}"
        )
    if active is None:
        return True, f"promoted: no model was active ({c.metric} {c.new:.4f} on {c.where})"
    bar = c.active_high if c.active_high is not None else c.active
    if bar is None or c.new > bar:
        return True, (
            f"promoted: {c.metric} {c.new:.4f} on {c.where} is above {active}'s "
            f"{_fmt(c.active)} and the top of its interval {_fmt(bar)}"
        )
    return False, (
        f"not promoted: {c.metric} {c.new:.4f} on {c.where} is not above {active}'s "
        f"{_fmt(c.active)} beyond its interval (top {_fmt(bar)})"
    )


def promote_after_evaluation(*, model_version_id: int, comparison: Comparison) -> tuple[bool, str]:
    """Decide a waiting version's promotion from its evaluation on the promotion set; the
    sentence goes to its training run's log too. A promoted version rescores the pool."""
    with transaction.atomic():
        locks.hold(ACTIVATION_LOCK)
        version = ModelVersion.objects.select_for_update().get(pk=model_version_id)
        if version.is_active or version.promoted_at is not None:
            return False, f"{version} was already promoted"
        active = active_model_version()
        promote, reason = promotion_verdict(comparison, active=active)
        version.promotion = reason[:1000]
        version.save(update_fields=["promotion"])
        if promote:
            _activate(version)
            transaction.on_commit(
                partial(
                    model_version_activated.send, sender=ModelVersion, model_version_id=version.pk
                )
            )
        if version.training_run_id is not None:
            jobs.append_log(
                model=TrainingRun, pk=version.training_run_id, text=f"{version}: {reason}."
            )
    return promote, reason


def comparison_with_active(*, version: ModelVersion) -> Comparison | None:
    """The version beside the active one: on the promotion set when both were evaluated there,
    else on their held-out slices' PRM_PROMOTE_METRIC. None when no other version is active."""
    active = active_model_version()
    if active is None or active.pk == version.pk:
        return None
    found = gates.compare(new_id=version.pk, active_id=active.pk)
    if found is not None:
        return found
    metric = settings.PRM_PROMOTE_METRIC
    return Comparison(
        metric=metric,
        where="its held-out slice",
        new=version.metrics.get(metric),
        active=active.metrics.get(metric),
    )


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


def activate_model_version(*, model_version_id: int, confirm: bool = False) -> ModelVersion:
    """Make this version the active one (the one that scores and selects) and rescore with it.

    A version worse than the active one (`comparison_with_active`) is refused with
    WorseThanActive, saying by how much, unless `confirm`.
    Activations take turns (ACTIVATION_LOCK): of two at once, the later one wins, and each
    queues its rescoring once committed (a superseded version's is skipped by the worker).
    """
    if not confirm:
        version = ModelVersion.objects.get(pk=model_version_id)
        c = comparison_with_active(version=version)
        if c is not None and c.worse:
            active = active_model_version()
            raise WorseThanActive(
                f"{version}'s {c.metric} on {c.where} is {c.new:.4f}, {c.active - c.new:.4f} "
                f"below the active {active}'s {c.active:.4f}. Confirm to activate it anyway."
            )
    try:
        with transaction.atomic():
            # Taken before the version's row, in the order every activation takes them.
            locks.hold(ACTIVATION_LOCK)
            version = ModelVersion.objects.select_for_update().get(pk=model_version_id)
            if not version.is_active:
                version.promotion = "activated by hand"
                version.save(update_fields=["promotion"])
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
