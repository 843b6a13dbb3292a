"""A real browser: a researcher starts a run and watches it progress without reloading."""

import re

from django.contrib.auth.models import Group

from labeling.demo.seed import create_demo_accounts
from trainer.models import TrainingRun


def test_a_researcher_starts_a_run_and_sees_it_progress_live(live_server, browser):
    create_demo_accounts()
    assert Group.objects.get(name="researcher").permissions.filter(codename="view_trainingrun")
    page = browser.new_page()

    page.goto(f"{live_server.url}/training-runs/")
    page.get_by_label("Username").fill("researcher")
    page.get_by_label("Password").fill("researcher-demo")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{live_server.url}/training-runs/")

    page.get_by_label("Epochs").fill("2")
    page.get_by_role("button", name="Start training run").click()
    page.wait_for_url(re.compile(r"/training-runs/\d+/$"))
    run = TrainingRun.objects.get()
    assert page.get_by_text("Queued", exact=True).is_visible()

    # The worker's progress reaches the open page through htmx polling, no reload.
    TrainingRun.objects.filter(pk=run.pk).update(
        status="running", step=6, total_steps=12, epoch=1, log_tail="12:00:01 step 6"
    )
    page.get_by_text("step 6 of 12").wait_for(timeout=10_000)
    TrainingRun.objects.filter(pk=run.pk).update(
        status="succeeded",
        step=12,
        metrics=[{"epoch": 1, "step_auroc": 0.7}, {"epoch": 2, "step_auroc": 0.83}],
    )
    page.get_by_text("0.8300").wait_for(timeout=10_000)
    assert page.get_by_text("Succeeded", exact=True).is_visible()
    assert page.get_by_role("button", name="Cancel run").count() == 0
