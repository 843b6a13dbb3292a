"""One job shape (`core.jobs`), proved through every kind of job: training runs, sampling
runs, scoring chunks and import jobs. A dead worker's job is recovered by one rule, a cancel
means the same for each, a running job's heartbeat beats and hears a cancel, the API's old
names still answer, and the rows stored before jobs were one shape keep their meaning."""

import os
import subprocess
import threading
import time
from datetime import timedelta
from pathlib import Path
from unittest import mock

import pytest
from celery.signals import worker_ready
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

import labeling.tasks  # noqa: F401 (connects the import jobs' worker_ready handler)
import trainer.tasks  # noqa: F401 (connects the runs' and chunks' worker_ready handlers)
from core import jobs, store
from labeling.models import ImportJob, Problem
from labeling.services import import_jobs
from labeling.tests.interleave import require_postgresql, run_in_threads
from trainer.models import (
    Evaluation,
    EvaluationSet,
    JudgeRun,
    ModelVersion,
    SamplingRun,
    ScoringChunk,
    TrainingRun,
)
from trainer.sampling import services as sampling
from trainer.scoring import chunks as scoring
from trainer.training import runs

KINDS = ["training run", "sampling run", "scoring chunk", "import job"]


def make_job(kind: str, tmp_path: Path, **fields):
    if kind == "training run":
        return TrainingRun.objects.create(**fields)
    if kind == "sampling run":
        return SamplingRun.objects.create(
            purpose="solutions", generator={"model": "m"}, sampling={}, samples=1, **fields
        )
    if kind == "scoring chunk":
        version = ModelVersion.objects.create(name="v", checkpoint="/m/v")
        return ScoringChunk.objects.create(
            model_version=version, first_solution_id=1, last_solution_id=4, solutions=4, **fields
        )
    if kind == "judge run":
        return JudgeRun.objects.create(
            generator={"model": "m"}, sampling={}, prompt_version="judge-v1", format="per_step"
        )
    if kind == "evaluation":
        version = ModelVersion.objects.create(name="v", checkpoint="/m/v")
        chosen = EvaluationSet.objects.create(name="ProcessBench MATH", kind="processbench")
        return Evaluation.objects.create(model_version=version, evaluation_set=chosen, **fields)
    upload = tmp_path / f"upload-{ImportJob.objects.count()}.jsonl"
    upload.write_text('{"problem": "What is 1 + 1?", "answer": "2"}\n')
    ref = store.publish_file(source=upload, key=store.unique_key("uploads", upload.name))
    return ImportJob.objects.create(
        kind="problems", file_name="upload.jsonl", upload=ref, size=1, **fields
    )


def cancel(job):
    """Each kind's own cancel; a chunk, which no page cancels, through the shared one."""
    if isinstance(job, TrainingRun):
        return runs.cancel_training_run(run_id=job.pk)
    if isinstance(job, SamplingRun):
        return sampling.cancel_sampling_run(run_id=job.pk)
    if isinstance(job, ImportJob):
        return import_jobs.cancel_import_job(job_id=job.pk)
    return jobs.request_cancel(model=ScoringChunk, pk=job.pk, stops="before it writes")


# A dead worker's job: failed, except a chunk, which any worker may score again.
RECOVERED = {
    "training run": "failed",
    "sampling run": "failed",
    "scoring chunk": "queued",
    "import job": "failed",
}


def recover_stale(job, *, older_than):
    """What the periodic task and each kind's requests call to find silent jobs."""
    if isinstance(job, TrainingRun):
        return runs.mark_stale_runs_failed(older_than=older_than)
    if isinstance(job, SamplingRun):
        return sampling.mark_stale_sampling_runs_failed(older_than=older_than)
    if isinstance(job, ImportJob):
        return import_jobs.fail_stale_import_jobs(older_than=older_than)
    return scoring.release_chunks(stale_before=older_than)


def dead_pid() -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


class Consumer:
    """What Celery passes as the sender of worker_ready: it carries the worker's name."""

    def __init__(self, hostname: str) -> None:
        self.hostname = hostname


@pytest.mark.django_db
@pytest.mark.parametrize("kind", KINDS)
def test_a_job_of_each_kind_whose_heartbeat_went_stale_is_recovered_by_one_rule(kind, tmp_path):
    now = timezone.now()
    silent = make_job(
        kind,
        tmp_path,
        status="running",
        started_at=now - timedelta(minutes=20),
        heartbeat_at=now - timedelta(minutes=10),
        worker_hostname="celery@gpu1",
        worker_pid=os.getpid(),
    )
    assert recover_stale(silent, older_than=now - timedelta(minutes=15)) == []

    assert recover_stale(silent, older_than=now - timedelta(minutes=5)) == [silent.pk]

    silent.refresh_from_db()
    assert silent.status == RECOVERED[kind]
    assert "The worker celery@gpu1 stopped during the run" in silent.error
    assert "celery@gpu1 stopped during the run" in silent.log_tail
    assert (silent.finished_at is not None) == (silent.status == "failed")
    if kind == "import job":  # never run again: its upload is gone
        assert not store.exists(silent.upload)


@pytest.mark.django_db
@pytest.mark.parametrize("kind", KINDS)
def test_a_restarted_worker_recovers_the_job_of_each_kind_its_killed_predecessor_held(
    kind, tmp_path
):
    now = timezone.now()
    # A chunk records no pid (any process of the worker may hold one): its name is enough.
    pid = None if kind == "scoring chunk" else os.getpid()
    held = make_job(
        kind,
        tmp_path,
        status="running",
        started_at=now,
        heartbeat_at=now,
        worker_hostname="celery@gpu2",
        worker_pid=pid,
    )
    with (
        mock.patch("trainer.tasks.score_chunk_task.apply_async") as queue_chunk,
        mock.patch("trainer.tasks.score_task.apply_async"),
    ):
        # Another worker starting says nothing about a job on gpu2, whose heartbeat is fresh.
        worker_ready.send(sender=Consumer("celery@gpu1"))
        held.refresh_from_db()
        assert held.status == "running"
        if pid is not None:
            # Same name, but the process that holds it is alive: still left alone.
            worker_ready.send(sender=Consumer("celery@gpu2"))
            held.refresh_from_db()
            assert held.status == "running"
            type(held).objects.filter(pk=held.pk).update(worker_pid=dead_pid())

        worker_ready.send(sender=Consumer("celery@gpu2"))

    held.refresh_from_db()
    assert held.status == RECOVERED[kind]
    assert "celery@gpu2 stopped during the run" in held.error
    if kind == "scoring chunk":
        queue_chunk.assert_called_once_with((held.pk,), task_id=None)


@pytest.mark.django_db
@pytest.mark.parametrize("kind", KINDS)
def test_cancel_means_the_same_for_each_kind(kind, tmp_path):
    queued = make_job(kind, tmp_path)
    cancelled = cancel(queued)
    assert (cancelled.status, cancelled.cancel_requested) == ("cancelled", True)
    assert cancelled.finished_at is not None
    assert "Cancelled before it started." in cancelled.log_tail
    # A finished job says so, as a conflict (the API's 409).
    with pytest.raises(jobs.JobRefused, match=f"{queued.pk} has already cancelled"):
        cancel(queued)

    running = make_job(kind, tmp_path, status="running", started_at=timezone.now())
    asked = cancel(running)
    assert (asked.status, asked.cancel_requested, asked.finished_at) == ("running", True, None)
    assert "Cancellation requested; stopping" in asked.log_tail
    if kind == "import job":
        assert not store.exists(queued.upload)  # a cancelled upload is never imported


@pytest.mark.django_db
def test_a_running_import_cancelled_before_its_rows_commit_imports_nothing(tmp_path):
    job = make_job("import job", tmp_path)
    real = import_jobs.IMPORTERS[ImportJob.Kind.PROBLEMS]

    def import_then_cancel(**kwargs):
        result = real(**kwargs)
        # The cancel arrives after the rows were written, before they are committed.
        ImportJob.objects.filter(pk=job.pk).update(cancel_requested=True)
        return result

    with mock.patch.dict(import_jobs.IMPORTERS, {ImportJob.Kind.PROBLEMS: import_then_cancel}):
        finished = import_jobs.run_import_job(job_id=job.pk, worker_hostname="celery@w")

    assert finished.status == "cancelled" and finished.result == {}
    assert finished.worker_hostname == "celery@w"
    assert not Problem.objects.exists()
    assert not store.exists(job.upload)


@pytest.mark.django_db(transaction=True)
def test_a_cancel_while_an_import_writes_its_rows_wins_and_leaves_nothing(tmp_path):
    """The admin cancels while the worker's transaction holds the imported rows: the cancel is
    answered at once (the job's row is not locked), and the import commits nothing."""
    require_postgresql()
    job = make_job("import job", tmp_path)
    real = import_jobs.IMPORTERS[ImportJob.Kind.PROBLEMS]
    imported, answered = threading.Event(), threading.Event()

    def import_then_wait(**kwargs):
        result = real(**kwargs)
        imported.set()
        assert answered.wait(timeout=60), "the cancel was never answered"
        return result

    def work():
        return import_jobs.run_import_job(job_id=job.pk)

    def cancel_it():
        assert imported.wait(timeout=60), "the import never wrote its rows"
        try:
            return import_jobs.cancel_import_job(job_id=job.pk)
        finally:
            answered.set()

    with mock.patch.dict(import_jobs.IMPORTERS, {ImportJob.Kind.PROBLEMS: import_then_wait}):
        finished, answer = run_in_threads(work, cancel_it, timeout=120)

    assert (answer.status, answer.cancel_requested) == ("running", True)
    assert finished.status == "cancelled" and finished.cancel_requested
    assert not Problem.objects.exists()
    assert not store.exists(job.upload)


@pytest.mark.django_db
def test_a_running_chunk_cancelled_writes_nothing_and_the_next_planning_reopens_it(
    make_solution,
):
    problem = Problem.objects.create(text="What is 1 + 1?", answer="2")
    solutions = [make_solution(problem, n) for n in range(3)]
    version = ModelVersion.objects.create(name="v", checkpoint="/m/v")
    assert scoring.plan_scoring(model_version=version) == 1
    chunk = scoring.claim_chunk(model_version_id=version.pk, worker_hostname="celery@gpu1")
    jobs.request_cancel(model=ScoringChunk, pk=chunk.pk, stops="before it writes")

    with mock.patch("trainer.scoring.store.scored_updates", return_value=solutions):
        assert scoring.score_chunk(chunk=chunk, prm=None) == 0

    chunk.refresh_from_db()
    assert (chunk.status, chunk.scored) == ("cancelled", 0)
    assert scoring.unscored(version).count() == 3
    assert scoring.plan_scoring(model_version=version) == 1
    chunk.refresh_from_db()
    assert (chunk.status, chunk.cancel_requested) == ("queued", False)


@pytest.mark.django_db(transaction=True)
def test_a_running_jobs_heartbeat_beats_and_hears_a_cancel(settings, tmp_path):
    settings.PRM_HEARTBEAT_SECONDS = 0.05
    long_ago = timezone.now() - timedelta(hours=1)
    job = make_job("import job", tmp_path, status="running", heartbeat_at=long_ago)

    with jobs.heartbeat(model=ImportJob, pk=job.pk) as beat:
        deadline = time.monotonic() + 10
        while ImportJob.objects.get(pk=job.pk).heartbeat_at == long_ago:
            assert time.monotonic() < deadline, "no heartbeat was written"
            time.sleep(0.05)
        assert not beat.cancelled.is_set()
        import_jobs.cancel_import_job(job_id=job.pk)
        assert beat.cancelled.wait(timeout=10), "the heartbeat did not hear the cancel"

    assert not [t for t in threading.enumerate() if t.name.endswith(f"-{job.pk}-heartbeat")]


@pytest.mark.django_db
def test_the_api_answers_the_requester_by_its_new_and_its_old_name(client, make_user):
    rita = make_user("rita", "researcher")
    run = TrainingRun.objects.create(requested_by=rita)
    client.force_login(rita)

    shown = client.get(f"/api/training-runs/{run.pk}/").json()
    listed = client.get("/api/training-runs/").json()
    listed = listed["results"] if isinstance(listed, dict) else listed

    assert shown["requested_by"] == shown["triggered_by"] == "rita"
    assert listed[0]["requested_by"] == listed[0]["triggered_by"] == "rita"


@pytest.mark.django_db
def test_an_admin_cancels_an_import_through_the_api_like_any_job(client, make_user, tmp_path):
    admin = make_user("ada", "admin")
    job = make_job("import job", tmp_path, requested_by=admin)
    client.force_login(admin)

    answer = client.post(f"/api/imports/{job.pk}/cancel/")
    assert answer.status_code == 200
    assert answer.json()["status"] == "cancelled" and answer.json()["requested_by"] == "ada"
    again = client.post(f"/api/imports/{job.pk}/cancel/")
    assert again.status_code == 409 and "has already cancelled" in again.json()["detail"]


@pytest.mark.django_db(transaction=True)
def test_chunks_stored_as_pending_and_done_are_queued_and_succeeded_after_the_migration():
    before = [("trainer", "0009_scoring_chunks")]
    after = [("trainer", "0010_jobs")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old = executor.loader.project_state(before).apps
    version = old.get_model("trainer", "ModelVersion").objects.create(checkpoint_path="/m")
    chunks = old.get_model("trainer", "ScoringChunk").objects
    claimed = timezone.now()
    for first, status in ((1, "pending"), (10, "running"), (20, "done")):
        chunks.create(
            model_version=version,
            first_solution_id=first,
            last_solution_id=first + 5,
            status=status,
            solutions=6,
            claimed_at=claimed if status != "pending" else None,
        )

    executor = MigrationExecutor(connection)
    executor.migrate(after)
    new = executor.loader.project_state(after).apps
    rows = new.get_model("trainer", "ScoringChunk").objects.order_by("first_solution_id")
    assert [(c.status, c.started_at is not None) for c in rows] == [
        ("queued", False),
        ("running", True),
        ("succeeded", True),
    ]
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db
def test_a_run_says_who_asked_for_it_and_from_where(client, researcher, settings):
    from django.core.management import CommandError, call_command
    from django.urls import reverse

    # Started from the command line (no labels: it fails at once, but it is recorded).
    with pytest.raises(CommandError):
        call_command("train_prm")
    by_command = TrainingRun.objects.get()
    assert (by_command.origin, by_command.requester) == ("command", "a command")
    assert "Queued by a command." in by_command.log_tail
    page = client.get(reverse("training-run-detail", args=[by_command.pk])).content.decode()
    assert "a command" in page and "the schedule" not in page
    assert "a command" in client.get(reverse("training-run-list")).content.decode()
    # Started by the schedule: a finished run with a snapshot and enough new labels after it.
    TrainingRun.objects.all().delete()
    settings.PRM_RETRAIN_MIN_NEW_LABELS = 0
    with mock.patch.object(runs, "_queue"):
        by_schedule = runs.maybe_start_scheduled_training()
    assert by_schedule.requester == "the schedule"
    # A person, from a page or the API.
    by_schedule.origin, by_schedule.requested_by = jobs.JobOrigin.API, researcher
    assert by_schedule.requester == f"{researcher.username} (the API)"


@pytest.mark.django_db
@pytest.mark.parametrize("kind", ["training run", "sampling run", "judge run", "evaluation"])
def test_the_admin_shows_a_job_read_only_and_cancels_it_as_the_pages_do(client, tmp_path, kind):
    from django.contrib.auth.models import User
    from django.urls import reverse

    admin_user = User.objects.create_superuser("root", "root@example.com", "root-pass-123")
    client.force_login(admin_user)
    job = make_job(kind, tmp_path)
    name = type(job)._meta.model_name
    change = client.get(reverse(f"admin:trainer_{name}_change", args=[job.pk]))
    assert change.status_code == 200
    # Every field is read-only: the form offers nothing to save.
    assert 'name="status"' not in change.content.decode()
    assert client.get(reverse(f"admin:trainer_{name}_add")).status_code == 403
    answer = client.post(
        reverse(f"admin:trainer_{name}_changelist"),
        {"action": "cancel_jobs", "_selected_action": [job.pk]},
    )
    assert answer.status_code == 302
    job.refresh_from_db()
    assert job.status == jobs.JobStatus.CANCELLED
