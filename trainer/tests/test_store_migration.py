"""An install made before the artifact store keeps working: its model versions hold the absolute
path of the host that trained them (trainer 0018). On that host they are read where they lie;
elsewhere the error says what to run; `publish_legacy_artifacts` run there moves them into the
store, after which any host scores with them."""

import shutil
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from rest_framework.test import APIClient

from core import store
from trainer.models import ModelVersion
from trainer.scoring import posted
from trainer.training.ml.prm import PRM, PRMSettings

BEFORE = [("trainer", "0018_run_step_labels")]
STEPS = [["We add $2$ and $3$.", "# Answer\n\n5"], ["Subtract $7$.", "# Answer\n\n6"]]
BODY = {"solutions": [{"problem": "Solve it.", "steps": steps} for steps in STEPS]}


@pytest.fixture
def old_install(tmp_path):
    """A database migrated by the code before the store, with one active version whose
    checkpoint is an absolute path on the trainer's disk."""
    corpus = [text for steps in STEPS for text in steps] * 5
    prm = PRM.build(base_model=None, corpus=corpus, settings=PRMSettings(), seed=1)
    (tmp_path / "models").mkdir()
    prm.save(tmp_path / "models" / "run-1")
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    old = executor.loader.project_state(BEFORE).apps
    row = old.get_model("trainer", "ModelVersion").objects.create(
        name="run 1", checkpoint_path=str(tmp_path / "models" / "run-1"), is_active=True
    )
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    posted._loaded.clear()
    yield ModelVersion.objects.get(pk=row.pk)
    posted._loaded.clear()


def score(make_user):
    from django.contrib.auth import get_user_model

    client = APIClient()
    user = get_user_model().objects.filter(username="rita").first()
    client.force_authenticate(user or make_user("rita", "researcher"))
    return client.post("/api/score/", BODY, format="json")


def as_another_host(settings, tmp_path, name):
    settings.STORE_CACHE_DIR = tmp_path / f"{name}-cache"
    posted._loaded.clear()


@pytest.mark.django_db(transaction=True)
def test_an_old_version_scores_where_it_lies_and_everywhere_once_published(
    old_install, make_user, settings, tmp_path
):
    trainer_disk = tmp_path / "models" / "run-1"
    assert old_install.checkpoint == str(trainer_disk)  # the migration kept the value

    # On the host that trained it: read where it lies.
    answer = score(make_user)
    assert answer.status_code == 200, answer.content
    assert len(answer.json()["solutions"][0]["step_scores"]) == 2

    # On a host that does not have it: a 503 that says what to run, and where.
    hidden = tmp_path / "elsewhere"
    trainer_disk.rename(hidden)
    as_another_host(settings, tmp_path, "web")
    answer = score(make_user)
    assert answer.status_code == 503
    assert "publish_legacy_artifacts" in answer.json()["detail"]
    assert str(trainer_disk) in answer.json()["detail"]
    hidden.rename(trainer_disk)

    # Published from the trainer's host; then every host reads it from the store.
    as_another_host(settings, tmp_path, "trainer")
    out = StringIO()
    call_command("publish_legacy_artifacts", stdout=out)
    assert "1 published, 0 on other hosts" in out.getvalue()
    old_install.refresh_from_db()
    assert store.is_reference(old_install.checkpoint)
    assert old_install.checkpoint.startswith(f"checkpoints/version-{old_install.pk}-")
    shutil.rmtree(trainer_disk)
    as_another_host(settings, tmp_path, "web-2")
    answer = score(make_user)
    assert answer.status_code == 200, answer.content

    # Run again: nothing left to do, nothing published twice.
    out = StringIO()
    call_command("publish_legacy_artifacts", stdout=out)
    assert "0 published, 0 on other hosts" in out.getvalue()


@pytest.mark.django_db(transaction=True)
def test_publishing_on_a_host_without_the_files_changes_nothing(old_install, tmp_path):
    (tmp_path / "models" / "run-1").rename(tmp_path / "on-the-gpu-host")
    out = StringIO()
    call_command("publish_legacy_artifacts", stdout=out)
    assert "not here: run 1" in out.getvalue() and "0 published, 1 on other hosts" in out.getvalue()
    old_install.refresh_from_db()
    assert old_install.checkpoint == str(tmp_path / "models" / "run-1")
