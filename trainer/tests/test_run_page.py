"""The run page a researcher watches: live status, integer counts, curves with axes, a layout
that fits the window; and the model version list's rescoring progress after an activation."""

import re

import pytest
from django.urls import reverse
from django.utils import timezone

from labeling.demo.seed import create_demo_accounts
from labeling.models import Problem, Solution
from trainer.models import ModelVersion, TrainingRun

pytestmark = pytest.mark.django_db

# What a real run records per epoch (trainer.training.ml.train.evaluate and the loop), three epochs.
EPOCH = {
    "train_loss": 0.91,
    "eval_loss": 0.84,
    "eval_examples": 24,
    "step_accuracy": 0.62,
    "step_auroc": 0.71,
    "step_f1": 0.55,
    "step_precision": 0.6,
    "step_recall": 0.5,
    "step_positives": 51,
    "step_negatives": 17,
    "first_error_accuracy": 0.4,
    "first_error_f1": 0.33,
    "first_error_precision": 0.3,
    "first_error_recall": 0.36,
    "best_of_n": 0.8,
    "best_of_n_problems": 10,
}


def finished(**changes) -> TrainingRun:
    metrics = [
        {
            "epoch": e,
            **EPOCH,
            "train_loss": 1.2 / e,
            "eval_loss": 1.0 / e,
            "step_auroc": 0.6 + e / 20,
        }
        for e in (1, 2, 3)
    ]
    return TrainingRun.objects.create(
        status="succeeded",
        step=45,
        total_steps=45,
        epoch=3,
        metrics=metrics,
        dataset_size=244,
        finished_at=timezone.now(),
        log_tail="Data: 244 examples (220 train, 24 held out)",
        **changes,
    )


def test_counts_are_integers_and_rates_have_four_places(client, researcher):
    html = client.get(reverse("training-run-detail", args=[finished().pk])).content.decode()
    cells = re.findall(r"<td>([^<]*)</td>", html)
    assert "24" in cells and "51" in cells and "10" in cells
    assert not [cell for cell in cells if cell in ("24.0000", "51.0000", "10.0000")]
    assert "0.7500" in cells  # step_auroc of epoch 3


def test_the_status_message_follows_the_run(client, researcher):
    response = client.post(reverse("training-run-list"), {"epochs": "1"}, follow=True)
    run = TrainingRun.objects.get()
    before, live = response.content.decode().split('<section id="training-run-progress"')
    # Said only in the polled part of the page, which the next poll replaces.
    assert f"Training run {run.pk} is queued" in live and "is queued" not in before

    TrainingRun.objects.filter(pk=run.pk).update(status="succeeded", finished_at=timezone.now())
    html = client.get(reverse("training-run-detail", args=[run.pk])).content.decode()
    assert "is queued" not in html
    assert f"Training run {run.pk} succeeded" in html


def test_the_chart_draws_loss_and_metrics_against_a_labelled_epoch_axis(client, researcher):
    html = client.get(reverse("training-run-progress", args=[finished().pk])).content.decode()
    charts = re.findall(r"<svg .*?</svg>", html, re.S)
    assert len(charts) == 2
    loss, metrics = charts
    assert 'data-name="train_loss"' in loss and 'data-name="eval_loss"' in loss
    assert 'data-name="step_auroc"' in metrics
    for chart in charts:
        assert ">epoch</text>" in chart
        # One tick per epoch on the x axis.
        assert re.findall(r'class="tick x"[^>]*>(\d+)</text>', chart) == ["1", "2", "3"]
        assert "<polyline" in chart
    assert ">loss</text>" in loss
    assert "style=" not in html and "<script" not in html  # the CSP allows neither


def test_activation_shows_the_rescoring_progress_until_the_pool_is_scored(client, researcher):
    problem = Problem.objects.create(text="What is 1+1?", answer="2")
    solutions = [
        Solution.objects.create(problem=problem, steps=[f"{n}"], answer=str(n), is_correct=n == 2)
        for n in range(4)
    ]
    version = ModelVersion.objects.create(name="v", checkpoint="/v", metrics={})
    client.post(reverse("model-version-activate", args=[version.pk]))

    page = client.get(reverse("model-version-list")).content.decode()
    assert "0 of 4 solutions scored" in page
    assert reverse("model-version-scoring", args=[version.pk]) in page and "every 2s" in page

    Solution.objects.filter(pk__in=[s.pk for s in solutions[:3]]).update(prm_model_version=version)
    fragment = client.get(reverse("model-version-scoring", args=[version.pk])).content.decode()
    assert "3 of 4 solutions scored" in fragment and 'value="75"' in fragment
    assert "<html" not in fragment

    Solution.objects.filter(pk=solutions[3].pk).update(prm_model_version=version)
    fragment = client.get(reverse("model-version-scoring", args=[version.pk])).content.decode()
    assert "has scored all 4 solutions" in fragment
    assert "hx-trigger" not in fragment  # polling stops


def test_the_finished_run_page_fits_a_1400_px_window(live_server, browser):
    create_demo_accounts()
    run = finished(params={"epochs": 3, "batch_size": 16, "learning_rate": 0.0003})
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{live_server.url}/training-runs/{run.pk}/")
    page.get_by_label("Username").fill("researcher")
    page.get_by_label("Password").fill("researcher-demo")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{live_server.url}/training-runs/{run.pk}/")
    assert page.locator("svg.curves").count() == 2
    assert page.evaluate("document.documentElement.scrollWidth") <= 1400
