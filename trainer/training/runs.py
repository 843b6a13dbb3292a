"""Training runs: request, cancel and execute them, record their progress, fail dead ones.

A run is a record of what happened: its parameters (`TrainingParams.to_dict()`), its data
snapshot, its progress and metrics, and the model version it produced
(`trainer.training.model_versions`). What follows a version that became active (scoring, then
selection) is `trainer.pipeline`'s business. The ML itself lives in dataset/prm/train, which
import torch: those are imported inside the functions that train, so the web process never
pays for torch to show a page.
"""

import json
import logging
import os
import shutil
import tempfile
import time
import traceback
import uuid
from collections import deque
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from core import jobs, store
from core.errors import Conflict, DomainError
from core.queueing import BrokerUnavailable, send_task
from trainer.training import checkpoints, dataset, label_sources, model_versions
from trainer.training.base_models import resolve_base_model
from trainer.training.models import ModelVersion, TrainingRun
from trainer.training.params import TrainingParams
from trainer.training.selectors import active_model_version, submitted_sessions_since
from trainer.training.signals import model_version_recorded

logger = logging.getLogger(__name__)

Status = TrainingRun.Status

# Progress reaches the database at most this often: a step can take milliseconds.
FLUSH_SECONDS = 1.0


TRAIN_TASK = "trainer.tasks.train_task"


class TrainingRefused(jobs.JobRefused):
    """A training request the current state does not allow (a live run, a finished one)."""


class NoTrainingData(Conflict):
    """The run's data filters leave nothing to train or hold out; the message says why."""


class TrainingMisconfigured(Conflict):
    """A worker setting (PRM_TRAIN_PROCESSES) that no run can train with."""


class WarmStartRefused(Conflict):
    """warm_start asked for, but the active model version has another backbone."""


class CheckpointDirUnwritable(Conflict):
    """STORE_SCRATCH_DIR cannot be written on the worker: no compute is spent."""


# --- requesting and cancelling ----------------------------------------------------------------


def request_training_run(
    *,
    user,
    params: dict[str, Any] | TrainingParams,
    origin: str = jobs.JobOrigin.PAGE,
    enqueue: bool = True,
) -> TrainingRun:
    """Record a queued run and hand it to a GPU worker once the row is committed.

    One run at a time: while another is queued or running the request is refused (the
    database refuses a second live run too, whoever inserts it). `enqueue=False` leaves the
    run for the caller to execute in the foreground (`manage.py train_prm`). Raises
    InvalidParams, TrainingRefused, or BrokerUnavailable (the run is then recorded as failed).
    """
    if not isinstance(params, TrainingParams):
        params = TrainingParams.requested(params)
    # A run whose worker died would otherwise block every new request.
    mark_stale_runs_failed(older_than=jobs.stale_cutoff())
    try:
        with transaction.atomic():
            live = TrainingRun.objects.filter(status__in=TrainingRun.LIVE).first()
            if live is not None:
                raise TrainingRefused(
                    f"Training run {live.pk} is still {live.status}: wait for it to finish "
                    "or cancel it first."
                )
            run = TrainingRun.objects.create(
                requested_by=user,
                origin=origin,
                params=params.to_dict(),
                celery_task_id=str(uuid.uuid4()),
            )
            _log_to_run(run.pk, f"Queued by {run.requester}.")
            if enqueue:
                transaction.on_commit(partial(_queue, run_id=run.pk))
    except IntegrityError:
        raise TrainingRefused(
            "Another training run was requested at the same moment; only one runs at a time."
        ) from None
    run.refresh_from_db()
    if run.status == Status.FAILED:
        raise BrokerUnavailable(run.error)
    return run


def _queue(*, run_id: int) -> None:
    """Hand a recorded run to a GPU worker; its task id is the run's."""
    run = TrainingRun.objects.get(pk=run_id)
    try:
        send_task(TRAIN_TASK, (run.pk,), task_id=run.celery_task_id, what="the run")
    except BrokerUnavailable as exc:
        jobs.finish(
            model=TrainingRun,
            pk=run_id,
            status=Status.FAILED,
            error=str(exc),
            only_from=(Status.QUEUED,),
        )


def cancel_training_run(*, run_id: int) -> TrainingRun:
    """A queued run is cancelled at once; a running one stops at its next step boundary."""
    try:
        return jobs.request_cancel(
            model=TrainingRun, pk=run_id, stops="at the next step", refused=TrainingRefused
        )
    except TrainingRefused:
        if TrainingRun.objects.filter(pk=run_id, status=Status.SUCCEEDED).exists():
            raise TrainingRefused(
                f"Too late to cancel: training run {run_id} has finished saving its model version."
            ) from None
        raise


def mark_stale_runs_failed(*, older_than: datetime, worker_hostname: str = "") -> list[int]:
    """Fail running runs whose worker is gone (`jobs.recover_stale`'s rule); return their ids."""
    return jobs.recover_stale(
        model=TrainingRun,
        older_than=older_than,
        worker_hostname=worker_hostname,
        advice="it was probably killed or ran out of memory. Start a new run.",
    )


def maybe_start_scheduled_training() -> TrainingRun | None:
    """Start a run when enough sessions were submitted since the last successful snapshot."""
    mark_stale_runs_failed(older_than=jobs.stale_cutoff())
    if TrainingRun.objects.filter(status__in=TrainingRun.LIVE).exists():
        return None
    last = (
        TrainingRun.objects.filter(status=Status.SUCCEEDED, snapshot_at__isnull=False)
        .order_by("-snapshot_at")
        .first()
    )
    new = submitted_sessions_since(since=last.snapshot_at if last else None)
    if new < settings.PRM_RETRAIN_MIN_NEW_LABELS:
        logger.info(
            "Not retraining: %s new submitted sessions, %s needed.",
            new,
            settings.PRM_RETRAIN_MIN_NEW_LABELS,
        )
        return None
    # Retrain the way the last good model was trained, on the larger data.
    try:
        return request_training_run(
            user=None, params=last.params if last else {}, origin=jobs.JobOrigin.SCHEDULE
        )
    except DomainError as exc:
        logger.warning("Scheduled training not started: %s", exc)
        return None


# --- executing (the body of the Celery task) --------------------------------------------------


class RunRecorder:
    """Streams progress, per-epoch metrics and log lines into the run, and notices cancellation.

    Writes are throttled to about one per second. The run's heartbeat (`jobs.heartbeat`)
    beats on its own schedule too, so a long stretch without steps (tokenizer training, saving)
    is not mistaken for a dead worker, and it notices a cancel.
    """

    def __init__(self, run_id: int) -> None:
        self.run_id = run_id
        self.lines: deque[str] = deque(maxlen=jobs.LOG_TAIL_LINES)
        self.metrics: list[dict] = []
        self.fields: dict[str, Any] = {}
        self._heartbeat = jobs.heartbeat(model=TrainingRun, pk=run_id)
        self.cancelled = self._heartbeat.cancelled
        self._last_flush = 0.0

    def __enter__(self) -> "RunRecorder":
        self._heartbeat.__enter__()
        return self

    def __exit__(self, *exc_info) -> None:
        self._heartbeat.__exit__(*exc_info)
        self.flush()

    def log(self, line: str) -> None:
        self.lines.extend(jobs.log_lines(line))
        self.maybe_flush()

    def on_progress(self, event: dict) -> None:
        if "log" in event:
            self.log(event["log"])
        if "metrics" in event:
            self.metrics.append({"epoch": event.get("epoch"), **event["metrics"]})
            self.fields["epoch"] = event.get("epoch", self.fields.get("epoch", 0))
            self.flush()
            return
        if "cut" in event:
            self.fields["cut"] = event["cut"]
        for key in ("peak_rss_bytes", "peak_cuda_bytes", "estimated_peak_bytes"):
            if event.get(key) is not None:
                self.fields[key] = event[key]
        if "step" in event:
            self.fields.update(
                step=event["step"],
                total_steps=event.get("total_steps", 0),
                epoch=event.get("epoch", 0),
                loss=event.get("loss"),
            )
        self.maybe_flush()

    def should_stop(self) -> bool:
        self.maybe_flush()
        return self.cancelled.is_set()

    def maybe_flush(self) -> None:
        if time.monotonic() - self._last_flush >= FLUSH_SECONDS:
            self.flush()

    def flush(self) -> None:
        self._last_flush = time.monotonic()
        TrainingRun.objects.filter(pk=self.run_id).update(
            **self.fields,
            metrics=self.metrics,
            log_tail="\n".join(self.lines),
            heartbeat_at=timezone.now(),
        )
        if jobs.cancel_requested(model=TrainingRun, pk=self.run_id):
            self.cancelled.set()


def execute_training_run(*, run_id: int, worker_hostname: str = "") -> TrainingRun:
    """Train the model a queued run asks for, recording everything; never raises for the run.

    Only a queued run starts: a redelivered task message (a worker restart, Redis's visibility
    timeout on a long run) finds the run already running or finished and does nothing.
    """
    started = jobs.start(model=TrainingRun, pk=run_id, worker_hostname=worker_hostname)
    run = TrainingRun.objects.get(pk=run_id)
    if not started:
        logger.info("Training run %s is %s, not queued: nothing to do.", run_id, run.status)
        return run

    # Imported here to keep torch out of the web process, which never trains.
    from trainer.training.ml.train import TrainingCancelled

    recorder = RunRecorder(run_id)
    recorder.lines.extend(run.log_tail.splitlines())
    recorder.log(f"Started on {worker_hostname or 'this process'} (pid {os.getpid()}).")
    try:
        with recorder:
            result = _train(run, recorder)
            reference = _publish(run_id=run_id, result=result, recorder=recorder)
    except KeyboardInterrupt:
        # Ctrl-C on `manage.py train_prm`: record it rather than leave the run to go stale.
        jobs.finish(
            model=TrainingRun,
            pk=run_id,
            status=Status.CANCELLED,
            error="Interrupted from the keyboard.",
        )
        raise
    except TrainingCancelled:
        recorder.log("Stopped: cancelled.")
        jobs.finish(model=TrainingRun, pk=run_id, status=Status.CANCELLED)
        return TrainingRun.objects.get(pk=run_id)
    except Exception as exc:
        logger.exception("Training run %s failed", run_id)
        recorder.log(traceback.format_exc(limit=5))
        recorder.flush()
        jobs.finish(model=TrainingRun, pk=run_id, status=Status.FAILED, error=_error_message(exc))
        return TrainingRun.objects.get(pk=run_id)

    version = _record(run_id=run_id, result=result, reference=reference, recorder=recorder)
    if version is not None:
        # What follows (scoring, selection) listens: trainer.pipeline.
        transaction.on_commit(
            partial(
                model_version_recorded.send,
                sender=TrainingRun,
                run_id=run_id,
                model_version=version,
            )
        )
    return TrainingRun.objects.get(pk=run_id)


def _error_message(exc: Exception) -> str:
    from trainer.training.ml.memory import MemoryRefused
    from trainer.training.ml.prm import CheckpointNotWritten

    if isinstance(exc, DomainError | CheckpointNotWritten | MemoryRefused):
        return str(exc)
    if isinstance(exc, SoftTimeLimitExceeded):
        return (
            f"Stopped by the time limit ({settings.PRM_TRAIN_SOFT_TIME_LIMIT} s, "
            "PRM_TRAIN_SOFT_TIME_LIMIT); set max minutes below it to end training in time."
        )
    return f"{type(exc).__name__}: {exc}"


def _train(run: TrainingRun, recorder: RunRecorder):
    from trainer.training.ml.distributed import (
        InvalidProcessCount,
        process_count,
        train_in_process_group,
    )
    from trainer.training.ml.train import train_prm

    params = TrainingParams.from_dict(run.params)
    # Written on this host, then published to the store (`_publish`) for every other host.
    model_dir = store.scratch_dir(create=False)
    _check_checkpoint_dir(model_dir=model_dir)
    try:
        # One process trains here, in the worker; more start their own process group.
        processes = process_count(settings.PRM_TRAIN_PROCESSES)
    except InvalidProcessCount as exc:
        raise TrainingMisconfigured(str(exc)) from None
    # Checked again here, where it is loaded: the web host that accepted it may not see
    # this disk, and a link inside PRM_MODEL_DIR may point out of it.
    base_model = resolve_base_model(params.base_model)
    snapshot_at = timezone.now()
    examples, excluded = dataset.without_evaluation_problems(
        dataset.labeled_examples(params=params)
    )
    if excluded:
        recorder.log(
            f"Left out {excluded} examples of problems an evaluation set holds "
            "(evaluation items are never trained on)."
        )
    if not examples:
        wanted = label_sources.source(params.label_source).trains.missing(params=params)
        raise NoTrainingData(f"No labeled examples: {wanted} matches this run's data filters.")
    train, held_out = dataset.split_by_problem(
        examples, eval_fraction=params.eval_fraction, seed=params.seed
    )
    if not train or not held_out:
        problems = len({example.problem_id for example in examples})
        raise NoTrainingData(
            f"Labels cover {problems} problem(s): a held-out split needs labeled solutions of "
            "at least two problems."
        )
    digest = dataset.snapshot_hash(examples)
    step_labels = dataset.step_label_counts(examples)
    TrainingRun.objects.filter(pk=run.pk).update(
        dataset_size=len(examples),
        dataset_hash=digest,
        snapshot_at=snapshot_at,
        step_labels=step_labels,
    )
    recorder.log(
        f"Data: {len(examples)} examples ({len(train)} train, {len(held_out)} held out), "
        f"snapshot {digest[:12]}."
    )
    recorder.log(
        "Step labels: " + ", ".join(f"{n} {name}" for name, n in step_labels.items()) + "."
    )
    start_from = _warm_start(params=params, base_model=base_model, recorder=recorder)
    if processes == 1:
        from trainer.training.ml.prm import PRM

        train_on = partial(train_prm, prm=PRM.load(start_from) if start_from else None)
    else:
        train_on = partial(train_in_process_group, processes=processes, start_from=start_from)
    return train_on(
        memory_limit=_memory_limit(),
        train=train,
        eval=held_out,
        params=params,
        base_model=base_model,
        out_dir=model_dir / f"run-{run.pk}",
        on_progress=recorder.on_progress,
        should_stop=recorder.should_stop,
        best_of_n_problems=dataset.best_of_n_problems(held_out),
    )


def _memory_limit() -> int | None:
    """PRM_TRAIN_MEMORY_GB in bytes; None lets the loop take what is available when it starts."""
    gb = settings.PRM_TRAIN_MEMORY_GB
    return int(gb * 1024**3) if gb else None


def _warm_start(*, params: TrainingParams, base_model: str | None, recorder) -> str | None:
    """The checkpoint a warm-started run trains on from: the active model version's, when
    it was trained on this run's base model; None for a fresh start."""
    from trainer.training.ml.prm import SETTINGS_FILE

    if not params.warm_start:
        return None
    version = active_model_version()
    if version is None:
        recorder.log("No active model version to start from: training a fresh model.")
        return None
    directory = checkpoints.local_dir(version)
    meta = json.loads((directory / SETTINGS_FILE).read_text(encoding="utf-8"))
    # The same backbone has another path on another host (each host's cache): compare what
    # the two are, not where they lie.
    if store.identity(meta.get("base_model")) != store.identity(base_model):
        raise WarmStartRefused(
            f"warm_start: the active model version {version} was trained on "
            f"{meta.get('base_model') or 'the built-in tiny model'}, this run on "
            f"{base_model or 'the built-in tiny model'}; start this run fresh or activate a "
            "version of the same base model."
        )
    recorder.log(f"Starting from the active model version {version} (warm start).")
    return str(directory)


def _check_checkpoint_dir(*, model_dir: Path) -> None:
    """Refuse the run before any compute is spent when its checkpoint could not be written.

    Checked on the worker, not when the run is requested: the web host may not even see the
    worker's disk. A disk that fills up during training still fails at the save, which leaves
    nothing behind (PRM.save is atomic).
    """
    try:
        model_dir.mkdir(parents=True, exist_ok=True)
        # Creating a directory is what the save does first; root ignores mode bits, so only
        # trying tells (read-only mount, a file in the way, no inodes left).
        os.rmdir(tempfile.mkdtemp(prefix=".write-check-", dir=model_dir))
    except OSError as exc:
        raise CheckpointDirUnwritable(
            f"Checkpoint directory {model_dir} is not writable: [Errno {exc.errno}] "
            f"{exc.strerror}. Fix STORE_SCRATCH_DIR on the worker and start a new run."
        ) from None


def _publish(*, run_id: int, result, recorder: RunRecorder) -> str:
    """Upload the checkpoint written on this host to the store; its reference.

    The store's manifest goes last, so an upload killed half-way leaves nothing a version could
    name, and the version is recorded only after this returns. The local copy is then dropped:
    this host's cache keeps the files (hard links), the scratch directory does not.
    """
    key = checkpoints.key_for_run(run_id)
    recorder.log(f"Checkpoint written; publishing it to {key} in the artifact store.")
    recorder.flush()
    try:
        return checkpoints.publish(directory=Path(result.checkpoint_dir), key=key)
    finally:
        shutil.rmtree(result.checkpoint_dir, ignore_errors=True)


def _record(*, run_id: int, result, reference: str, recorder: RunRecorder) -> ModelVersion | None:
    """The checkpoint is complete on disk: record its version, maybe promote it, finish the run.

    The run's row lock taken here is the point of no return. A cancel that came before it
    (during the last epoch's evaluation or the checkpoint's save) wins: the checkpoint is
    removed and no version recorded. One that comes after waits for this transaction and is
    refused as too late (`cancel_training_run`). Never both.
    """
    recorder.log(f"Checkpoint published to {store.describe(reference)}.")
    with transaction.atomic():
        run = TrainingRun.objects.select_for_update().get(pk=run_id)
        if run.status != Status.RUNNING:
            # Marked failed meanwhile (its heartbeat went stale): that verdict stands.
            logger.warning("Training run %s finished but is %s; no model recorded", run_id, run)
            return None
        if run.cancel_requested:
            recorder.log("Stopped: cancelled while the checkpoint was saved; it is removed.")
            recorder.flush()
            jobs.finish(model=TrainingRun, pk=run_id, status=Status.CANCELLED)
            transaction.on_commit(partial(checkpoints.remove, reference))
            return None
        version, reason = model_versions.record_model_version(
            run=run, checkpoint=reference, metrics=result.final_metrics
        )
        recorder.log(f"Model version {version.pk} recorded; {reason}.")
        recorder.metrics = [
            {"epoch": index + 1, **epoch} for index, epoch in enumerate(result.epochs)
        ]
        recorder.flush()
        jobs.finish(model=TrainingRun, pk=run_id, status=Status.SUCCEEDED)
    return version


def _log_to_run(run_id: int, line: str) -> None:
    jobs.append_log(model=TrainingRun, pk=run_id, text=line)
