"""Train → score → select: what follows a recorded or activated model version, and the queueing.

A training run that records a model version which becomes active is followed by the scoring of
every solution with it (`queue_scoring`) and then, as SELECTION_AFTER_RETRAIN says, by the
selection of the next generation (`select_after_retrain`), queued behind the scoring on the
`gpu` queue. Activating a version by hand rescores too. A scoring fans out: its task plans the
version's chunks (`trainer.scoring.chunks`) and queues one chunk task per chunk, which any gpu
worker takes. What a killed worker left is queued again (`requeue_unfinished_scoring`) when a
worker starts and from the periodic task.

Tasks are queued by name (`core.queueing.send_task`): `trainer.tasks` imports this module,
so this module never imports `trainer.tasks` back.
"""

import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.dispatch import receiver

from core import jobs
from core.errors import DomainError
from core.queueing import BrokerUnavailable, send_task
from labeling.services import corrections
from labeling.signals import solutions_added
from trainer.evaluation import sets as evaluation_sets
from trainer.evaluation.models import Evaluation
from trainer.models import ModelVersion, SamplingRun, TrainingRun
from trainer.sampling.signals import sampling_run_succeeded
from trainer.scoring import chunks as scoring
from trainer.selection import services as selection
from trainer.training import label_sources
from trainer.training.selectors import NoActiveModelVersion, active_model_version
from trainer.training.signals import model_version_activated, model_version_recorded

logger = logging.getLogger(__name__)

SCORE_TASK = "trainer.tasks.score_task"
SCORE_CHUNK_TASK = "trainer.tasks.score_chunk_task"
SELECT_GENERATION_TASK = "trainer.tasks.select_generation_task"
EVALUATE_TASK = "trainer.tasks.evaluate_task"

# Training leaves held-out problems out and waits for the promotion set's evaluation.
evaluation_sets.register_gates()

AFTER_RETRAIN = ("scheduled", "always", "never")


# --- what follows a model version (signals sent by trainer.training) ---------------------------


@receiver(model_version_recorded)
def after_model_version(*, run_id: int, model_version: ModelVersion, **_signal) -> None:
    """Once the run's transaction commits: an active new version scores, then selects."""
    if not model_version.is_active:
        return
    queue_scoring(model_version_id=model_version.pk)
    select_after_retrain(run_id=run_id, model_version_id=model_version.pk)


@receiver(model_version_recorded)
def freeze_trained_labels(*, run_id: int, **_signal) -> None:
    """Human labels a model version was trained on are used: their labelers no longer correct
    them (`labeling.services.corrections`). Those submitted up to the run's data snapshot, when
    the run read human labels."""
    run = TrainingRun.objects.filter(pk=run_id).values("snapshot_at", "params").first()
    if run is None or run["snapshot_at"] is None:
        return
    chosen = (run["params"] or {}).get("label_source", label_sources.HUMAN)
    known = label_sources.training_choices()
    # A source no longer registered may have read them: frozen, to be safe.
    if chosen not in known or label_sources.source(chosen).trains.reads_human:
        corrections.mark_used(submitted_up_to=run["snapshot_at"])


@receiver(model_version_recorded)
def evaluate_model_version(*, model_version: ModelVersion, **_signal) -> None:
    """Once the run's transaction commits: evaluate the new version on every registered set
    (the promotion set's evaluation decides a waiting version's promotion)."""
    queue_evaluations(model_version_id=model_version.pk)


def queue_evaluations(*, model_version_id: int) -> int:
    """Queue one evaluation job per registered set that lacks one; a broker down is logged."""
    queued = evaluation_sets.request_evaluations(model_version_id=model_version_id)
    for evaluation in queued:
        try:
            send_task(EVALUATE_TASK, (evaluation.pk,), what=f"{evaluation}")
        except BrokerUnavailable as exc:
            logger.error("%s", exc)
    return len(queued)


def evaluate_again(*, evaluation_id: int) -> Evaluation:
    """Queue a failed or cancelled evaluation again. With the broker down it stays failed,
    saying so, and BrokerUnavailable is raised: nothing waits on a task never sent."""
    evaluation = evaluation_sets.reopen_evaluation(evaluation_id=evaluation_id)
    try:
        send_task(EVALUATE_TASK, (evaluation.pk,), what=f"{evaluation}")
    except BrokerUnavailable as exc:
        jobs.finish(
            model=Evaluation,
            pk=evaluation.pk,
            status=jobs.JobStatus.FAILED,
            error=str(exc),
            only_from=(jobs.JobStatus.QUEUED,),
        )
        raise
    return evaluation


@receiver(sampling_run_succeeded)
def select_after_sampling(*, run_id: int, **_signal) -> None:
    """After a sampling run that asked for it succeeded: queue the next generation's selection
    with the active model version (which scores the new solutions first). Logged on the run,
    never raised: the run itself succeeded."""
    run = SamplingRun.objects.get(pk=run_id)
    if run.then_select is None:
        return
    try:
        queued = request_generation(params=run.then_select)
    except DomainError as exc:
        logger.error("Selection after %s not queued: %s", run, exc)
        jobs.append_log(
            model=SamplingRun, pk=run_id, text=f"The next generation was not selected: {exc}"
        )
        return
    jobs.append_log(
        model=SamplingRun,
        pk=run_id,
        text=f"Selection of the next generation queued with {queued.model_version} "
        f"(task {queued.task_id}).",
    )


@receiver(solutions_added)
def score_new_solutions(**_signal) -> None:
    """New solutions in the pool (an import, a sampling run) are scored by the active version as
    they arrive: its scoring plans chunks for what lacks its scores only."""
    version = active_model_version()
    if version is not None:
        queue_scoring(model_version_id=version.pk)


@receiver(model_version_activated)
def after_activation(*, model_version_id: int, **_signal) -> None:
    """A version activated by hand rescores the pool."""
    queue_scoring(model_version_id=model_version_id)


# --- scoring ---------------------------------------------------------------------------------


def queue_scoring(*, model_version_id: int) -> None:
    """Queue the scoring of every solution with this version; a broker down is only logged.

    The version is already recorded or activated: the next worker start or periodic task
    queues the scoring again (`requeue_unfinished_scoring`).
    """
    try:
        send_task(
            SCORE_TASK, (model_version_id,), what=f"scoring with model version {model_version_id}"
        )
    except BrokerUnavailable as exc:
        logger.error("%s", exc)


def _version_to_score(*, model_version_id: int, whole_pool: bool) -> ModelVersion | None:
    """The version a scoring request names, or None when there is nothing to do: it was
    deleted (a redelivered message can outlive it), or the request is for the whole pool and
    the version is no longer active (its scores would overwrite the active version's)."""
    version = ModelVersion.objects.filter(pk=model_version_id).first()
    if version is None:
        logger.info("Model version %s no longer exists; nothing to score", model_version_id)
    elif whole_pool and not version.is_active:
        logger.info("%s is no longer active; not rescoring every solution with it", version)
        return None
    return version


def fan_out_scoring(*, model_version_id: int) -> int:
    """Plan the active version's chunks and queue one chunk task for each not done; returns
    how many were queued. A chunk queued twice is harmless: the second finds it taken or done.
    Scoring everything with a version that is no longer active would overwrite the active
    version's scores, so that request is skipped."""
    version = _version_to_score(model_version_id=model_version_id, whole_pool=True)
    if version is None:
        return 0
    scoring.plan_scoring(model_version=version)
    chunk_ids = scoring.chunks_to_do(model_version_id=version.pk)
    for chunk_id in chunk_ids:
        send_task(SCORE_CHUNK_TASK, (chunk_id,), what=f"scoring chunk {chunk_id}")
    return len(chunk_ids)


def score_with_model_version(
    *, model_version_id: int, solution_ids: list[int] | None = None
) -> int:
    """Write this version's step and solution scores here, in this process; returns how many
    were written.

    Without ids: every solution that does not carry this version's scores yet, through the
    version's chunks (`scoring.score_in_process`), so workers scoring the same version at the
    same time share the work instead of doing it twice. A version's scores never change, so
    a scoring that was interrupted continues where it stopped, and a duplicate finds nothing
    left to do. Skipped for a version that is no longer active (see `fan_out_scoring`).
    """
    version = _version_to_score(model_version_id=model_version_id, whole_pool=solution_ids is None)
    if version is None:
        return 0
    if solution_ids is None:
        return scoring.score_in_process(model_version=version)
    # Imported here to keep torch out of the web process, which never scores.
    from trainer.scoring.store import score_and_store

    return score_and_store(
        prm=scoring.load_prm(version), solution_ids=solution_ids, model_version_id=version.pk
    )


def requeue_unfinished_scoring(
    *,
    activated_before: datetime | None = None,
    worker_hostname: str = "",
    stale_before: datetime | None = None,
) -> int | None:
    """Queue again what a killed worker left of the active version's scoring.

    A worker starting under `worker_hostname` puts the chunks its killed predecessor held back
    to queued; chunks whose worker stopped beating before `stale_before` are put back too
    (the periodic task: a prefork pool child killed mid-chunk restarts no worker). Each such
    chunk is queued again. Then, if some solution lacks the active version's scores and no
    chunk of it is left to do, the scoring itself is queued again (its plan or fan-out was
    lost: the filesystem broker has no redelivery, and Redis redelivers an unacknowledged
    message only after its visibility timeout); at worker start it is queued whenever some
    solution lacks the scores. With `activated_before` (the periodic task: one scoring time
    limit ago) a version activated later is left alone: its scoring may still be planning.
    Returns the version queued, or None.
    """
    released = scoring.release_chunks(worker_hostname=worker_hostname, stale_before=stale_before)
    for chunk_id in released:
        try:
            send_task(SCORE_CHUNK_TASK, (chunk_id,), what=f"scoring chunk {chunk_id}")
        except BrokerUnavailable as exc:
            logger.error("%s", exc)
    version = active_model_version()
    if version is None or not scoring.unscored(version).exists():
        return None
    if activated_before is not None and (
        version.promoted_at is None
        or version.promoted_at > activated_before
        or scoring.chunks_to_do(model_version_id=version.pk)
    ):
        return None
    logger.warning("Scoring with %s is unfinished; queueing it again", version)
    queue_scoring(model_version_id=version.pk)
    return version.pk


# --- selection --------------------------------------------------------------------------------


@dataclass(frozen=True)
class QueuedSelection:
    task_id: str
    model_version: ModelVersion
    params: dict[str, Any]


def request_generation(
    *, params: "selection.SelectionParams | Mapping[str, Any] | None" = None
) -> QueuedSelection:
    """Queue the selection of the next generation with the active model version.

    `params`: checked ones (from the form or the API), or values to check, the SELECTION_*
    settings filling in the rest. Scoring needs the model, so selection runs on a GPU worker
    (Celery task `select_generation_task`, queue `gpu`); the generation appears once it is
    done. Raises InvalidSelection, NoActiveModelVersion or BrokerUnavailable.
    """
    if not isinstance(params, selection.SelectionParams):
        params = selection.SelectionParams.from_dict(params)
    cleaned = params.to_dict()
    version = active_model_version()
    if version is None:
        raise NoActiveModelVersion(
            "No model version is active: train one (or activate one) before selecting."
        )
    return _queue_selection(model_version=version, params=cleaned)


def _queue_selection(*, model_version: ModelVersion, params: dict[str, Any]) -> QueuedSelection:
    task_id = str(uuid.uuid4())
    send_task(
        SELECT_GENERATION_TASK,
        (model_version.pk, params),
        task_id=task_id,
        what="the selection",
    )
    return QueuedSelection(task_id=task_id, model_version=model_version, params=params)


def select_after_retrain(*, run_id: int, model_version_id: int) -> str | None:
    """Queue selection after a successful retrain, as SELECTION_AFTER_RETRAIN says.

    Only a version that became active selects (the active model scores and selects);
    "scheduled" chains only runs the periodic schedule started. Returns the task id, if any.
    A broker that is down is logged, not raised: the run itself succeeded.
    """
    mode = settings.SELECTION_AFTER_RETRAIN
    if mode not in AFTER_RETRAIN:
        logger.error("SELECTION_AFTER_RETRAIN=%r is not one of %s", mode, ", ".join(AFTER_RETRAIN))
        return None
    run = TrainingRun.objects.get(pk=run_id)
    version = ModelVersion.objects.get(pk=model_version_id)
    if mode == "never" or (mode == "scheduled" and run.requested_by_id is not None):
        return None
    if not version.is_active:
        return None
    try:
        return _queue_selection(model_version=version, params=selection.selection_params()).task_id
    except (selection.InvalidSelection, BrokerUnavailable) as exc:
        logger.error("Selection after %s not queued: %s", run, exc)
        return None
