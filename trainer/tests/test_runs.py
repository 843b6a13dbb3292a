"""Training runs as records: lifecycle, failure, cancellation, dead workers, promotion, schedule.

Runs here call the service that is the body of the Celery task, in-process, with the real
tiny PRM trainer (one epoch on a few labeled demo problems).
"""

import os
import subprocess
from datetime import timedelta
from io import StringIO
from pathlib import Path
from unittest import mock

import pytest
from django.core.management import CommandError, call_command
from django.db import IntegrityError, transaction
from django.urls import reverse
from django.utils import timezone
from kombu.exceptions import OperationalError

from labeling.models import Solution
from labeling.services.labelers import get_or_create_labeler
from trainer import pipeline
from trainer.models import ModelVersion, TrainingRun
from trainer.tests.labels import label_demo_solutions, submit_gold_sessions
from trainer.training import checkpoints, model_versions, runs
from trainer.training.params import InvalidParams, TrainingParams

pytestmark = pytest.mark.django_db

TINY = {"epochs": 1, "batch_size": 8, "eval_fraction": 0.3}


@pytest.fixture(autouse=True)
def model_dir(settings, tmp_path) -> Path:
    settings.PRM_MODEL_DIR = tmp_path / "models"
    # The heartbeat thread uses its own connection, which cannot see rows of a test's open
    # transaction; the recorder's own throttled writes carry the heartbeat here.
    settings.PRM_HEARTBEAT_SECONDS = 3600
    settings.PRM_AUTO_PROMOTE = True
    # A metric with no trivial baseline: one epoch on four problems does not beat random
    # scoring (held-out step AUROC about 0.3), and a version at or below it is never promoted
    # (test_evaluation_sets.py); these tests are about the run, not about that floor.
    settings.PRM_PROMOTE_METRIC = "step_accuracy"
    return settings.PRM_MODEL_DIR


@pytest.fixture
def labeled():
    return label_demo_solutions(problems=4)


def run_once(*, user, params=TINY) -> TrainingRun:
    run = runs.request_training_run(user=user, params=params)
    assert run.status == TrainingRun.Status.QUEUED
    return runs.execute_training_run(run_id=run.pk, worker_hostname="celery@test")


def test_a_run_goes_from_queued_to_succeeded_with_an_active_model_version(
    researcher, labeled, model_dir
):
    run = run_once(user=researcher)

    assert run.status == TrainingRun.Status.SUCCEEDED, run.error
    assert run.started_at <= run.finished_at
    assert run.requested_by == researcher
    assert run.worker_hostname == "celery@test"
    # The data snapshot: every labeled step prefix of the 4 problems, and its hash.
    assert run.dataset_size >= labeled
    assert len(run.dataset_hash) == 64
    assert run.snapshot_at is not None
    # Progress and metrics were streamed in.
    assert run.total_steps > 0 and run.step == run.total_steps
    assert len(run.metrics) == 1
    assert "step_accuracy" in run.metrics[-1]
    assert "Checkpoint written" in run.log_tail

    version = run.model_version
    # Published to the store under a key, never a host's path; it loads from there.
    assert version.checkpoint.startswith(f"checkpoints/run-{run.pk}-")
    assert (checkpoints.local_dir(version) / "prm.json").is_file()
    assert version.metrics["step_accuracy"] == run.metrics[-1]["step_accuracy"]
    # Every demo problem has steps rated -1 and +1, so the held-out AUROC exists, and the
    # first model with a computable metric becomes the active one.
    assert version.metrics["step_auroc"] is not None
    assert version.is_active and version.promoted_at is not None


def test_training_without_labels_fails_with_the_reason_and_no_model(researcher, model_dir):
    run = run_once(user=researcher)

    assert run.status == TrainingRun.Status.FAILED
    assert "No labeled examples" in run.error
    assert run.finished_at is not None
    assert not ModelVersion.objects.exists()
    assert not (model_dir / f"run-{run.pk}").exists()


def test_a_run_over_one_problem_fails_asking_for_a_held_out_problem(researcher, model_dir):
    label_demo_solutions(problems=1)
    run = run_once(user=researcher)

    assert run.status == TrainingRun.Status.FAILED
    assert "at least two problems" in run.error
    assert not ModelVersion.objects.exists()


def test_a_queued_run_cancelled_never_starts(researcher, labeled):
    run = runs.request_training_run(user=researcher, params=TINY)
    cancelled = runs.cancel_training_run(run_id=run.pk)
    assert cancelled.status == TrainingRun.Status.CANCELLED

    # The task message still arrives at a worker: it must not train.
    after = runs.execute_training_run(run_id=run.pk)
    assert after.status == TrainingRun.Status.CANCELLED
    assert after.started_at is None
    assert not ModelVersion.objects.exists()
    with pytest.raises(runs.TrainingRefused, match="already cancelled"):
        runs.cancel_training_run(run_id=run.pk)


def test_a_running_run_cancelled_stops_at_a_step_boundary_without_a_model(
    researcher, labeled, model_dir
):
    run = runs.request_training_run(user=researcher, params={**TINY, "epochs": 50})
    # The researcher presses Cancel just as the worker picks the run up.
    real_execute_update = runs.RunRecorder.flush

    def flush_then_cancel(recorder):
        real_execute_update(recorder)
        TrainingRun.objects.filter(pk=run.pk, status="running").update(cancel_requested=True)

    with mock.patch.object(runs.RunRecorder, "flush", flush_then_cancel):
        run = runs.execute_training_run(run_id=run.pk)

    assert run.status == TrainingRun.Status.CANCELLED
    assert run.step < run.total_steps or run.total_steps == 0
    assert not ModelVersion.objects.exists()
    assert not (model_dir / f"run-{run.pk}").exists()


def test_only_one_run_is_live_at_a_time(researcher):
    first = runs.request_training_run(user=researcher, params=TINY)
    with pytest.raises(runs.TrainingRefused, match=f"run {first.pk} is still queued"):
        runs.request_training_run(user=researcher, params=TINY)
    # The database holds the line even for code that skips the service.
    with pytest.raises(IntegrityError), transaction.atomic():
        TrainingRun.objects.create(status=TrainingRun.Status.RUNNING)
    runs.cancel_training_run(run_id=first.pk)
    assert runs.request_training_run(user=researcher, params=TINY).is_live


def test_bad_parameters_are_refused_by_name(researcher):
    with pytest.raises(InvalidParams, match="Unknown training parameter"):
        runs.request_training_run(user=researcher, params={"epochz": 3})
    with pytest.raises(InvalidParams, match="epochs must be at least 1"):
        runs.request_training_run(user=researcher, params={"epochs": 0})
    with pytest.raises(InvalidParams, match="generation_min is above"):
        runs.request_training_run(
            user=researcher, params={"generation_min": 3, "generation_max": 1}
        )
    assert not TrainingRun.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_broker_that_is_down_fails_the_run_with_a_clear_message(researcher):
    # Outside any transaction, as in a request: the run is committed, then enqueued at once.
    down = OperationalError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")
    with (
        mock.patch("trainer.tasks.train_task.apply_async", side_effect=down),
        pytest.raises(pipeline.BrokerUnavailable, match="broker is unreachable"),
    ):
        runs.request_training_run(user=researcher, params=TINY)

    run = TrainingRun.objects.get()
    assert run.status == TrainingRun.Status.FAILED
    assert "Connection refused" in run.error
    # A failed enqueue does not block the next request.
    with mock.patch("trainer.tasks.train_task.apply_async") as apply_async:
        again = runs.request_training_run(user=researcher, params=TINY)
    assert again.status == TrainingRun.Status.QUEUED
    apply_async.assert_called_once_with((again.pk,), task_id=again.celery_task_id)


def running_run(**fields) -> TrainingRun:
    now = timezone.now()
    return TrainingRun.objects.create(
        status=TrainingRun.Status.RUNNING, started_at=now, heartbeat_at=now, **fields
    )


def dead_pid() -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def test_a_run_whose_worker_stopped_beating_is_marked_failed():
    now = timezone.now()
    silent = running_run(worker_hostname="celery@gpu1")
    TrainingRun.objects.filter(pk=silent.pk).update(heartbeat_at=now - timedelta(minutes=10))
    failed = runs.mark_stale_runs_failed(older_than=now - timedelta(minutes=5))

    silent.refresh_from_db()
    assert failed == [silent.pk]
    assert silent.status == TrainingRun.Status.FAILED
    assert "celery@gpu1 stopped during the run" in silent.error
    assert silent.finished_at is not None


def test_a_beating_run_is_left_alone_unless_its_restarted_worker_lost_it():
    now = timezone.now()
    beating = running_run(worker_hostname="celery@gpu1", worker_pid=os.getpid())
    assert runs.mark_stale_runs_failed(older_than=now - timedelta(minutes=5)) == []
    # Same worker name, but the process that ran it is alive: still left alone.
    assert (
        runs.mark_stale_runs_failed(
            older_than=now - timedelta(minutes=5), worker_hostname="celery@gpu1"
        )
        == []
    )
    # The worker was killed and restarted: its old process is gone, so the run is too.
    TrainingRun.objects.filter(pk=beating.pk).update(worker_pid=dead_pid())
    assert runs.mark_stale_runs_failed(
        older_than=now - timedelta(minutes=5), worker_hostname="celery@gpu1"
    ) == [beating.pk]


def test_a_dead_run_does_not_block_the_next_request(researcher, settings):
    settings.PRM_RUN_STALE_SECONDS = 60
    dead = running_run()
    TrainingRun.objects.filter(pk=dead.pk).update(
        heartbeat_at=timezone.now() - timedelta(minutes=5)
    )
    run = runs.request_training_run(user=researcher, params=TINY)
    dead.refresh_from_db()
    assert dead.status == TrainingRun.Status.FAILED
    assert run.status == TrainingRun.Status.QUEUED


@pytest.mark.parametrize(
    ("active_auroc", "promoted"), [(-1.0, True), (2.0, False)], ids=["worse", "unbeatable"]
)
def test_a_new_model_is_promoted_only_when_it_beats_the_active_one(
    researcher, labeled, active_auroc, promoted
):
    active = ModelVersion.objects.create(
        name="old", checkpoint="/nowhere", metrics={"step_accuracy": active_auroc}
    )
    model_versions.activate_model_version(model_version_id=active.pk)

    run = run_once(user=researcher)
    assert run.status == TrainingRun.Status.SUCCEEDED, run.error
    # The demo labels give the held-out split steps of both classes: the AUROC exists.
    assert run.model_version.metrics["step_accuracy"] is not None

    active.refresh_from_db()
    run.model_version.refresh_from_db()
    assert run.model_version.is_active is promoted
    assert active.is_active is not promoted
    assert ("not promoted" in run.log_tail) is not promoted
    assert ModelVersion.objects.filter(is_active=True).count() == 1


def test_a_new_model_is_not_promoted_when_automatic_promotion_is_off(researcher, labeled, settings):
    settings.PRM_AUTO_PROMOTE = False
    run = run_once(user=researcher)
    assert run.status == TrainingRun.Status.SUCCEEDED, run.error
    assert not run.model_version.is_active
    assert "automatic promotion is off" in run.log_tail


def test_activating_keeps_exactly_one_active_model_version(django_capture_on_commit_callbacks):
    first = ModelVersion.objects.create(name="a", checkpoint="/a")
    second = ModelVersion.objects.create(name="b", checkpoint="/b")
    with (
        mock.patch("trainer.tasks.score_task.apply_async") as rescore,
        django_capture_on_commit_callbacks(execute=True),
    ):
        model_versions.activate_model_version(model_version_id=first.pk)
        model_versions.activate_model_version(model_version_id=second.pk)
        model_versions.activate_model_version(model_version_id=second.pk)  # already active: no-op

    assert list(ModelVersion.objects.filter(is_active=True)) == [second]
    # Each activation rescored every solution with the new active version, once.
    assert [c.args for c in rescore.call_args_list] == [((first.pk,),), ((second.pk,),)]
    with pytest.raises(IntegrityError), transaction.atomic():
        ModelVersion.objects.filter(pk=first.pk).update(is_active=True)


def test_scoring_everything_with_a_superseded_version_is_skipped():
    old = ModelVersion.objects.create(name="old", checkpoint="/nowhere")
    ModelVersion.objects.create(name="new", checkpoint="/new", is_active=True)
    assert pipeline.score_with_model_version(model_version_id=old.pk) == 0


def test_the_schedule_retrains_only_after_enough_new_submitted_sessions(researcher, settings):
    settings.PRM_RETRAIN_MIN_NEW_LABELS = 5
    label_demo_solutions(problems=1)  # 3 sessions
    assert runs.maybe_start_scheduled_training() is None

    labeler = get_or_create_labeler(user=researcher)
    more = Solution.objects.filter(problem_id__in=Solution.objects.values("problem_id")[3:4])
    submit_gold_sessions(labeler=labeler, solutions=more)  # 3 more: 6 >= 5
    run = runs.maybe_start_scheduled_training()
    assert run is not None and run.requested_by is None and run.status == "queued"
    # Not while that run is live.
    assert runs.maybe_start_scheduled_training() is None

    # It succeeded with a snapshot taken now: only sessions after it count from here on.
    TrainingRun.objects.filter(pk=run.pk).update(
        status="succeeded", snapshot_at=timezone.now(), params={**run.params, "epochs": 7}
    )
    assert runs.maybe_start_scheduled_training() is None
    later = Solution.objects.exclude(sessions__isnull=False)[:5]
    submit_gold_sessions(
        labeler=labeler, solutions=later, submitted_at=timezone.now() + timedelta(seconds=1)
    )
    rerun = runs.maybe_start_scheduled_training()
    assert rerun is not None
    assert rerun.params["epochs"] == 7  # retrains the way the last good model was trained


def test_the_train_prm_command_records_a_foreground_run(labeled, model_dir):
    out = StringIO()
    call_command(
        "train_prm", "--epochs", "1", "--batch-size", "8", "--eval-fraction", "0.3", stdout=out
    )
    run = TrainingRun.objects.get()
    assert run.status == "succeeded" and run.requested_by is None
    assert run.params["epochs"] == 1 and run.worker_hostname.startswith("manage.py@")
    assert f"training run {run.pk} succeeded" in out.getvalue()
    # It says the promotion decision as recorded, not a guess from is_active (issue 46.5).
    assert run.model_version.promotion and f"({run.model_version.promotion})" in out.getvalue()
    assert (checkpoints.local_dir(run.model_version) / "prm.json").is_file()

    with pytest.raises(CommandError, match="epochs must be at least 1"):
        call_command("train_prm", "--epochs", "0")


@pytest.mark.django_db(transaction=True)
def test_parameters_stored_before_the_renames_are_migrated_and_load():
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    before = [("trainer", "0004_training_run_role_permissions")]
    after = [("trainer", "0006_quality_control_param_names")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old = executor.loader.project_state(before).apps
    old.get_model("trainer", "TrainingRun").objects.create(
        status="succeeded", params={"include_qc": False, "epochs": 2}
    )
    old.get_model("labeling", "Generation").objects.create(number=1, params={"qc_count": 3})
    # The row 0003 created is gone once an earlier transactional test flushed the database.
    interval = old.get_model("django_celery_beat", "IntervalSchedule").objects.create(
        every=6, period="hours"
    )
    old.get_model("django_celery_beat", "PeriodicTask").objects.update_or_create(
        name="Retrain the PRM when enough new labels arrived",
        defaults={"task": "trainer.tasks.periodic_retrain", "interval": interval},
    )

    executor = MigrationExecutor(connection)
    executor.migrate(after)
    new = executor.loader.project_state(after).apps
    run = new.get_model("trainer", "TrainingRun").objects.get()
    assert run.params == {"include_quality_control": False, "epochs": 2}
    assert TrainingParams.from_dict(run.params).include_quality_control is False
    generation = new.get_model("labeling", "Generation").objects.get()
    assert generation.params == {"quality_control_count": 3}
    periodic = new.get_model("django_celery_beat", "PeriodicTask").objects.get()
    assert periodic.task == "trainer.tasks.periodic_retrain_task"
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


# --- warm start -------------------------------------------------------------------------------


def weights(path) -> dict:
    from trainer.training.ml.prm import PRM

    return PRM.load(path).module.state_dict()


def test_a_warm_started_run_trains_on_from_the_active_model_versions_weights(
    researcher, labeled, model_dir
):
    import torch

    first = run_once(user=researcher, params={**TINY, "warm_start": True})
    assert first.status == TrainingRun.Status.SUCCEEDED, first.error
    assert "No active model version to start from" in first.log_tail
    active = first.model_version
    assert active.is_active
    # A learning rate too small to move anything: what the run saves is what it started from.
    still = {**TINY, "learning_rate": 1e-12}

    warm = run_once(user=researcher, params={**still, "warm_start": True})
    fresh = run_once(user=researcher, params=still)

    assert warm.status == fresh.status == TrainingRun.Status.SUCCEEDED, warm.error + fresh.error
    assert f"Starting from the active model version {active}" in warm.log_tail
    started_from = weights(checkpoints.local_dir(active))
    warm_weights = weights(checkpoints.local_dir(warm.model_version))
    for key, value in started_from.items():
        torch.testing.assert_close(warm_weights[key], value, rtol=1e-6, atol=1e-6, msg=key)
    fresh_weights = weights(checkpoints.local_dir(fresh.model_version))
    assert any(not torch.allclose(fresh_weights[k], v) for k, v in started_from.items())


def test_a_warm_start_from_a_version_of_another_base_model_is_refused(
    researcher, labeled, model_dir
):
    import json

    first = run_once(user=researcher)
    meta_path = checkpoints.local_dir(first.model_version) / "prm.json"
    meta = json.loads(meta_path.read_text())
    meta_path.write_text(json.dumps({**meta, "base_model": str(model_dir / "another-model")}))

    run = run_once(user=researcher, params={**TINY, "warm_start": True})

    assert run.status == TrainingRun.Status.FAILED
    assert "warm_start: the active model version" in run.error
    assert "start this run fresh" in run.error
    assert ModelVersion.objects.filter(is_active=True).get() == first.model_version


def test_a_run_cut_by_its_time_limit_says_so_on_its_page_api_and_command(
    labeled, model_dir, monkeypatch, client, make_user
):
    # Each step takes a second of a fake clock against a 12 s limit: the run is cut, and says
    # where, not only "succeeded" (issue 46, item 2).
    from types import SimpleNamespace

    from trainer.training.ml import train as loop

    clock = iter(range(100_000))
    monkeypatch.setattr(loop, "time", SimpleNamespace(monotonic=lambda: float(next(clock))))
    out = StringIO()
    call_command(
        "train_prm", "--epochs", "40", "--batch-size", "2", "--max-minutes", "0.2", stdout=out
    )
    run = TrainingRun.objects.get()
    assert run.status == "succeeded" and run.cut.startswith("cut at step ")
    assert run.cut.endswith(" by the time limit") and f"succeeded, {run.cut}:" in out.getvalue()
    client.force_login(make_user("rita", "researcher"))
    page = client.get(reverse("training-run-detail", args=[run.pk])).content.decode()
    assert f'<strong data-figure="cut">{run.cut}</strong>' in page
    assert client.get(f"/api/training-runs/{run.pk}/").json()["cut"] == run.cut
