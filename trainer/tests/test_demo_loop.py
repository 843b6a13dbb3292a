"""The demo shows the whole loop: after `seed_demo`, a researcher's first run with default
settings trains on the seeded labels, reports a step AUROC and is promoted; a generation can
then be published without anyone labeling first.

The run is the real one (the Celery task's body, in-process, with the tiny built-in model and
every default parameter), so this test takes about a minute.
"""

import io
import re
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.urls import reverse

from labeling.demo.seed import DEMO_ACCOUNTS, create_demo_accounts
from labeling.models import LabelingSession
from trainer.models import TrainingRun
from trainer.training import runs
from trainer.training.params import TrainingParams

pytestmark = pytest.mark.django_db


@pytest.fixture
def model_dir(settings, tmp_path) -> Path:
    settings.PRM_MODEL_DIR = tmp_path / "models"
    # The heartbeat thread's own connection cannot see the test's open transaction.
    settings.PRM_HEARTBEAT_SECONDS = 3600
    settings.PRM_AUTO_PROMOTE = True
    settings.PRM_PROMOTE_METRIC = "step_auroc"
    return settings.PRM_MODEL_DIR


def test_seed_demo_labels_idempotently():
    call_command("seed_demo", stdout=io.StringIO())
    sessions = LabelingSession.objects.filter(submitted_at__isnull=False).count()
    assert sessions >= 200
    call_command("seed_demo", stdout=io.StringIO())
    assert LabelingSession.objects.filter(submitted_at__isnull=False).count() == sessions


@pytest.mark.slow  # trains a model: not in the fast lane
def test_a_first_run_with_default_settings_trains_on_the_demo_and_is_promoted(
    researcher, model_dir
):
    call_command("seed_demo", stdout=io.StringIO())

    run = runs.request_training_run(user=researcher, params={})
    assert run.params == TrainingParams().to_dict()
    run = runs.execute_training_run(run_id=run.pk, worker_hostname="celery@test")

    assert run.status == TrainingRun.Status.SUCCEEDED, run.error
    trained_on = int(re.search(r"\((\d+) train, \d+ held out\)", run.log_tail)[1])
    assert trained_on >= 200, run.log_tail
    assert run.metrics[-1]["step_auroc"] is not None
    version = run.model_version
    assert version.metrics["step_auroc"] is not None
    assert version.is_active, run.log_tail


def test_the_login_page_lists_the_demo_logins_only_while_they_work(client):
    assert "researcher-demo" not in client.get(reverse("login")).content.decode()

    create_demo_accounts()
    page = client.get(reverse("login")).content.decode()
    for username, password, _ in DEMO_ACCOUNTS:
        assert f"<code>{username}</code>" in page and f"<code>{password}</code>" in page

    researcher = get_user_model().objects.get(username="researcher")
    researcher.set_password("a private one")
    researcher.save()
    page = client.get(reverse("login")).content.decode()
    assert "researcher-demo" not in page and "admin-demo" in page
