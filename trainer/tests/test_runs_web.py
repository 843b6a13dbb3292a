"""Researcher pages: who may see them, starting and cancelling runs, live progress, activation."""

import pytest
from django.urls import reverse
from django.utils import timezone

from trainer.models import ModelVersion, TrainingRun

pytestmark = pytest.mark.django_db


@pytest.fixture
def finished_run():
    return TrainingRun.objects.create(
        status="succeeded",
        params={"epochs": 2},
        step=20,
        total_steps=20,
        epoch=2,
        metrics=[
            {"epoch": 1, "step_accuracy": 0.61, "step_auroc": 0.66, "best_of_n": None},
            {"epoch": 2, "step_accuracy": 0.74, "step_auroc": 0.81, "best_of_n": None},
        ],
        log_tail="12:00:00 Checkpoint written to /x/run-1.",
        finished_at=timezone.now(),
    )


def pages(run_id: int, version_id: int) -> list[tuple[str, str]]:
    return [
        ("get", reverse("training-run-list")),
        ("post", reverse("training-run-list")),
        ("get", reverse("training-run-table")),
        ("get", reverse("training-run-detail", args=[run_id])),
        ("get", reverse("training-run-progress", args=[run_id])),
        ("post", reverse("training-run-cancel", args=[run_id])),
        ("get", reverse("model-version-list")),
        ("post", reverse("model-version-activate", args=[version_id])),
    ]


def test_annotators_get_403_on_every_training_page(client, make_user):
    client.force_login(make_user("ann", "annotator"))
    run = TrainingRun.objects.create()
    version = ModelVersion.objects.create(checkpoint="/x")
    for method, url in pages(run.pk, version.pk):
        assert getattr(client, method)(url).status_code == 403, url
    run.refresh_from_db()
    version.refresh_from_db()
    assert run.status == "queued" and not version.is_active
    assert TrainingRun.objects.count() == 1


def test_anonymous_users_are_sent_to_login(client):
    response = client.get(reverse("training-run-list"))
    assert response.status_code == 302 and "login" in response["Location"]


def test_researchers_see_the_pages_and_the_nav_links(client, researcher, finished_run):
    version = ModelVersion.objects.create(
        checkpoint="/x", training_run=finished_run, metrics={"step_auroc": 0.81}
    )
    for method, url in pages(finished_run.pk, version.pk):
        if method == "get":
            assert client.get(url).status_code == 200, url
    home = client.get(reverse("home")).content.decode()
    assert reverse("training-run-list") in home and reverse("model-version-list") in home


def test_annotators_do_not_see_the_training_links(client, make_user):
    client.force_login(make_user("ann", "annotator"))
    home = client.get(reverse("home")).content.decode()
    assert reverse("training-run-list") not in home


def test_a_researcher_starts_a_run_from_the_form(client, researcher):
    response = client.post(
        reverse("training-run-list"),
        {
            "epochs": "2",
            "learning_rate": "0.001",
            "batch_size": "4",
            "max_minutes": "5",
            "include_quality_control": "on",
            "generation_min": "1",
            "generation_max": "3",
        },
    )
    run = TrainingRun.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("training-run-detail", args=[run.pk])
    assert run.status == "queued" and run.requested_by == researcher
    assert run.params["epochs"] == 2 and run.params["batch_size"] == 4
    assert run.params["learning_rate"] == 0.001 and run.params["max_minutes"] == 5
    assert (
        run.params["include_quality_control"] is True and run.params["include_screening"] is False
    )
    assert (run.params["generation_min"], run.params["generation_max"]) == (1, 3)

    detail = client.get(response["Location"]).content.decode()
    assert f"Training run {run.pk} is queued" in detail
    assert "Cancel run" in detail


def test_the_form_explains_bad_input_and_a_second_run(client, researcher):
    bad = client.post(
        reverse("training-run-list"), {"epochs": "0", "learning_rate": "x", "batch_size": 8}
    )
    assert bad.status_code == 400
    assert not TrainingRun.objects.exists()

    good = {"epochs": "1", "learning_rate": "0.001", "batch_size": "8"}
    first = client.post(reverse("training-run-list"), good)
    assert first.status_code == 302
    second = client.post(reverse("training-run-list"), good)
    assert second.status_code == 409
    assert "is still queued" in second.content.decode()
    assert TrainingRun.objects.count() == 1


def test_a_live_run_polls_every_two_seconds_and_a_finished_one_stops(
    client, researcher, finished_run
):
    live = TrainingRun.objects.create(
        status="running", step=5, total_steps=20, epoch=1, loss=0.93, log_tail="step 5"
    )
    partial = client.get(reverse("training-run-progress", args=[live.pk]), HTTP_HX_REQUEST="true")
    html = partial.content.decode()
    assert 'hx-trigger="every 2s"' in html
    assert reverse("training-run-progress", args=[live.pk]) in html
    assert "<html" not in html  # a fragment, not a page
    assert 'value="25"' in html and "step 5 of 20" in html
    assert "Cancel run" in html

    done = client.get(reverse("training-run-progress", args=[finished_run.pk])).content.decode()
    assert "hx-trigger" not in done
    assert "Cancel run" not in done
    assert "0.8100" in done and "0.7400" in done  # per-epoch metrics table
    assert "<polyline" in done  # metric curves
    assert "Checkpoint written" in done


def test_a_failed_run_shows_its_error(client, researcher):
    run = TrainingRun.objects.create(status="failed", error="No labeled examples: none.")
    html = client.get(reverse("training-run-detail", args=[run.pk])).content.decode()
    assert "No labeled examples: none." in html


def test_the_runs_table_polls_only_while_a_run_is_live(client, researcher, finished_run):
    assert "hx-trigger" not in client.get(reverse("training-run-table")).content.decode()
    TrainingRun.objects.create(status="queued")
    assert 'hx-trigger="every 2s"' in client.get(reverse("training-run-table")).content.decode()


def test_cancel_button_cancels_a_queued_run(client, researcher):
    run = TrainingRun.objects.create(status="queued")
    response = client.post(reverse("training-run-cancel", args=[run.pk]), follow=True)
    run.refresh_from_db()
    assert run.status == "cancelled"
    assert f"Training run {run.pk} is cancelled" in response.content.decode()


def test_activate_button_makes_a_version_the_only_active_one(client, researcher):
    old = ModelVersion.objects.create(name="old", checkpoint="/a", is_active=True)
    new = ModelVersion.objects.create(name="new", checkpoint="/b", metrics={"step_auroc": 0.9})
    page = client.get(reverse("model-version-list")).content.decode()
    assert reverse("model-version-activate", args=[new.pk]) in page
    assert reverse("model-version-activate", args=[old.pk]) not in page  # already active

    response = client.post(reverse("model-version-activate", args=[new.pk]), follow=True)
    assert "new is now active" in response.content.decode()
    assert list(ModelVersion.objects.filter(is_active=True)) == [new]


def test_unknown_runs_and_versions_are_404(client, researcher):
    assert client.get(reverse("training-run-detail", args=[999])).status_code == 404
    assert client.post(reverse("model-version-activate", args=[999])).status_code == 404
