"""Training runs and model versions: request, execute, cancel, activate, recover from dead workers.

The ML itself (examples, the PRM, the loop, scoring) lives in dataset/prm/train/score; this
module turns it into recorded runs. Those modules import torch, so they are imported inside
the functions that need them: the web process never pays for torch to show a page.
"""

import logging
import os
import tempfile
import threading
import time
import traceback
import uuid
from collections import deque
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import IntegrityError, close_old_connections, connection, transaction
from django.db.models import QuerySet
from django.utils import timezone
from kombu.exceptions import OperationalError as BrokerError

from labeling.models import Solution
from trainer.models import ModelVersion, TrainingRun

logger = logging.getLogger(__name__)

Status = TrainingRun.Status

LOG_TAIL_LINES = 200
LOG_LINE_CHARS = 500
# Progress reaches the database at most this often: a step can take milliseconds.
FLUSH_SECONDS = 1.0


class TrainingRefused(Exception):
    """A training request that cannot be applied; the message says why."""


class BrokerUnavailable(TrainingRefused):
    """The run was recorded but could not be handed to a worker."""


# --- parameters -------------------------------------------------------------------------------

# name: (type, default). Dataset filters, then trainer.train.TrainParams fields, then the rest.
PARAMS: dict[str, tuple[type, Any]] = {
    "include_qc": (bool, True),
    "include_screening": (bool, False),
    "generation_min": (int, None),
    "generation_max": (int, None),
    "epochs": (int, 3),
    "learning_rate": (float, 3e-4),
    "batch_size": (int, 16),
    "grad_accum": (int, 1),
    "warmup_ratio": (float, 0.1),
    "schedule": (str, "cosine"),
    "max_grad_norm": (float, 1.0),
    "seed": (int, 0),
    "eval_fraction": (float, 0.1),
    "neutral_as_positive": (bool, True),
    "aggregation": (str, "product"),
    "max_minutes": (float, None),
    "base_model": (str, None),
}
DATASET_KEYS = ("include_qc", "include_screening", "generation_min", "generation_max")
TRAIN_KEYS = (
    "epochs",
    "learning_rate",
    "batch_size",
    "grad_accum",
    "warmup_ratio",
    "schedule",
    "max_grad_norm",
    "seed",
    "eval_fraction",
    "neutral_as_positive",
    "aggregation",
)
CHOICES = {"schedule": {"cosine", "linear"}, "aggregation": {"product", "min", "last"}}
POSITIVE = {"epochs", "learning_rate", "batch_size", "grad_accum", "max_minutes"}


def clean_params(params: dict[str, Any]) -> dict[str, Any]:
    """Every parameter with its default filled in, or TrainingRefused naming the bad one."""
    unknown = set(params) - set(PARAMS)
    if unknown:
        raise TrainingRefused(f"Unknown training parameter(s): {', '.join(sorted(unknown))}.")
    cleaned: dict[str, Any] = {}
    for name, (kind, default) in PARAMS.items():
        value = params.get(name, default)
        if value is None or value == "":
            cleaned[name] = default
            continue
        if kind is bool and not isinstance(value, bool):
            raise TrainingRefused(f"{name} must be true or false.")
        try:
            value = kind(value)
        except (TypeError, ValueError):
            raise TrainingRefused(f"{name} must be a {kind.__name__}.") from None
        if name in POSITIVE and value <= 0:
            raise TrainingRefused(f"{name} must be positive.")
        if name in CHOICES and value not in CHOICES[name]:
            raise TrainingRefused(f"{name} must be one of {', '.join(sorted(CHOICES[name]))}.")
        cleaned[name] = value
    if not 0 < cleaned["eval_fraction"] < 1:
        raise TrainingRefused("eval_fraction must be between 0 and 1.")
    low, high = cleaned["generation_min"], cleaned["generation_max"]
    if low is not None and high is not None and low > high:
        raise TrainingRefused("generation_min is above generation_max.")
    return cleaned


# --- requesting and cancelling ----------------------------------------------------------------


def _stale_cutoff() -> datetime:
    return timezone.now() - timedelta(seconds=settings.PRM_RUN_STALE_SECONDS)


def request_training_run(*, user, params: dict[str, Any], enqueue: bool = True) -> TrainingRun:
    """Record a queued run and hand it to a GPU worker once the row is committed.

    One run at a time: while another is queued or running the request is refused (the
    database refuses a second live run too, whoever inserts it). `enqueue=False` leaves the
    run for the caller to execute in the foreground (`manage.py train_prm`).
    """
    params = clean_params(params)
    # A run whose worker died would otherwise block every new request.
    mark_stale_runs_failed(older_than=_stale_cutoff())
    try:
        with transaction.atomic():
            live = TrainingRun.objects.filter(status__in=TrainingRun.LIVE).first()
            if live is not None:
                raise TrainingRefused(
                    f"Training run {live.pk} is still {live.status}: wait for it to finish "
                    "or cancel it first."
                )
            run = TrainingRun.objects.create(
                triggered_by=user, params=params, celery_task_id=str(uuid.uuid4())
            )
            _log_to_run(run.pk, f"Queued by {user.username if user else 'the schedule'}.")
            if enqueue:
                transaction.on_commit(partial(_enqueue_training, run_id=run.pk))
    except IntegrityError:
        raise TrainingRefused(
            "Another training run was requested at the same moment; only one runs at a time."
        ) from None
    run.refresh_from_db()
    if run.status == Status.FAILED:
        raise BrokerUnavailable(run.error)
    return run


def _enqueue_training(*, run_id: int) -> None:
    from trainer import tasks

    run = TrainingRun.objects.get(pk=run_id)
    try:
        tasks.train_prm.apply_async((run_id,), task_id=run.celery_task_id)
    except (BrokerError, OSError) as exc:
        logger.warning("Could not queue training run %s: %s", run_id, exc)
        _finish(
            run_id,
            status=Status.FAILED,
            error=f"Could not queue the run: the task broker is unreachable ({exc}).",
            only_from=(Status.QUEUED,),
        )


def cancel_training_run(*, run_id: int) -> TrainingRun:
    """A queued run is cancelled at once; a running one stops at its next step boundary."""
    now = timezone.now()
    cancelled = TrainingRun.objects.filter(pk=run_id, status=Status.QUEUED).update(
        status=Status.CANCELLED, cancel_requested=True, finished_at=now
    )
    if not cancelled:
        requested = TrainingRun.objects.filter(pk=run_id, status=Status.RUNNING).update(
            cancel_requested=True
        )
        if not requested:
            run = TrainingRun.objects.get(pk=run_id)
            raise TrainingRefused(f"Training run {run_id} has already {run.status}.")
        _log_to_run(run_id, "Cancellation requested; stopping at the next step.")
    else:
        _log_to_run(run_id, "Cancelled before it started.")
    return TrainingRun.objects.get(pk=run_id)


def mark_stale_runs_failed(*, older_than: datetime, worker_hostname: str = "") -> list[int]:
    """Fail running runs whose worker is gone; return their ids.

    A run is gone when its heartbeat is older than `older_than`, or, given the name of a worker
    that just started, when it ran on a worker of that name whose process no longer exists.
    """
    running = TrainingRun.objects.filter(status=Status.RUNNING)
    stale = set(running.filter(heartbeat_at__lt=older_than).values_list("pk", flat=True))
    if worker_hostname:
        for pk, pid in running.filter(worker_hostname=worker_hostname).values_list(
            "pk", "worker_pid"
        ):
            if pid is None or not _process_alive(pid):
                stale.add(pk)
    failed = []
    for pk in sorted(stale):
        run = TrainingRun.objects.get(pk=pk)
        message = (
            f"The worker {run.worker_hostname or '(unknown)'} stopped during the run (last "
            f"heartbeat {run.heartbeat_at:%Y-%m-%d %H:%M:%S %Z}): it was probably killed or ran "
            "out of memory. Start a new run."
        )
        if _finish(pk, status=Status.FAILED, error=message, only_from=(Status.RUNNING,)):
            logger.warning("Training run %s marked failed: %s", pk, message)
            failed.append(pk)
    return failed


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def maybe_start_scheduled_training() -> TrainingRun | None:
    """Start a run when enough sessions were submitted since the last successful snapshot."""
    mark_stale_runs_failed(older_than=_stale_cutoff())
    if TrainingRun.objects.filter(status__in=TrainingRun.LIVE).exists():
        return None
    last = (
        TrainingRun.objects.filter(status=Status.SUCCEEDED, snapshot_at__isnull=False)
        .order_by("-snapshot_at")
        .first()
    )
    from trainer.selectors import submitted_sessions_since

    new = submitted_sessions_since(since=last.snapshot_at if last else None)
    if new < settings.PRM_RETRAIN_MIN_NEW_LABELS:
        logger.info(
            "Not retraining: %s new submitted sessions, %s needed.",
            new,
            settings.PRM_RETRAIN_MIN_NEW_LABELS,
        )
        return None
    # Retrain the way the last good model was trained, on the larger data.
    params = last.params if last else {}
    try:
        return request_training_run(user=None, params=params)
    except TrainingRefused as exc:
        logger.warning("Scheduled training not started: %s", exc)
        return None


# --- executing (the body of the Celery task) --------------------------------------------------


class _RunRecorder:
    """Streams progress, per-epoch metrics and log lines into the run, and notices cancellation.

    Writes are throttled to about one per second. A daemon thread also writes a heartbeat on
    its own schedule, so a long stretch without steps (tokenizer training, saving) is not
    mistaken for a dead worker.
    """

    def __init__(self, run_id: int) -> None:
        self.run_id = run_id
        self.lines: deque[str] = deque(maxlen=LOG_TAIL_LINES)
        self.metrics: list[dict] = []
        self.fields: dict[str, Any] = {}
        self.cancelled = threading.Event()
        self._last_flush = 0.0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"run-{run_id}-heartbeat")
        self._thread.daemon = True

    def __enter__(self) -> "_RunRecorder":
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._done.set()
        self._thread.join(timeout=30)
        self.flush()

    def log(self, line: str) -> None:
        stamp = timezone.now().strftime("%H:%M:%S")
        for part in str(line).splitlines() or [""]:
            self.lines.append(f"{stamp} {part[:LOG_LINE_CHARS]}")
        self.maybe_flush()

    def on_progress(self, event: dict) -> None:
        if "log" in event:
            self.log(event["log"])
        if "metrics" in event:
            self.metrics.append({"epoch": event.get("epoch"), **event["metrics"]})
            self.fields["epoch"] = event.get("epoch", self.fields.get("epoch", 0))
            self.flush()
            return
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
        if TrainingRun.objects.filter(pk=self.run_id, cancel_requested=True).exists():
            self.cancelled.set()

    def _beat(self) -> None:
        try:
            while not self._done.wait(settings.PRM_HEARTBEAT_SECONDS):
                try:
                    TrainingRun.objects.filter(pk=self.run_id, status=Status.RUNNING).update(
                        heartbeat_at=timezone.now()
                    )
                    if TrainingRun.objects.filter(pk=self.run_id, cancel_requested=True).exists():
                        self.cancelled.set()
                except Exception:  # a missed beat must never take the run down
                    logger.exception("Heartbeat of training run %s failed", self.run_id)
                    close_old_connections()
        finally:
            connection.close()


def execute_training_run(*, run_id: int, worker_hostname: str = "") -> TrainingRun:
    """Train the model a queued run asks for, recording everything; never raises for the run.

    Only a queued run starts: a redelivered task message (a worker restart, Redis's visibility
    timeout on a long run) finds the run already running or finished and does nothing.
    """
    now = timezone.now()
    started = TrainingRun.objects.filter(pk=run_id, status=Status.QUEUED).update(
        status=Status.RUNNING,
        started_at=now,
        heartbeat_at=now,
        worker_hostname=worker_hostname,
        worker_pid=os.getpid(),
    )
    run = TrainingRun.objects.get(pk=run_id)
    if not started:
        logger.info("Training run %s is %s, not queued: nothing to do.", run_id, run.status)
        return run

    recorder = _RunRecorder(run_id)
    recorder.lines.extend(run.log_tail.splitlines())
    recorder.log(f"Started on {worker_hostname or 'this process'} (pid {os.getpid()}).")
    try:
        with recorder:
            result = _train(run, recorder)
    except KeyboardInterrupt:
        # Ctrl-C on `manage.py train_prm`: record it rather than leave the run to go stale.
        _finish(run_id, status=Status.CANCELLED, error="Interrupted from the keyboard.")
        raise
    except Exception as exc:
        from trainer.train import TrainingCancelled

        if isinstance(exc, TrainingCancelled):
            recorder.log("Stopped: cancelled.")
            _finish(run_id, status=Status.CANCELLED, only_from=(Status.RUNNING,))
        else:
            logger.exception("Training run %s failed", run_id)
            recorder.log(traceback.format_exc(limit=5))
            recorder.flush()
            _finish(run_id, status=Status.FAILED, error=_error_message(exc))
        return TrainingRun.objects.get(pk=run_id)

    version = _record_model_version(run_id=run_id, result=result, recorder=recorder)
    if version is not None and version.is_active:
        transaction.on_commit(partial(_enqueue_scoring, model_version_id=version.pk))
        # Then the next generation, as SELECTION_AFTER_RETRAIN says (queued behind scoring).
        from trainer.selection import select_after_retrain

        transaction.on_commit(
            partial(select_after_retrain, run_id=run_id, model_version_id=version.pk)
        )
    return TrainingRun.objects.get(pk=run_id)


def _error_message(exc: Exception) -> str:
    from trainer.prm import CheckpointNotWritten

    if isinstance(exc, TrainingRefused | CheckpointNotWritten):
        return str(exc)
    if isinstance(exc, SoftTimeLimitExceeded):
        return (
            f"Stopped by the time limit ({settings.PRM_TRAIN_SOFT_TIME_LIMIT} s, "
            "PRM_TRAIN_SOFT_TIME_LIMIT); set max minutes below it to end training in time."
        )
    return f"{type(exc).__name__}: {exc}"


def _train(run: TrainingRun, recorder: _RunRecorder):
    from trainer import dataset
    from trainer.train import TrainParams, train_prm

    params = run.params
    model_dir = Path(settings.PRM_MODEL_DIR)
    _check_checkpoint_dir(model_dir=model_dir)
    snapshot_at = timezone.now()
    examples = dataset.build_examples(**{key: params.get(key) for key in DATASET_KEYS})
    if not examples:
        raise TrainingRefused(
            "No labeled examples: no submitted labeling session matches this run's data filters."
        )
    train, held_out = dataset.split_by_problem(
        examples, eval_fraction=params.get("eval_fraction", 0.1), seed=params.get("seed", 0)
    )
    if not train or not held_out:
        problems = len({example.problem_id for example in examples})
        raise TrainingRefused(
            f"Labels cover {problems} problem(s): a held-out split needs labeled solutions of "
            "at least two problems."
        )
    digest = dataset.snapshot_hash(examples)
    TrainingRun.objects.filter(pk=run.pk).update(
        dataset_size=len(examples), dataset_hash=digest, snapshot_at=snapshot_at
    )
    recorder.log(
        f"Data: {len(examples)} examples ({len(train)} train, {len(held_out)} held out), "
        f"snapshot {digest[:12]}."
    )
    train_params = TrainParams.from_dict({key: params[key] for key in TRAIN_KEYS if key in params})
    if params.get("max_minutes"):
        train_params.max_seconds = float(params["max_minutes"]) * 60
    out_dir = model_dir / f"run-{run.pk}"
    return train_prm(
        train=train,
        eval=held_out,
        params=train_params,
        base_model=params.get("base_model") or settings.PRM_BASE_MODEL,
        out_dir=out_dir,
        on_progress=recorder.on_progress,
        should_stop=recorder.should_stop,
    )


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
        raise TrainingRefused(
            f"Checkpoint directory {model_dir} is not writable: [Errno {exc.errno}] "
            f"{exc.strerror}. Fix PRM_MODEL_DIR on the worker and start a new run."
        ) from None


def _record_model_version(*, run_id: int, result, recorder: _RunRecorder) -> ModelVersion | None:
    """The checkpoint is complete on disk: record it, finish the run, maybe promote it."""
    recorder.log(f"Checkpoint written to {result.checkpoint_dir}.")
    with transaction.atomic():
        run = TrainingRun.objects.select_for_update().get(pk=run_id)
        if run.status != Status.RUNNING:
            # Marked failed meanwhile (its heartbeat went stale): that verdict stands.
            logger.warning("Training run %s finished but is %s; no model recorded", run_id, run)
            return None
        version = ModelVersion.objects.create(
            name=f"run {run_id}",
            checkpoint_path=str(result.checkpoint_dir),
            metrics=result.final_metrics,
            training_run=run,
        )
        promote, reason = _beats_active(version)
        recorder.log(f"Model version {version.pk} recorded; {reason}.")
        if promote:
            _activate(version)
        recorder.metrics = [
            {"epoch": index + 1, **epoch} for index, epoch in enumerate(result.epochs)
        ]
        recorder.flush()
        _finish(run_id, status=Status.SUCCEEDED, only_from=(Status.RUNNING,))
    return version


def _beats_active(version: ModelVersion) -> tuple[bool, str]:
    metric = settings.PRM_PROMOTE_METRIC
    if not settings.PRM_AUTO_PROMOTE:
        return False, "automatic promotion is off (PRM_AUTO_PROMOTE)"
    new = version.metrics.get(metric)
    if new is None:
        return False, f"not promoted: its {metric} could not be computed"
    active = ModelVersion.objects.filter(is_active=True).exclude(pk=version.pk).first()
    if active is None:
        return True, "promoted: no model was active"
    old = active.metrics.get(metric)
    if old is None or new > old:
        return True, f"promoted: {metric} {new:.4f} beats {active}'s {_fmt(old)}"
    return False, f"not promoted: {metric} {new:.4f} does not beat {active}'s {_fmt(old)}"


def _fmt(value: float | None) -> str:
    return "none" if value is None else f"{value:.4f}"


def _finish(
    run_id: int,
    *,
    status: str,
    error: str = "",
    only_from: tuple[str, ...] = (Status.RUNNING,),
) -> bool:
    """Move a live run to a final status; False when it was no longer in `only_from`."""
    return bool(
        TrainingRun.objects.filter(pk=run_id, status__in=only_from).update(
            status=status, error=error, finished_at=timezone.now()
        )
    )


def _log_to_run(run_id: int, line: str) -> None:
    run = TrainingRun.objects.get(pk=run_id)
    stamp = timezone.now().strftime("%H:%M:%S")
    lines = (run.log_tail.splitlines() + [f"{stamp} {line[:LOG_LINE_CHARS]}"])[-LOG_TAIL_LINES:]
    TrainingRun.objects.filter(pk=run_id).update(log_tail="\n".join(lines))


# --- model versions ---------------------------------------------------------------------------


def _activate(version: ModelVersion) -> None:
    ModelVersion.objects.filter(is_active=True).exclude(pk=version.pk).update(is_active=False)
    version.is_active = True
    version.promoted_at = timezone.now()
    version.save(update_fields=["is_active", "promoted_at"])


def activate_model_version(*, model_version_id: int) -> ModelVersion:
    """Make this version the active one (the one that scores and selects) and rescore with it."""
    try:
        with transaction.atomic():
            version = ModelVersion.objects.select_for_update().get(pk=model_version_id)
            if not version.is_active:
                _activate(version)
                transaction.on_commit(partial(_enqueue_scoring, model_version_id=version.pk))
    except IntegrityError:
        raise TrainingRefused("Another model version was activated at the same moment.") from None
    return version


def _enqueue_scoring(*, model_version_id: int) -> None:
    from trainer import tasks

    try:
        tasks.score_solutions.delay(model_version_id)
    except (BrokerError, OSError) as exc:
        logger.error("Could not queue scoring with model version %s: %s", model_version_id, exc)


def score_with_model_version(
    *, model_version_id: int, solution_ids: list[int] | None = None
) -> int:
    """Write this version's step and solution scores; returns how many were written.

    Without ids: every solution that does not carry this version's scores yet. A version's
    scores never change, so a scoring that was interrupted (its worker killed) and runs again
    continues where it stopped, and a duplicate finds nothing left to do. Scoring everything
    with a version that is no longer active would overwrite the active version's scores, so
    that request is skipped.
    """
    version = ModelVersion.objects.filter(pk=model_version_id).first()
    if version is None:
        # A redelivered message can outlive the version an admin deleted.
        logger.info("Model version %s no longer exists; nothing to score", model_version_id)
        return 0
    if solution_ids is None:
        if not version.is_active:
            logger.info("%s is no longer active; not rescoring every solution with it", version)
            return 0
        solution_ids = list(_not_scored_by(version).order_by("pk").values_list("pk", flat=True))
        if not solution_ids:
            return 0
    from trainer.prm import PRM
    from trainer.score import score_solutions

    prm = PRM.load(version.checkpoint_path)
    return score_solutions(prm=prm, solution_ids=solution_ids, model_version_id=version.pk)


def _not_scored_by(version: ModelVersion) -> QuerySet[Solution]:
    return Solution.objects.exclude(prm_model_version=version)


def requeue_unfinished_scoring(*, activated_before: datetime | None = None) -> int | None:
    """Queue the rescoring of the active version again if some solutions lack its scores.

    Called when a worker starts: a scoring whose worker was killed is otherwise lost (the
    filesystem broker has no redelivery, and Redis redelivers an unacknowledged message only
    after its visibility timeout). Also called by the periodic task with `activated_before`
    set to one scoring time limit ago: a version activated earlier cannot still be scoring,
    and a prefork pool child killed mid-scoring (out of memory) restarts no worker. Returns
    the version queued, or None when every solution carries the active version's scores (or
    the version is too recent to tell).
    """
    version = ModelVersion.objects.filter(is_active=True).first()
    if version is None or not _not_scored_by(version).exists():
        return None
    if activated_before is not None and (
        version.promoted_at is None or version.promoted_at > activated_before
    ):
        return None
    logger.warning("Scoring with %s is unfinished; queueing it again", version)
    _enqueue_scoring(model_version_id=version.pk)
    return version.pk
