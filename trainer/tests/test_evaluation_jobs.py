"""An evaluation is a job like the others: it beats while it scores, stops between batches once
cancelled, is failed when its worker dies, and is evaluated again from the page or the API."""

import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from core.queueing import BrokerUnavailable
from trainer import pipeline, tasks
from trainer.evaluation import sets
from trainer.evaluation.models import Evaluation
from trainer.models import ModelVersion
from trainer.training.ml.prm import PRM

pytestmark = pytest.mark.django_db

# 40 items: three batches of 16, 16 and 8 (sets.BATCH_MAX is 16 in these tests).
ITEMS = [
    {"problem": f"P{p}", "steps": [f"p{p} s{i}" for i in range(3)], "label": p % 4 - 1}
    for p in range(40)
]


@pytest.fixture(autouse=True)
def batches_of_16(monkeypatch):
    monkeypatch.setattr(sets, "BATCH_MAX", 16)


@pytest.fixture(autouse=True)
def model_dir(settings, tmp_path) -> Path:
    settings.PRM_MODEL_DIR = tmp_path / "models"
    settings.PRM_HEARTBEAT_SECONDS = 3600
    return settings.PRM_MODEL_DIR


@pytest.fixture
def evaluation(tmp_path) -> Evaluation:
    path = tmp_path / "processbench_math.jsonl"
    path.write_text("".join(json.dumps(item) + "\n" for item in ITEMS))
    chosen = sets.register_processbench_set(name="ProcessBench MATH", path=path)
    corpus = [step for item in ITEMS for step in item["steps"]]
    PRM.build(base_model=None, corpus=corpus, seed=2).save(tmp_path / "v1")
    version = ModelVersion.objects.create(name="v1", checkpoint=str(tmp_path / "v1"))
    return Evaluation.objects.create(model_version=version, evaluation_set=chosen)


@pytest.fixture
def broker(monkeypatch):
    """Evaluations queued again are run here, at once."""
    sent = []

    def send(name, args=(), **_):
        sent.append(name)
        if name == pipeline.EVALUATE_TASK:
            sets.run_evaluation(evaluation_id=args[0], worker_hostname="celery@test")

    monkeypatch.setattr(pipeline, "send_task", send)
    return sent


def cancel_after_first_batch(monkeypatch, evaluation: Evaluation) -> None:
    """The researcher presses Cancel while the first batch is being scored."""
    score = PRM.score

    def scoring(self, **kwargs):
        if not Evaluation.objects.get(pk=evaluation.pk).cancel_requested:
            sets.cancel_evaluation(evaluation_id=evaluation.pk)
        return score(self, **kwargs)

    monkeypatch.setattr(PRM, "score", scoring)


def test_a_cancel_stops_the_evaluation_after_its_batch_and_it_is_evaluated_again(
    evaluation, monkeypatch, researcher, client, broker
):
    score = PRM.score
    cancel_after_first_batch(monkeypatch, evaluation)
    done = sets.run_evaluation(evaluation_id=evaluation.pk, worker_hostname="celery@test")
    assert (done.status, done.done, done.total) == ("cancelled", sets.BATCH_MAX, len(ITEMS))
    assert done.results == {}  # no figures from part of the items
    assert f"Cancelled after {sets.BATCH_MAX} of {len(ITEMS)} items" in done.log_tail

    page = client.get(reverse("model-version-detail", args=[evaluation.model_version_id])).content
    assert b"Evaluate again" in page and b"Cancel evaluation" not in page
    assert b'hx-trigger="every 2s"' not in page  # nothing live: no polling

    monkeypatch.setattr(PRM, "score", score)  # no more cancels
    # The page's button queues it; the broker's stand-in runs it.
    response = client.post(
        reverse("evaluation-again", args=[evaluation.model_version_id, evaluation.pk])
    )
    assert response.status_code == 302 and broker == [pipeline.EVALUATE_TASK]
    evaluation.refresh_from_db()
    assert (evaluation.status, evaluation.done, evaluation.total) == ("succeeded", 40, 40)
    assert set(evaluation.results["figures"]) >= {"first_error_f1", "step_auroc"}
    assert not evaluation.cancel_requested and evaluation.error == ""
    assert "Queued again." in evaluation.log_tail


def test_a_live_evaluation_is_polled_and_can_be_cancelled_from_its_page(
    evaluation, researcher, client
):
    url = reverse("model-version-detail", args=[evaluation.model_version_id])
    page = client.get(url).content.decode()
    assert 'hx-trigger="every 2s"' in page and "Cancel evaluation" in page
    assert "Evaluate again" not in page
    response = client.post(
        reverse("evaluation-cancel", args=[evaluation.model_version_id, evaluation.pk]),
        follow=True,
    )
    assert f"evaluation {evaluation.pk} is cancelled" in response.content.decode().lower()
    evaluation.refresh_from_db()
    assert evaluation.status == "cancelled"
    # Another version's evaluation is not reachable under this version's address.
    other = ModelVersion.objects.create(name="v2", checkpoint=evaluation.model_version.checkpoint)
    wrong = reverse("evaluation-again", args=[other.pk, evaluation.pk])
    assert client.post(wrong).status_code == 404


def test_the_api_cancels_and_evaluates_again_and_refuses_what_the_state_does_not_allow(
    evaluation, make_user, monkeypatch
):
    api = APIClient()
    api.force_authenticate(make_user("res", "researcher"))
    base = f"/api/evaluations/{evaluation.pk}"
    assert api.post(f"{base}/evaluate-again/").status_code == 409  # queued: nothing to redo
    cancelled = api.post(f"{base}/cancel/")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    assert api.post(f"{base}/cancel/").status_code == 409  # finished already

    def down(*args, **kwargs):
        raise BrokerUnavailable("Could not queue it: the task broker is unreachable (refused).")

    monkeypatch.setattr(pipeline, "send_task", down)
    refused = api.post(f"{base}/evaluate-again/")
    assert refused.status_code == 503
    evaluation.refresh_from_db()
    # Not left queued with no task sent: failed, saying why, and it can be tried again.
    assert evaluation.status == "failed" and "broker is unreachable" in evaluation.error
    annotator = APIClient()
    annotator.force_authenticate(make_user("ann", "annotator"))
    assert annotator.post(f"{base}/cancel/").status_code == 403
    assert api.get(f"{base}/").json()["log_tail"].count("Queued again.") == 1


def test_an_evaluation_whose_worker_died_is_failed_and_says_how_to_go_on(evaluation, settings):
    # A worker killed mid-evaluation: its process is gone, its heartbeat stops.
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    long_ago = timezone.now() - timedelta(seconds=settings.PRM_RUN_STALE_SECONDS + 60)
    Evaluation.objects.filter(pk=evaluation.pk).update(
        status="running", worker_hostname="celery@gpu1", worker_pid=dead.pid, heartbeat_at=long_ago
    )
    # A worker restarting under the same name finds it at once.
    tasks.fail_evaluations_of_dead_workers(sender=type("W", (), {"hostname": "celery@gpu1"}))
    evaluation.refresh_from_db()
    assert evaluation.status == "failed"
    assert "celery@gpu1 stopped during the run" in evaluation.error
    assert sets.STOPPED in evaluation.error
    # One still beating on a live worker is left alone by the periodic task.
    Evaluation.objects.filter(pk=evaluation.pk).update(
        status="running", worker_pid=os.getpid(), heartbeat_at=timezone.now(), error=""
    )
    tasks.periodic_retrain_task()
    evaluation.refresh_from_db()
    assert evaluation.status == "running"


def test_items_are_scored_in_batches_of_similar_length_and_figured_in_file_order(
    evaluation, monkeypatch
):
    # Issue 46, item 1: long and short solutions never share a padded batch, and the scores
    # come back to their items (the figures are those of scoring each item alone).
    monkeypatch.setattr(sets, "BATCH_MAX", 64)
    lengths = [len(f"P{p}") + sum(len(s) for s in item["steps"]) for p, item in enumerate(ITEMS)]
    batches = sets.length_batches(lengths)
    assert sorted(i for batch in batches for i in batch) == list(range(len(ITEMS)))
    flat = [lengths[i] for batch in batches for i in batch]
    assert flat == sorted(flat)
    assert sets.length_batches([10, 50_000, 10, 40_000]) == [[0, 2], [3], [1]]

    seen = []
    score = PRM.score

    def scoring(self, **kwargs):
        seen.append(len(kwargs["problems"]))
        return score(self, **kwargs)

    monkeypatch.setattr(PRM, "score", scoring)
    done = sets.run_evaluation(evaluation_id=evaluation.pk, worker_hostname="celery@test")
    assert done.status == "succeeded" and seen == [len(ITEMS)]
    prm = PRM.load(evaluation.model_version.checkpoint)
    alone = [score(prm, problems=[i["problem"]], steps=[i["steps"]])[0] for i in ITEMS]
    assert done.results == sets.figures.evaluate(sets.items_of(evaluation.evaluation_set), alone)


def test_on_the_cpu_a_forward_pass_stops_at_the_token_budget(monkeypatch):
    # Issue 46, item 1: a padded batch of sixteen long solutions took 2.6 times as long per
    # solution on the CPU as each alone; a CPU batch now ends at CPU_SCORE_TOKENS tokens
    # (padding counted), and the scores are those of each item alone.
    from trainer.training.ml import prm as prm_module

    lengths = [30, 900, 1000, 1100, 2000, 40, 35, 1500]
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    chunks = list(prm_module._score_chunks(order, lengths, 16, 2048))
    assert [i for chunk in chunks for i in chunk] == order
    for chunk in chunks:
        assert len(chunk) == 1 or len(chunk) * max(lengths[i] for i in chunk) <= 2048
    assert [len(c) for c in chunks] == [3, 2, 1, 1, 1]  # the short ones share; the long ones not
    assert list(prm_module._score_chunks(order, lengths, 16, None)) == [order]  # CUDA

    prm = PRM.build(base_model=None, corpus=[s for i in ITEMS for s in i["steps"]], seed=1)
    problems, steps = [i["problem"] for i in ITEMS], [i["steps"] for i in ITEMS]
    monkeypatch.setattr(prm_module, "CPU_SCORE_TOKENS", 10**9)
    padded = prm.score(problems=problems, steps=steps, batch_size=16)
    monkeypatch.setattr(prm_module, "CPU_SCORE_TOKENS", 8)
    budgeted = prm.score(problems=problems, steps=steps, batch_size=16)
    for a, b in zip(padded, budgeted, strict=True):
        assert a == pytest.approx(b, abs=1e-5)
