"""Background jobs: one shape for every long-running thing stepwise does.

Training runs, sampling runs, scoring chunks and import jobs are each a `Job`: a row whose
status goes queued -> running -> succeeded | failed | cancelled, with who asked for it, when it
started and ended, which worker process holds it and when that worker last beat, a cancel
request, an error and the tail of its log. Its lifecycle is written once, here:

- `start`: queued -> running on this worker (a redelivered task finds it running and stops);
- `heartbeat`: a thread that writes `heartbeat_at` while the work goes on and notices a cancel;
- `finish`: running -> succeeded, failed or cancelled;
- `request_cancel`: a queued job is cancelled at once, a running one is asked to stop;
- `recover_stale`: running jobs whose worker is gone, by one rule, failed (or queued again);
- `run_items`: the whole body of a job that works through items and resumes (sampling and
  judge runs): start, beat, stop at a cancel, fail with the error, succeed; `queue_or_fail`,
  `queued_or_raise` and `resume_items` queue such a job by its task's name and resume it;
- `append_log` / `appended`: the log tail, stamped and bounded.

Each move is one conditional UPDATE, so two parties that race (a cancel and the worker's
finish, a recovery and a late heartbeat) never both win. What differs per kind stays with the
kind: where it honours a cancel (a training step, a sampling item, before a chunk's scores or
an import's rows are committed), what a recovered job becomes, and its own progress fields.

The ground floor: this module imports Django and the standard library, never an app.
"""

import logging
import os
import threading
import traceback
import uuid
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from django.conf import settings
from django.db import OperationalError, close_old_connections, connection, models, transaction
from django.db.models import Q
from django.utils import timezone

from core.errors import Conflict, DomainError, TooMany
from core.queueing import BrokerError, BrokerUnavailable, queue_task

logger = logging.getLogger(__name__)

LOG_TAIL_LINES = 200
LOG_LINE_CHARS = 500


class JobStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


LIVE = (JobStatus.QUEUED, JobStatus.RUNNING)
FINISHED = (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED)


class JobRefused(Conflict):
    """A cancel (or another move) the job's status does not allow."""


class TooManyLiveJobs(TooMany):
    """A person asked for another job of a kind while `LIVE_JOBS_PER_PERSON` of theirs are live."""


def refuse_past_live_limit(*, model: type["Job"], user) -> None:
    """Refuse a person's new job of this kind while as many of theirs as one person may have
    are queued or running (LIVE_JOBS_PER_PERSON): one person's hundred judge runs would hold
    every worker and the generator. Jobs the schedule or a command starts (no user) are not
    counted against anyone. Racing requests may overshoot by one each; the limit is a fairness
    bound, not a lock."""
    limit = settings.LIVE_JOBS_PER_PERSON
    if user is None or not getattr(user, "pk", None) or limit <= 0:
        return
    live = model.objects.filter(requested_by=user, status__in=LIVE).count()
    if live >= limit:
        raise TooManyLiveJobs(
            f"You have {live} {model._meta.verbose_name_plural} queued or running, as many as "
            f"one person may (LIVE_JOBS_PER_PERSON = {limit}); wait for one to finish or "
            "cancel one."
        )


class JobOrigin(models.TextChoices):
    """Where a job was asked for: with `requested_by`, what the pages say under "Requested by"."""

    PAGE = "page", "a page"
    API = "api", "the API"
    COMMAND = "command", "a command"
    SCHEDULE = "schedule", "the schedule"


class Job(models.Model):
    """The fields every background job has; a concrete job adds what it works on."""

    Status = JobStatus
    LIVE = LIVE
    FINISHED = FINISHED

    status = models.CharField(max_length=16, choices=JobStatus.choices, default=JobStatus.QUEUED)
    # Null when the schedule or a command started it (or the user was deleted later).
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Blank on jobs recorded before it was kept.
    origin = models.CharField(max_length=16, choices=JobOrigin.choices, blank=True)
    log_tail = models.TextField(blank=True)
    error = models.TextField(blank=True)
    cancel_requested = models.BooleanField(default=False)

    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    worker_hostname = models.CharField(max_length=255, blank=True)
    worker_pid = models.PositiveIntegerField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True, db_index=True)

    class Meta:
        abstract = True

    @property
    def is_live(self) -> bool:
        return self.status in LIVE

    @property
    def requester(self) -> str:
        """Who and where from, as the pages and the log say it: "ann (a page)", "a command"."""
        where = self.get_origin_display() if self.origin else ""
        if self.requested_by_id is None:
            return where or "–"
        name = self.requested_by.username
        return f"{name} ({where})" if where else name


# What every job's API shows of its lifecycle, after the kind's own fields.
API_FIELDS = [
    "log_tail",
    "error",
    "cancel_requested",
    "created_at",
    "started_at",
    "finished_at",
    "heartbeat_at",
]


def status_constraint(*, name: str) -> models.CheckConstraint:
    """The database's own check that a job's status is one of JobStatus."""
    return models.CheckConstraint(condition=Q(status__in=JobStatus.values), name=name)


def noun(model: type[Job]) -> str:
    """How messages name a kind of job: its verbose name, capitalised ("Training run")."""
    name = str(model._meta.verbose_name)
    return name[:1].upper() + name[1:]


def stale_cutoff() -> datetime:
    """Heartbeats older than this are a dead worker's (PRM_RUN_STALE_SECONDS)."""
    return timezone.now() - timedelta(seconds=settings.PRM_RUN_STALE_SECONDS)


# --- the log tail ----------------------------------------------------------------------------


def log_lines(text: str) -> list[str]:
    """Each line of `text`, stamped with the time and cut to LOG_LINE_CHARS."""
    stamp = timezone.now().strftime("%H:%M:%S")
    return [f"{stamp} {part[:LOG_LINE_CHARS]}" for part in str(text).splitlines() or [""]]


def appended(log_tail: str, text: str) -> str:
    """The log tail with `text` added, keeping the last LOG_TAIL_LINES lines."""
    return "\n".join((log_tail.splitlines() + log_lines(text))[-LOG_TAIL_LINES:])


def append_log(*, model: type[Job], pk: int, text: str) -> None:
    with transaction.atomic():
        # Locked: a worker and a cancel appending at once would each drop the other's line.
        job = model.objects.select_for_update().only("log_tail").get(pk=pk)
        model.objects.filter(pk=pk).update(log_tail=appended(job.log_tail, text))


# --- the worker's side -----------------------------------------------------------------------


def cancel_requested(*, model: type[Job], pk: int) -> bool:
    """Whether someone asked the job to stop; a worker checks it where its kind can stop."""
    return model.objects.filter(pk=pk, cancel_requested=True).exists()


def start(
    *,
    model: type[Job],
    pk: int,
    worker_hostname: str = "",
    record_pid: bool = True,
    only_from: Iterable[str] = (JobStatus.QUEUED,),
    values: Mapping[str, Any] | None = None,
) -> bool:
    """Move the job to running on this worker; False when it was not in `only_from` (a
    redelivered task message, a cancelled job). `values`: more columns to set with it.

    `record_pid=False` leaves the worker's pid empty, for a job any process of the worker may
    hold (a scoring chunk): a worker restarting under its name then recovers it at once.
    """
    now = timezone.now()
    return bool(
        model.objects.filter(pk=pk, status__in=list(only_from)).update(
            status=JobStatus.RUNNING,
            started_at=now,
            heartbeat_at=now,
            worker_hostname=worker_hostname[:255],
            worker_pid=os.getpid() if record_pid else None,
            **(values or {}),
        )
    )


def finish(
    *,
    model: type[Job],
    pk: int,
    status: str,
    error: str = "",
    only_from: Iterable[str] = (JobStatus.RUNNING,),
    claim: Mapping[str, Any] | None = None,
    values: Mapping[str, Any] | None = None,
) -> bool:
    """Move the job to a final status; False when it was no longer in `only_from` or no longer
    matches `claim` (the conditions that say it is still this worker's, or not cancelled)."""
    return bool(
        model.objects.filter(pk=pk, status__in=list(only_from), **(claim or {})).update(
            status=status, error=error, finished_at=timezone.now(), **(values or {})
        )
    )


class Heartbeat:
    """Writes a running job's `heartbeat_at` every PRM_HEARTBEAT_SECONDS on its own thread, so
    a long stretch without progress is not taken for a dead worker; sets `cancelled` once a
    cancel is requested. Use it as a context manager around the work (`heartbeat`).

    The thread has its own connection. Inside a caller's transaction (a test, a caller's atomic
    block) no other connection sees the job as running, so there is nothing to beat for and no
    thread is started.
    """

    def __init__(self, *, model: type[Job], pk: int, claim: Mapping[str, Any] | None) -> None:
        self.model, self.pk, self.claim = model, pk, dict(claim or {})
        self.cancelled = threading.Event()
        self._done = threading.Event()
        self._thread = threading.Thread(
            target=self._beat, name=f"{model._meta.model_name}-{pk}-heartbeat", daemon=True
        )
        self._enabled = not connection.in_atomic_block

    def __enter__(self) -> "Heartbeat":
        if self._enabled:
            self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        if self._enabled:
            self._done.set()
            self._thread.join(timeout=30)

    def _beat(self) -> None:
        try:
            while not self._done.wait(settings.PRM_HEARTBEAT_SECONDS):
                try:
                    self.model.objects.filter(
                        pk=self.pk, status=JobStatus.RUNNING, **self.claim
                    ).update(heartbeat_at=timezone.now())
                    if cancel_requested(model=self.model, pk=self.pk):
                        self.cancelled.set()
                except OperationalError as exc:
                    # SQLite's one writer may be the job itself (an import's transaction): the
                    # beat misses its turn, and a recovery waits for the same lock, by when the
                    # job has finished.
                    logger.warning("Heartbeat of %s %s missed: %s", noun(self.model), self.pk, exc)
                    close_old_connections()
                except Exception:  # a missed beat must never take the job down
                    logger.exception("Heartbeat of %s %s failed", noun(self.model), self.pk)
                    close_old_connections()
        finally:
            connection.close()


def heartbeat(*, model: type[Job], pk: int, claim: Mapping[str, Any] | None = None) -> Heartbeat:
    """The heartbeat of a running job, beating while the `with` block runs; `claim` narrows
    the rows it beats for to this worker's claim (its pid, its attempt)."""
    return Heartbeat(model=model, pk=pk, claim=claim)


class Superseded(Exception):
    """The job is no longer this worker's (marked failed meanwhile, or resumed elsewhere)."""


def run_items(
    *,
    model: type[Job],
    pk: int,
    worker_hostname: str,
    work: Callable[[Job], bool],
    log: Callable[[str], None],
    done: Callable[[Job], str],
) -> tuple[Job, bool]:
    """Run a queued job whose `work` goes through items, each committed with its output (so
    a resumed job does only the items left); return the job and whether it succeeded now.

    Only a queued job starts: a redelivered message finds it running or finished and does
    nothing. `work(job)` returns False when it stopped for a cancel between items, and raises
    `Superseded` when the job stopped being this process's. An error fails the job with its
    message (a DomainError's own words); `done(job)` is logged on success.
    """
    started = start(model=model, pk=pk, worker_hostname=worker_hostname)
    job = model.objects.get(pk=pk)
    name = f"{noun(model)} {pk}"
    if not started:
        logger.info("%s is %s, not queued: nothing to do.", name, job.status)
        return job, False
    log(f"Started on {worker_hostname or 'this process'} (pid {os.getpid()}).")
    try:
        # Beats only while this process still holds the job (not after a resume elsewhere).
        with heartbeat(model=model, pk=pk, claim={"worker_pid": os.getpid()}):
            finished = work(job)
    except KeyboardInterrupt:
        finish(
            model=model, pk=pk, status=JobStatus.CANCELLED, error="Interrupted from the keyboard."
        )
        raise
    except Superseded:
        logger.warning("%s is no longer this worker's; stopped", name)
        return model.objects.get(pk=pk), False
    except Exception as exc:
        logger.exception("%s failed", name)
        log(traceback.format_exc(limit=3))
        message = str(exc) if isinstance(exc, DomainError) else f"{type(exc).__name__}: {exc}"
        finish(model=model, pk=pk, status=JobStatus.FAILED, error=message)
        return model.objects.get(pk=pk), False
    if not finished:
        log("Stopped: cancelled.")
        finish(model=model, pk=pk, status=JobStatus.CANCELLED)
        return model.objects.get(pk=pk), False
    # Running -> succeeded, unless a cancel was accepted meanwhile (during the last item): a
    # cancel answered "stopping" is honoured. A cancel after this update is refused.
    if finish(model=model, pk=pk, status=JobStatus.SUCCEEDED, claim={"cancel_requested": False}):
        job = model.objects.get(pk=pk)
        log(done(job))
        return job, True
    if finish(model=model, pk=pk, status=JobStatus.CANCELLED):
        log("Stopped: cancelled during its last item, which is kept.")
    return model.objects.get(pk=pk), False


# --- anyone's side ---------------------------------------------------------------------------


def request_cancel(
    *, model: type[Job], pk: int, stops: str, refused: type[Conflict] = JobRefused
) -> Job:
    """A queued job is cancelled at once; a running one is asked to stop, which it does
    `stops` ("at the next step"), where its kind checks `cancel_requested`. A finished job
    raises `refused`."""
    if model.objects.filter(pk=pk, status=JobStatus.QUEUED).update(
        status=JobStatus.CANCELLED, cancel_requested=True, finished_at=timezone.now()
    ):
        append_log(model=model, pk=pk, text="Cancelled before it started.")
    elif model.objects.filter(pk=pk, status=JobStatus.RUNNING).update(cancel_requested=True):
        append_log(model=model, pk=pk, text=f"Cancellation requested; stopping {stops}.")
    else:
        job = model.objects.get(pk=pk)
        raise refused(f"{noun(model)} {pk} has already {job.status}.")
    return model.objects.get(pk=pk)


def reopen(
    *,
    model: type[Job],
    pk: int,
    refused: type[Conflict] = JobRefused,
    again: str = "resumes",
    values: Mapping[str, Any] | None = None,
) -> None:
    """A failed or cancelled job queued again, with `values` (its kind's own fields, such as
    a fresh task id or results cleared) besides the reset status; anything else raises
    `refused` ("… only a failed or cancelled <job> `again`"). Call it in a transaction that
    also queues the job on commit."""
    reset = {
        "status": JobStatus.QUEUED,
        "cancel_requested": False,
        "error": "",
        "finished_at": None,
        "heartbeat_at": None,
        "worker_hostname": "",
        "worker_pid": None,
        **(values or {}),
    }
    reopened = model.objects.filter(
        pk=pk, status__in=(JobStatus.FAILED, JobStatus.CANCELLED)
    ).update(**reset)
    if not reopened:
        job = model.objects.get(pk=pk)
        name = str(model._meta.verbose_name)
        raise refused(
            f"{noun(model)} {pk} is {job.status}: only a failed or cancelled {name} {again}."
        )


# --- a job of items, queued by its task's name (sampling and judge runs) ---------------------


def queue_or_fail(*, model: type[Job], pk: int, task: str, api_key: str = "") -> None:
    """Send the job's task (the researcher's key for their own server travels in the task's
    message only: never in the row, never in a log). A broker that cannot be reached fails the
    job, which then resumes."""
    job = model.objects.get(pk=pk)
    secret = {"secret_kwargs": {"api_key": api_key}} if api_key else {}
    try:
        queue_task(task, (pk,), task_id=job.celery_task_id, **secret)
    except (BrokerError, OSError) as exc:
        logger.warning("Could not queue %s: %s", job, exc)
        finish(
            model=model,
            pk=pk,
            status=JobStatus.FAILED,
            error=f"Could not queue the {model._meta.verbose_name}: the task broker is "
            f"unreachable ({exc}).",
            only_from=(JobStatus.QUEUED,),
        )


def queue_on_commit(*, model: type[Job], pk: int, task: str, api_key: str = "") -> None:
    """`queue_or_fail` once the transaction that wrote the job commits."""
    transaction.on_commit(partial(queue_or_fail, model=model, pk=pk, task=task, api_key=api_key))


def queued_or_raise(*, model: type[Job], pk: int) -> Job:
    """The job once its queueing committed; BrokerUnavailable when that failed it."""
    job = model.objects.get(pk=pk)
    if job.status == JobStatus.FAILED:
        raise BrokerUnavailable(job.error)
    return job


def resume_items(
    *,
    model: type[Job],
    pk: int,
    left: "models.QuerySet",
    left_noun: str,
    task: str,
    refused: type[Conflict],
    advice: str,
    enqueue: bool = True,
    api_key: str = "",
) -> Job:
    """Queue a failed or cancelled job of items again (a running one whose worker is gone is
    failed first, with `advice`); it does only the items `left` (a queryset of its items not
    done). Raises `refused` for a job that is live or succeeded, BrokerUnavailable when the
    task cannot be queued (the job is failed again, still resumable)."""
    recover_stale(model=model, older_than=stale_cutoff(), advice=advice)
    with transaction.atomic():
        reopen(model=model, pk=pk, refused=refused, values={"celery_task_id": str(uuid.uuid4())})
        append_log(model=model, pk=pk, text=f"Resumed: {left.count()} {left_noun} left.")
        if enqueue:
            queue_on_commit(model=model, pk=pk, task=task, api_key=api_key)
    return queued_or_raise(model=model, pk=pk)


def process_alive(pid: int) -> bool:
    """Whether a process of this pid exists on this host (a worker that restarted under the
    same name finds its dead predecessor's jobs by it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def recover_stale(
    *,
    model: type[Job],
    advice: str,
    older_than: datetime | None = None,
    worker_hostname: str = "",
    to_status: str = JobStatus.FAILED,
) -> list[int]:
    """Recover running jobs whose worker is gone; return their ids.

    The rule: a running job is gone when its heartbeat is older than `older_than`, or, given
    the name of a worker that just started, when it ran on a worker of that name whose process
    no longer exists (or was never recorded). A gone job becomes `to_status` (failed; queued
    again for a job any worker may retake) with the reason and `advice` as its error and in
    its log. A job that beat again meanwhile is left alone.
    """
    running = model.objects.filter(status=JobStatus.RUNNING)
    stale: set[int] = set()
    if older_than is not None:
        stale.update(running.filter(heartbeat_at__lt=older_than).values_list("pk", flat=True))
    if worker_hostname:
        for pk, pid in running.filter(worker_hostname=worker_hostname).values_list(
            "pk", "worker_pid"
        ):
            if pid is None or not process_alive(pid):
                stale.add(pk)
    recovered = []
    for pk in sorted(stale):
        job = model.objects.only("worker_hostname", "heartbeat_at").get(pk=pk)
        beat = f"{job.heartbeat_at:%Y-%m-%d %H:%M:%S %Z}" if job.heartbeat_at else "none"
        message = (
            f"The worker {job.worker_hostname or '(unknown)'} stopped during the run (last "
            f"heartbeat {beat}): {advice}"
        )
        moved = model.objects.filter(
            pk=pk, status=JobStatus.RUNNING, heartbeat_at=job.heartbeat_at
        ).update(
            status=to_status,
            error=message,
            finished_at=timezone.now() if to_status in FINISHED else None,
        )
        if moved:
            logger.warning("%s %s recovered (%s): %s", noun(model), pk, to_status, message)
            append_log(model=model, pk=pk, text=message)
            recovered.append(pk)
    return recovered
