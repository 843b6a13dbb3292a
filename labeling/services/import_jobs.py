"""Imports as jobs: an uploaded file is checked, published to the artifact store, and imported
by a worker on any host.

The importers themselves (`importing`, `prm800k_import`) are all-or-nothing; a job (`core.jobs`)
records who uploaded what and how it ended, so a script can poll it. The rows an import writes and
its job's success commit together: a cancel that came first, or a worker that died, leaves
nothing imported.

The web host spools an upload to its own scratch space (`core.store.spooled`, refused past
IMPORT_MAX_UPLOAD_BYTES), checks it there, and only then publishes it to the artifact store
(`core/store.py`); the job records the reference (`ImportJob.upload`, `<key>@<digest>`), and
the worker reads it back through its own host's cache (`store.local_file`). The upload lives
in the store only as long as its job has work to do: a refused upload, a store that fails, a
queue that cannot be reached and a finished job, failed, cancelled or not, leave nothing of it
in the store. Rows made before the store hold an absolute path on the web host, which is still
read (and removed) where it exists.
"""

import contextlib
import logging
import uuid
from collections.abc import Callable
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import IO

from django.conf import settings
from django.db import transaction
from kombu.exceptions import OperationalError as BrokerError

from core import jobs, patterns, store
from core.errors import Invalid, TooLarge, Unavailable
from core.queueing import queue_task
from labeling.models import ImportJob
from labeling.services.importing import (
    ImportFailed,
    check_column,
    import_problems,
    import_solutions,
    parse_problem,
    parse_solution,
    read_jsonl,
)
from labeling.services.prm800k_import import import_prm800k, parse_line

logger = logging.getLogger(__name__)

Status = ImportJob.Status

IMPORTERS = {
    ImportJob.Kind.PROBLEMS: import_problems,
    ImportJob.Kind.SOLUTIONS: import_solutions,
    ImportJob.Kind.PRM800K: import_prm800k,
}
# What each kind's importer checks of one line before it needs the database.
LINE_CHECKS = {
    ImportJob.Kind.PROBLEMS: parse_problem,
    ImportJob.Kind.SOLUTIONS: parse_solution,
    ImportJob.Kind.PRM800K: parse_line,
}
# Kinds whose whole file is checked by their own function (`register_importer`): it returns
# the rows read, or raises ImportFailed naming FILE:LINE (or FILE:ROW for Parquet).
FILE_CHECKS: dict[str, Callable[..., int]] = {}


def register_importer(*, kind: str, importer: Callable, check_file: Callable[..., int]) -> None:
    """Let a room above labeling (the trainer's imported labels) serve a kind of upload: the
    kind is one of ImportJob.Kind, its importer is all or nothing like the others."""
    IMPORTERS[kind] = importer
    FILE_CHECKS[kind] = check_file


class UploadRefused(Invalid):
    """An upload that is not imported; the message names the problem."""


class UploadTooLarge(UploadRefused, TooLarge):
    """An upload over the configured size limit."""


class _Stopped(Exception):
    """The job is no longer this worker's to finish (cancelled, or failed as stale meanwhile)."""


class _UploadUnreadable(Exception):
    """The worker cannot read the job's upload; str() is the job's error."""


# What a store key may hold of the uploader's file name (store._KEY's characters); a run of
# others is one match (RE2's Python binding costs microseconds a match), each made a `_`.
_UNSAFE = patterns.compile(r"[^A-Za-z0-9._-]+")


def _stored_name(name: str, token: str) -> str:
    """The upload's file name in the store: the uploader's, made safe for a key, after this
    upload's own token, so that two uploads of the same bytes are two artifacts (deleting one
    never drops the other's cached copy on a worker)."""
    safe = _UNSAFE.sub(lambda run: "_" * len(run[0]), name)[-100:].lstrip(".") or "upload.jsonl"
    return f"{token}-{safe}"


def _publish(upload: IO[bytes], *, kind: str, name: str, limit: int) -> tuple[str, int]:
    """Spool the upload on this host, check it, publish it; (its reference, its size).

    Nothing is published for a refused upload, and the spooled file is removed either way.
    """
    token = uuid.uuid4().hex
    stored = _stored_name(name, token)
    with contextlib.ExitStack() as stack:
        try:
            path, size = stack.enter_context(store.spooled(upload, name=stored, limit=limit))
        except TooLarge:
            raise UploadTooLarge(
                f"the file is larger than the upload limit ({limit:,} bytes)"
            ) from None
        check_upload(path=path, kind=kind, name=name)
        try:
            ref = store.publish_file(source=path, key=store.check_key(f"uploads/{stored}"))
        except Unavailable as exc:
            # Same kind (a 503), said for the uploader: nothing was kept and no job made.
            raise type(exc)(f"{name} was not accepted, no import job was made: {exc}") from None
    return ref, size


def _remove_upload(upload: str) -> None:
    """Remove a job's upload: a reference from the store (and this host's cache); a row made
    before the store holds an absolute path, whose file is removed where it is on this host.
    A store that fails here is logged, not raised: the job has already ended."""
    if not upload:
        return
    try:
        if store.is_reference(upload):
            store.delete(upload)
        elif Path(upload).is_absolute():
            Path(upload).unlink(missing_ok=True)
    except (Unavailable, OSError) as exc:
        logger.warning("the import upload %s was not removed: %s", store.describe(upload), exc)


def check_upload(*, path: Path, kind: str, name: str) -> int:
    """Refuse what can be refused without the database: encoding, strict JSON, each line's
    fields and their column limits, the PRM800K schema (a registered kind: its own check)."""
    if kind in FILE_CHECKS:
        try:
            lines = FILE_CHECKS[kind](path=path, name=name)
        except ImportFailed as exc:
            raise UploadRefused(str(exc)) from None
        if lines == 0:
            raise UploadRefused(f"{name}: the file has no rows")
        return lines
    lines = 0
    check_line = LINE_CHECKS[kind]
    try:
        for number, obj in read_jsonl(path=path, name=name, progress=False):
            lines += 1
            try:
                check_line(obj)
            except ValueError as exc:
                raise ImportFailed(f"{name}:{number}: {exc}") from None
    except ImportFailed as exc:
        raise UploadRefused(str(exc)) from None
    if lines == 0:
        raise UploadRefused(f"{name}: the file has no JSON lines")
    return lines


def create_import_job(
    *,
    user,
    kind: str,
    upload: IO[bytes],
    file_name: str,
    origin: str = jobs.JobOrigin.PAGE,
) -> ImportJob:
    """Check an upload and publish it to the artifact store, then queue its import; a refused
    upload leaves nothing, and a store that cannot be reached (`Unavailable`) leaves no job."""
    fail_stale_import_jobs(older_than=jobs.stale_cutoff())
    jobs.refuse_past_live_limit(model=ImportJob, user=user)
    if kind not in IMPORTERS:
        raise UploadRefused(f"unknown kind {kind!r}; one of {', '.join(IMPORTERS)}")
    name = Path(file_name or "upload.jsonl").name
    try:
        check_column(ImportJob, "file_name", name, label="file name")
    except ValueError as exc:
        raise UploadRefused(str(exc)) from None
    # A store that fails (`Unavailable`, a 503) leaves no job: nothing was published.
    ref, size = _publish(upload, kind=kind, name=name, limit=settings.IMPORT_MAX_UPLOAD_BYTES)
    try:
        job = ImportJob.objects.create(
            kind=kind,
            file_name=name,
            upload=ref,
            size=size,
            requested_by=user,
            origin=origin,
        )
    except BaseException:
        _remove_upload(ref)
        raise
    transaction.on_commit(lambda: _enqueue(job.pk))
    return job


def _enqueue(job_id: int) -> None:
    try:
        # By name: labeling.tasks imports this module.
        queue_task("labeling.tasks.run_import_job_task", (job_id,))
    except (BrokerError, OSError) as exc:
        # Without a broker the upload cannot run later either: say so instead of waiting.
        jobs.finish(
            model=ImportJob,
            pk=job_id,
            status=Status.FAILED,
            error=f"the task queue is unreachable, nothing was imported ({exc})",
            only_from=(Status.QUEUED,),
        )
        _discard(job_id)


def _discard(job_id: int) -> None:
    for upload in ImportJob.objects.filter(pk=job_id).values_list("upload", flat=True):
        _remove_upload(upload)


def cancel_import_job(*, job_id: int) -> ImportJob:
    """A queued import is cancelled at once (its file is discarded); a running one stops before
    its rows are committed, so nothing of it is imported."""
    job = jobs.request_cancel(model=ImportJob, pk=job_id, stops="before anything is committed")
    if job.status == Status.CANCELLED:
        _discard(job_id)
    return job


def fail_stale_import_jobs(*, older_than: datetime | None, worker_hostname: str = "") -> list[int]:
    """Fail running imports whose worker is gone (`jobs.recover_stale`'s rule) and discard their
    files: a dead worker's transaction was rolled back, and a job never runs twice."""
    failed = jobs.recover_stale(
        model=ImportJob,
        older_than=older_than,
        worker_hostname=worker_hostname,
        advice="nothing was imported; upload the file again.",
    )
    for job_id in failed:
        _discard(job_id)
    return failed


def run_import_job(*, job_id: int, worker_hostname: str = "") -> ImportJob:
    """Import the job's file. Runs once: a job that already started is left as it is."""
    if not jobs.start(model=ImportJob, pk=job_id, worker_hostname=worker_hostname):
        return ImportJob.objects.get(pk=job_id)
    job = ImportJob.objects.get(pk=job_id)
    importer = IMPORTERS[job.kind]
    status, error = Status.FAILED, ""
    try:
        with jobs.heartbeat(model=ImportJob, pk=job_id):
            # Read from the store (through this host's cache) before the transaction opens.
            path = _local_upload(job)
            with transaction.atomic():
                result = importer(path=path, name=job.file_name)
                # The rows and the job's success commit together, unless a cancel came first.
                if not jobs.finish(
                    model=ImportJob,
                    pk=job_id,
                    status=Status.SUCCEEDED,
                    claim={"cancel_requested": False},
                    values={"result": asdict(result)},
                ):
                    raise _Stopped()
    except _Stopped:
        status, error = Status.CANCELLED, ""
    except ImportFailed as exc:
        error = str(exc)
    except _UploadUnreadable as exc:
        error = str(exc)
    except Exception as exc:  # the job must end in a state a user can read
        logger.exception("import job %s failed", job_id)
        error = f"{job.file_name}: {exc}"
    else:
        status = Status.SUCCEEDED
    if status != Status.SUCCEEDED:
        jobs.finish(model=ImportJob, pk=job_id, status=status, error=error)
    # A job runs once, so its upload is never needed again; a failed one is uploaded anew.
    _remove_upload(job.upload)
    return ImportJob.objects.get(pk=job_id)


def _local_upload(job: ImportJob) -> Path:
    try:
        return store.local_file(job.upload)
    except Unavailable as exc:
        raise _UploadUnreadable(
            f"{job.file_name}: the worker cannot read the upload {store.describe(job.upload)}: "
            f"{exc} Nothing was imported; upload the file again."
        ) from None
