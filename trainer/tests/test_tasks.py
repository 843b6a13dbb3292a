"""The Celery side of training: routing, delivery options, worker start-up recovery, and real
workers (Redis broker) that train, score, and get killed mid-run."""

import os
import signal
import subprocess
from datetime import timedelta
from unittest import mock

import pytest
from celery.signals import worker_ready
from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from annotate.celery import app
from conftest import wait_for
from labeling.models import Solution
from trainer import tasks
from trainer.models import ModelVersion, TrainingRun
from trainer.tests.labels import label_demo_solutions
from trainer.training import checkpoints, runs


def test_training_and_scoring_go_to_the_gpu_queue_and_the_schedule_check_does_not():
    def queue(name: str) -> str:
        return app.amqp.router.route({}, name)["queue"].name

    assert queue("trainer.tasks.train_task") == "gpu"
    assert queue("trainer.tasks.score_task") == "gpu"
    assert queue("trainer.tasks.select_generation_task") == "gpu"
    assert queue("trainer.tasks.periodic_retrain_task") == "default"
    assert app.conf.worker_prefetch_multiplier == 1


def test_training_is_acked_late_but_never_requeued_when_its_worker_dies():
    assert tasks.train_task.acks_late is True
    assert not tasks.train_task.reject_on_worker_lost
    assert tasks.train_task.soft_time_limit == settings.PRM_TRAIN_SOFT_TIME_LIMIT
    assert tasks.train_task.time_limit == settings.PRM_TRAIN_TIME_LIMIT
    assert tasks.train_task.soft_time_limit < tasks.train_task.time_limit


class Consumer:
    """What Celery passes as the sender of worker_ready: it carries the worker's name."""

    def __init__(self, hostname: str) -> None:
        self.hostname = hostname


@pytest.mark.django_db
def test_a_restarted_worker_fails_the_run_its_killed_predecessor_left_running():
    orphan = subprocess.Popen(["true"])
    orphan.wait()
    now = timezone.now()
    lost = TrainingRun.objects.create(
        status="running",
        started_at=now,
        heartbeat_at=now,
        worker_hostname="celery@gpu2",
        worker_pid=orphan.pid,
    )

    # Another worker starting says nothing about a run on gpu2, whose heartbeat is fresh.
    worker_ready.send(sender=Consumer(hostname="celery@gpu1"))
    lost.refresh_from_db()
    assert lost.status == "running"

    worker_ready.send(sender=Consumer(hostname="celery@gpu2"))
    lost.refresh_from_db()
    assert lost.status == "failed" and "celery@gpu2 stopped during the run" in lost.error


@pytest.mark.django_db
def test_the_periodic_task_starts_a_run_once_enough_labels_arrived(settings):
    settings.PRM_RETRAIN_MIN_NEW_LABELS = 3
    assert tasks.periodic_retrain_task() is None
    label_demo_solutions(problems=1)
    run_id = tasks.periodic_retrain_task()
    run = TrainingRun.objects.get(pk=run_id)
    assert run.status == "queued" and run.requested_by is None


# --- real workers -----------------------------------------------------------------------------


def test_a_real_worker_trains_promotes_and_scores(
    start_worker, client, make_user, settings, tmp_path
):
    label_demo_solutions(problems=4)
    client.force_login(make_user("rita", "researcher"))
    # A metric with no trivial floor: one epoch on four problems does not beat random scoring,
    # and a version at or below it is never promoted (test_evaluation_sets.py).
    start_worker(f"runs-e2e-{os.getpid()}@%h", PRM_PROMOTE_METRIC="step_accuracy")

    response = client.post(
        reverse("training-run-list"),
        {
            "epochs": "1",
            "learning_rate": "0.001",
            "batch_size": "8",
            "include_quality_control": "on",
            "neutral_as_positive": "on",
        },
    )
    assert response.status_code == 302
    run = TrainingRun.objects.get()

    def finished():
        run.refresh_from_db()
        return run.status in TrainingRun.FINISHED

    wait_for(finished, timeout=300, what="the training run to finish")
    assert run.status == "succeeded", f"{run.status}: {run.error}\n{run.log_tail}"
    assert run.worker_hostname.startswith("runs-e2e-")
    assert run.heartbeat_at is not None and run.metrics

    version = ModelVersion.objects.get(training_run=run)
    assert version.is_active
    assert version.checkpoint.startswith(f"checkpoints/run-{run.pk}-")
    from trainer.training.ml.prm import PRM

    PRM.load(checkpoints.local_dir(version))  # the checkpoint is complete and loads

    # Promotion queued a rescoring of every solution with the new active version.
    def scored():
        return not Solution.objects.exclude(prm_model_version=version).exists()

    wait_for(scored, timeout=300, what="every solution to be scored by the new model")
    solution = Solution.objects.order_by("pk").first()
    assert 0.0 <= solution.prm_score <= 1.0
    assert len(solution.prm_step_scores) == len(solution.steps)


def test_killing_the_worker_mid_run_fails_the_run_and_keeps_the_active_model(
    start_worker, settings, tmp_path
):
    label_demo_solutions(problems=4)
    active = ModelVersion.objects.create(
        name="trusted", checkpoint="/models/trusted", metrics={"step_auroc": 0.5}
    )
    active.is_active = True
    active.save()
    name = f"runs-kill-{os.getpid()}@%h"
    first = start_worker(name)

    run = runs.request_training_run(
        user=None, params={"epochs": 500, "batch_size": 4, "eval_fraction": 0.3}
    )

    def training():
        run.refresh_from_db()
        return run.status == "running" and run.step > 0

    wait_for(training, timeout=300, what="the run to be training")
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=30)

    # The replacement worker (same name) notices at start-up, without waiting for staleness.
    start_worker(name)

    def failed():
        run.refresh_from_db()
        return run.status == "failed"

    wait_for(failed, timeout=120, what="the killed run to be marked failed")
    assert "stopped during the run" in run.error
    assert not ModelVersion.objects.filter(training_run=run).exists()
    assert not (tmp_path / "models" / f"run-{run.pk}").exists()
    active.refresh_from_db()
    assert active.is_active
    assert list(ModelVersion.objects.filter(is_active=True)) == [active]
    # Nothing re-runs it behind the researcher's back, and nothing blocks the next run.
    assert not TrainingRun.objects.filter(status__in=TrainingRun.LIVE).exists()


@pytest.mark.django_db
def test_the_periodic_task_requeues_scoring_a_killed_pool_child_left_unfinished(settings):
    # A prefork pool child killed mid-scoring restarts no worker, so worker start-up cannot
    # notice; the periodic task does, once no scoring of that version can still be running.
    settings.PRM_SCORE_TIME_LIMIT = 600
    label_demo_solutions(problems=1)
    version = ModelVersion.objects.create(name="v", checkpoint="/models/v")
    version.is_active = True
    version.promoted_at = timezone.now()
    version.save()

    with mock.patch("trainer.tasks.score_task.apply_async") as queue_scoring:
        tasks.periodic_retrain_task()  # just activated: its scoring may still be running
        assert not queue_scoring.called

        version.promoted_at = timezone.now() - timedelta(seconds=601)
        version.save()
        tasks.periodic_retrain_task()
        queue_scoring.assert_called_once_with((version.pk,), task_id=None)

        Solution.objects.update(prm_model_version=version)  # finished meanwhile
        queue_scoring.reset_mock()
        tasks.periodic_retrain_task()
        assert not queue_scoring.called
