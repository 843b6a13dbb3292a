"""Scoring a pool in chunks that any number of workers score at once.

A scoring with a model version is planned as `ScoringChunk` rows: ranges of solution ids, each
holding up to PRM_SCORE_CHUNK solutions that lack the version's scores. Planning streams the
ids (never a list of the pool) under a lock on the version, so ranges never overlap, and it is
idempotent: ids already inside a chunk that is not done are left to it, and a done chunk whose
range lost the version's scores (the version was activated again) is reopened.

A worker claims a chunk by locking its row (`SELECT ... FOR UPDATE SKIP LOCKED` on PostgreSQL:
workers never wait on each other), scores the solutions of the range that still lack the
version's scores, and commits those scores with the chunk's done mark in one transaction. A
chunk is a job (`core.jobs`): queued, running, then succeeded (done). A claim is numbered
(`attempts`): a chunk whose worker stopped beating (PRM_RUN_STALE_SECONDS) is claimed again, and
the late worker, finding its claim is no longer the current one, writes nothing. A chunk
cancelled, or failed, is scored again by the next planning. The scoring's progress is the sum
of its chunks.

Three callers: the `gpu`-queue task per chunk (`run_chunk`), and in-process scoring
(`score_in_process`) for selection and `pipeline.score_with_model_version`, which claims the
queued chunks itself, waits for those other workers hold, and takes stale ones over.
"""

import logging
import os
import socket
import time
from datetime import datetime
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q, QuerySet

from core import jobs
from labeling.models import Solution
from trainer.scoring.models import ScoringChunk
from trainer.training import checkpoints
from trainer.training.models import ModelVersion

if TYPE_CHECKING:
    from trainer.training.ml.prm import PRM

logger = logging.getLogger(__name__)

Status = ScoringChunk.Status
PLAN_READ_CHUNK = 10_000
WAIT_SECONDS = 1.0


def unscored(model_version: ModelVersion | int) -> QuerySet[Solution]:
    """Every solution that does not carry this version's scores."""
    return Solution.objects.exclude(prm_model_version=model_version)


# --- planning ---------------------------------------------------------------------------------


def plan_scoring(*, model_version: ModelVersion, chunk_size: int | None = None) -> int:
    """Plan chunks for every solution lacking the version's scores; returns how many chunks
    were created or reopened (0: everything is scored or already in a chunk). A finished chunk
    (done, cancelled or failed) whose range lacks the version's scores is reopened."""
    size = chunk_size or settings.PRM_SCORE_CHUNK
    with transaction.atomic():
        # Two planners of one version (a scoring task and a selection) would cut overlapping
        # ranges; the version's row serializes them.
        ModelVersion.objects.select_for_update().filter(pk=model_version.pk).exists()
        existing = list(
            ScoringChunk.objects.filter(model_version=model_version)
            .order_by("first_solution_id")
            .values_list("pk", "first_solution_id", "last_solution_id", "status")
        )
        new: list[ScoringChunk] = []
        reopen: dict[int, int] = {}
        current: list[int] = []  # first id, last id, count of the range being cut
        boundary = 0  # the existing chunk the current range must stop before

        def close() -> None:
            if current:
                first, last, count = current
                new.append(
                    ScoringChunk(
                        model_version=model_version,
                        first_solution_id=first,
                        last_solution_id=last,
                        solutions=count,
                    )
                )
                current.clear()

        i = 0
        ids = (
            unscored(model_version)
            .order_by("pk")
            .values_list("pk", flat=True)
            .iterator(chunk_size=PLAN_READ_CHUNK)
        )
        for pk in ids:
            while i < len(existing) and existing[i][2] < pk:
                i += 1
            if i < len(existing) and existing[i][1] <= pk:
                close()
                chunk_pk, _, _, status = existing[i]
                if status in ScoringChunk.FINISHED:
                    reopen[chunk_pk] = reopen.get(chunk_pk, 0) + 1
                continue
            if current and (current[2] >= size or i != boundary):
                # Full, or an existing chunk lies between its first id and this one.
                close()
            if current:
                current[1], current[2] = pk, current[2] + 1
            else:
                current.extend([pk, pk, 1])
                boundary = i
        close()
        ScoringChunk.objects.bulk_create(new, batch_size=1000)
        for chunk_pk, count in reopen.items():
            ScoringChunk.objects.filter(pk=chunk_pk).update(
                status=Status.QUEUED,
                solutions=count,
                scored=0,
                finished_at=None,
                cancel_requested=False,
                error="",
            )
    if new or reopen:
        logger.info(
            "Planned the scoring with %s: %s new chunks, %s reopened",
            model_version,
            len(new),
            len(reopen),
        )
    return len(new) + len(reopen)


def chunks_to_do(*, model_version_id: int) -> list[int]:
    """Ids of the version's chunks queued or running, lowest range first."""
    return list(
        ScoringChunk.objects.filter(model_version_id=model_version_id, status__in=ScoringChunk.LIVE)
        .order_by("first_solution_id")
        .values_list("pk", flat=True)
    )


# --- claiming and scoring one chunk -----------------------------------------------------------


def claim_chunk(
    *, model_version_id: int, worker_hostname: str, chunk_id: int | None = None
) -> ScoringChunk | None:
    """Take a queued chunk, or one whose worker stopped beating; None when there is none.

    Given `chunk_id`, only that chunk (None when it is done or another worker holds it).
    """
    with transaction.atomic():
        claimable = (
            ScoringChunk.objects.select_for_update(skip_locked=True)
            .filter(model_version_id=model_version_id)
            .filter(
                Q(status=Status.QUEUED)
                | Q(status=Status.RUNNING, heartbeat_at__lt=jobs.stale_cutoff())
            )
        )
        if chunk_id is not None:
            claimable = claimable.filter(pk=chunk_id)
        chunk = claimable.order_by("first_solution_id").first()
        if chunk is None:
            return None
        if chunk.status == Status.RUNNING:
            logger.warning(
                "Taking over %s from %s (no heartbeat since %s)",
                chunk,
                chunk.worker_hostname,
                chunk.heartbeat_at,
            )
        # No pid: any process of the worker may hold a chunk, and a worker restarting under
        # its name puts all of them back (`release_chunks`).
        jobs.start(
            model=ScoringChunk,
            pk=chunk.pk,
            worker_hostname=worker_hostname,
            record_pid=False,
            only_from=(Status.QUEUED, Status.RUNNING),
            values={"attempts": F("attempts") + 1},
        )
        chunk.refresh_from_db()
    return chunk


def score_chunk(*, chunk: ScoringChunk, prm: "PRM", batch_size: int = 32) -> int:
    """Score a claimed chunk and mark it done in one transaction; returns how many it wrote
    (0 when another worker took the chunk over meanwhile: that worker writes it; 0 when it was
    cancelled meanwhile: it ends cancelled, and the next planning reopens it)."""
    # Imported here to keep torch out of the web process, which never scores.
    from trainer.scoring.store import scored_updates, write_scores

    claim = {"pk": chunk.pk, "status": Status.RUNNING, "attempts": chunk.attempts}
    try:
        with jobs.heartbeat(model=ScoringChunk, pk=chunk.pk, claim={"attempts": chunk.attempts}):
            updates = scored_updates(
                prm=prm,
                solutions=unscored(chunk.model_version_id).filter(
                    pk__gte=chunk.first_solution_id, pk__lte=chunk.last_solution_id
                ),
                model_version_id=chunk.model_version_id,
                batch_size=batch_size,
            )
    except Exception:
        # Queued again, so the page does not show a scoring that stopped as running; the
        # next planning (worker start, periodic task) queues it again.
        ScoringChunk.objects.filter(**claim).update(status=Status.QUEUED)
        raise
    with transaction.atomic():
        current = ScoringChunk.objects.select_for_update().filter(**claim).first()
        if current is None:
            logger.warning("%s was taken over by another worker; not writing it", chunk)
            return 0
        if current.cancel_requested:
            jobs.finish(model=ScoringChunk, pk=chunk.pk, status=Status.CANCELLED)
            return 0
        write_scores(updates)
        jobs.finish(
            model=ScoringChunk,
            pk=chunk.pk,
            status=Status.SUCCEEDED,
            values={"scored": len(updates)},
        )
    return len(updates)


# --- the callers ------------------------------------------------------------------------------

_loaded: dict[str, "PRM"] = {}


def load_prm(model_version: ModelVersion) -> "PRM":
    """The version's model, kept loaded for the worker's next chunk (one model at a time)."""
    from trainer.training.ml.prm import PRM

    reference = model_version.checkpoint
    if reference not in _loaded:
        _loaded.clear()
        _loaded[reference] = PRM.load(checkpoints.local_dir(model_version))
    return _loaded[reference]


def this_worker() -> str:
    """The Celery worker's name inside a task, else host and process."""
    from celery import current_task

    hostname = getattr(getattr(current_task, "request", None), "hostname", None)
    return hostname or f"{socket.gethostname()}:{os.getpid()}"


def run_chunk(*, chunk_id: int, worker_hostname: str) -> int:
    """The body of the chunk task: claim this chunk and score it, or return 0 when it is done
    or another worker holds it (a duplicate message)."""
    chunk = ScoringChunk.objects.filter(pk=chunk_id).only("model_version_id").first()
    if chunk is None:
        return 0  # its version was deleted
    claimed = claim_chunk(
        model_version_id=chunk.model_version_id, worker_hostname=worker_hostname, chunk_id=chunk_id
    )
    if claimed is None:
        return 0
    version = ModelVersion.objects.get(pk=claimed.model_version_id)
    return score_chunk(chunk=claimed, prm=load_prm(version))


def score_in_process(
    *, model_version: ModelVersion, prm: "PRM | None" = None, worker_hostname: str = ""
) -> int:
    """Plan, then score the version's chunks here until every one is done; returns how many
    solutions this process wrote. Chunks other workers hold are waited for (and taken over
    when their worker stops beating), so nothing is scored twice."""
    plan_scoring(model_version=model_version)
    name = worker_hostname or this_worker()
    written = 0
    while True:
        chunk = claim_chunk(model_version_id=model_version.pk, worker_hostname=name)
        if chunk is not None:
            prm = prm or load_prm(model_version)
            written += score_chunk(chunk=chunk, prm=prm)
            continue
        if not ScoringChunk.objects.filter(
            model_version=model_version, status=Status.RUNNING
        ).exists():
            return written
        time.sleep(WAIT_SECONDS)


def release_chunks(*, worker_hostname: str = "", stale_before: datetime | None = None) -> list[int]:
    """Queue again the running chunks whose worker is gone (`jobs.recover_stale`'s rule: a
    worker that restarted under the same name, or a heartbeat older than `stale_before`);
    returns their ids."""
    return jobs.recover_stale(
        model=ScoringChunk,
        older_than=stale_before,
        worker_hostname=worker_hostname,
        to_status=Status.QUEUED,
        advice="queued again for any worker to score.",
    )
