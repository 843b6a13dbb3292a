"""Faults a real install meets: a worker killed mid-scoring, a checkpoint directory that cannot
be written or a disk that fills up during the save, and a labeler who closes the tab.

(A worker killed mid-training is test_tasks.py's
test_killing_the_worker_mid_run_fails_the_run_and_keeps_the_active_model.)
"""

import json
import os
import resource
import signal
import time
from contextlib import contextmanager
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from kombu import Connection

from conftest import create_user, wait_for
from core.tests.store_faults import DIE_AFTER_TWO_UPLOADS
from labeling.models import LabelingSession, Problem, Solution, StepRating, solution_digest
from labeling.services.workbench import LEASE
from trainer.models import ModelVersion, ScoringChunk, TrainingRun
from trainer.tests.labels import label_demo_solutions
from trainer.training import runs
from trainer.training.ml.prm import PRM, PRMSettings

# --- a worker killed while it scores the pool -------------------------------------------------

POOL = 600
# Small chunks make scoring commit often enough to be caught half-way on any machine.
SCORE_CHUNK = "4"


def make_pool(*, size: int) -> None:
    problems = [
        Problem.objects.create(
            text=f"Compute {n} + {n + 1} modulo 10.", answer=str((2 * n + 1) % 10)
        )
        for n in range(20)
    ]
    solutions = []
    for i in range(size):
        problem = problems[i % len(problems)]
        steps = [f"Add {i} and {j}, keeping the last digit." for j in range(2 + i % 4)]
        steps.append(f"# Answer\n\n{i % 10}")
        solutions.append(
            Solution(
                problem=problem,
                steps=steps,
                answer=str(i % 10),
                is_correct=problem.answer == str(i % 10),
                content_hash=solution_digest(steps=steps, answer=str(i % 10)),
            )
        )
    Solution.objects.bulk_create(solutions, batch_size=500)


def scored_by(version: ModelVersion) -> int:
    return Solution.objects.filter(prm_model_version=version).count()


def test_a_worker_killed_mid_scoring_is_replaced_and_the_pool_ends_scored_by_the_active_model(
    start_worker, broker, client, make_user, tmp_path
):
    make_pool(size=POOL)
    # The pool as the previous active version left it.
    old = ModelVersion.objects.create(name="old", checkpoint="/models/old", is_active=True)
    Solution.objects.update(prm_score=0.5, prm_step_scores=[0.5], prm_model_version=old)
    corpus = list(Solution.objects.values_list("steps", flat=True)[:100])
    prm = PRM.build(
        base_model=None, corpus=[s for steps in corpus for s in steps], settings=PRMSettings()
    )
    prm.save(tmp_path / "new-checkpoint")
    new = ModelVersion.objects.create(name="new", checkpoint=str(tmp_path / "new-checkpoint"))

    name = f"faults-score-{os.getpid()}@%h"
    first = start_worker(name, PRM_SCORE_CHUNK=SCORE_CHUNK)
    # Activated once the worker runs, so only the activation queues the scoring.
    wait_for(lambda: " ready." in first.log_path.read_text(), timeout=120, what="the worker")
    client.force_login(make_user("rita", "researcher"))
    response = client.post(reverse("model-version-activate", args=[new.pk]), follow=True)
    assert "new is now active; solutions are being rescored" in response.content.decode()

    wait_for(lambda: scored_by(new) > 0, timeout=180, what="scoring to start", interval=0.05)
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=30)
    interrupted = scored_by(new)
    assert 0 < interrupted < POOL, "the kill did not land mid-scoring"

    # Every solution carries the complete scores of one version, and the page says which
    # ones are still waiting for the active one.
    assert scored_by(old) == POOL - interrupted
    assert not Solution.objects.filter(prm_model_version__isnull=True).exists()
    pending = Solution.objects.filter(prm_model_version=old).order_by("pk").first()
    page = client.get(reverse("solution-inspect", args=[pending.pk])).content.decode()
    assert "not the active version (new); rescoring is pending" in page
    assert list(ModelVersion.objects.filter(is_active=True)) == [new]

    time.sleep(2)  # a dead worker scores nothing more
    assert scored_by(new) == interrupted
    chunks = ScoringChunk.objects.filter(model_version=new)
    # The chunk it held stays marked as its own: nobody else takes it before its heartbeat
    # goes stale.
    held = list(chunks.filter(status="running").values_list("worker_hostname", flat=True))
    assert len(held) <= 1 and all(h.startswith(name.split("@")[0]) for h in held), held
    waiting = chunks.filter(status="queued").count()
    with Connection(broker) as conn:
        # The chunks not started wait in the broker; the message of the one it held (or had
        # just taken) is not queued again by the broker before its visibility timeout, an
        # hour: only the replacement worker can finish it.
        assert waiting - 1 <= conn.default_channel.client.llen("gpu") <= waiting

    # The replacement puts back what its predecessor held, and completes the scoring.
    start_worker(name, PRM_SCORE_CHUNK=SCORE_CHUNK)
    wait_for(lambda: scored_by(new) == POOL, timeout=300, what="the pool to be rescored")
    wait_for(
        lambda: not chunks.exclude(status="succeeded").exists(), timeout=60, what="every chunk done"
    )
    # Each solution was written once: the killed chunk committed nothing.
    assert sum(chunks.values_list("scored", flat=True)) == POOL

    for solution in Solution.objects.order_by("?")[:20]:
        assert 0.0 <= solution.prm_score <= 1.0
        assert len(solution.prm_step_scores) == len(solution.steps)
    page = client.get(reverse("solution-inspect", args=[pending.pk])).content.decode()
    assert "new (active)" in page and "rescoring is pending" not in page
    # The recovery rescored; it did not touch which version is active.
    assert list(ModelVersion.objects.filter(is_active=True)) == [new]
    new.refresh_from_db()
    assert new.checkpoint == str(tmp_path / "new-checkpoint")


# --- a checkpoint that cannot be written ------------------------------------------------------

TINY_RUN = {"epochs": 1, "batch_size": 8, "learning_rate": 1e-3, "eval_fraction": 0.3}


@pytest.fixture
def trusted(settings):
    # The heartbeat thread's own connection cannot see this test's uncommitted rows.
    settings.PRM_HEARTBEAT_SECONDS = 3600
    version = ModelVersion.objects.create(
        name="trusted", checkpoint="/models/trusted", metrics={"step_auroc": 0.5}
    )
    version.is_active = True
    version.save()
    return version


def train_once() -> TrainingRun:
    run = runs.request_training_run(user=None, params=TINY_RUN, enqueue=False)
    return runs.execute_training_run(run_id=run.pk, worker_hostname="test")


def assert_failed_without_a_model(run: TrainingRun, trusted: ModelVersion, client) -> None:
    assert run.status == "failed"
    assert not ModelVersion.objects.filter(training_run=run).exists()
    assert list(ModelVersion.objects.filter(is_active=True)) == [trusted]
    client.force_login(create_user("rita", "researcher"))
    page = client.get(reverse("training-run-detail", args=[run.pk])).content.decode()
    assert run.error in page


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("blocker", "errno"),
    [("a file above it", "[Errno 20] Not a directory"), ("a file in its place", "[Errno 17]")],
)
def test_an_unwritable_checkpoint_directory_fails_the_run_before_training(
    blocker, errno, settings, tmp_path, trusted, client
):
    label_demo_solutions(problems=4)
    (tmp_path / "occupied").write_text("not a directory")
    model_dir = tmp_path / "occupied" / "models"
    if blocker == "a file in its place":
        model_dir = tmp_path / "occupied"
    settings.STORE_SCRATCH_DIR = model_dir

    run = train_once()

    assert run.error.startswith(f"Checkpoint directory {model_dir} is not writable: {errno}")
    # Refused before any compute: no data snapshot, no training step.
    assert run.dataset_size is None and run.step == 0 and not run.metrics
    assert_failed_without_a_model(run, trusted, client)
    assert (tmp_path / "occupied").read_text() == "not a directory"


@contextmanager
def disk_full_after(limit: int):
    """Writes past `limit` bytes of a file fail, as on a full disk (EFBIG; needs no mount)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # else the kernel kills us
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)


@pytest.mark.django_db
def test_a_disk_that_fills_up_during_the_save_fails_the_run_and_leaves_nothing(
    settings, tmp_path, trusted, client, monkeypatch, _artifact_store
):
    label_demo_solutions(problems=4)
    settings.STORE_SCRATCH_DIR = tmp_path / "scratch"
    real_save = PRM.save

    def save_on_a_full_disk(self, path):
        # Smaller than the weights file: the backbone's save is cut off half-way through.
        with disk_full_after(64 * 1024):
            real_save(self, path)

    monkeypatch.setattr(PRM, "save", save_on_a_full_disk)

    run = train_once()

    checkpoint = tmp_path / "scratch" / f"run-{run.pk}"
    assert run.error.startswith(f"Could not write the checkpoint {checkpoint}: ")
    assert "File too large" in run.error and run.error.endswith("Nothing was kept.")
    assert run.metrics, "training itself finished; only the save failed"
    # Neither the checkpoint nor its half-written temporary directory is left.
    assert list((tmp_path / "scratch").iterdir()) == []
    assert not _artifact_store.exists() or not any(_artifact_store.rglob("*"))
    assert_failed_without_a_model(run, trusted, client)
    # The next run is not blocked, and on a disk with room it succeeds.
    monkeypatch.setattr(PRM, "save", real_save)
    assert train_once().status == "succeeded"


# --- a labeler who closes the tab -------------------------------------------------------------


def steps_of(n: int) -> list[str]:
    return [f"Step {i} of solution {n}." for i in range(3)] + ["# Answer\n\n4"]


@pytest.fixture
def three_solutions(db) -> list[Solution]:
    problem = Problem.objects.create(text="What is 2+2?", answer="4")
    return [
        Solution.objects.create(problem=problem, steps=steps_of(n), answer="4", is_correct=True)
        for n in range(3)
    ]


def open_next(client) -> LabelingSession:
    response = client.get(reverse("label-next"))
    assert response.status_code == 302, response.content
    page = client.get(response["Location"])
    assert page.status_code == 200
    return page.context["session"]


def rate(client, session: LabelingSession, step: int, rating: int):
    return client.post(
        reverse("label-rate", args=[session.pk]), {"step_index": step, "rating": rating}
    )


def lease_runs_out(session: LabelingSession) -> None:
    """What the clock does to a session nobody touches: it falls behind its lease."""
    gone = LEASE + timedelta(minutes=1)
    LabelingSession.objects.filter(pk=session.pk).update(
        started_at=session.started_at - gone,
        last_activity_at=session.last_activity_at - gone,
        lease_expires_at=session.lease_expires_at - gone,
    )


@pytest.mark.django_db
def test_a_closed_tab_loses_nothing_and_its_solution_goes_to_the_next_labeler(
    three_solutions, client, make_user
):
    first, second, third = three_solutions
    ann = make_user("ann", "annotator")
    bob = make_user("bob", "annotator")
    client.force_login(ann)

    done = open_next(client)
    assert done.solution == first
    for step in range(4):
        assert rate(client, done, step, 1).status_code == 200
    client.post(reverse("label-submit", args=[done.pk]), {"finish_reason": "solution"})

    # Ann rates two steps of the next solution, then closes the tab: no renewals, no submit.
    left = open_next(client)
    assert left.solution == second
    assert rate(client, left, 0, 1).status_code == 200
    assert rate(client, left, 1, 0).status_code == 200
    lease_runs_out(left)

    client.force_login(bob)
    taken = open_next(client)
    assert taken.solution == second and taken.queue == "leftover"
    page = client.get(reverse("label-session", args=[taken.pk]))
    assert page.context["current"] == "s0", "Bob starts fresh, not on Ann's ratings"

    # Nothing Ann rated was deleted: her ratings stay with her session, which says it lapsed.
    client.force_login(ann)
    mine = {s["id"]: s for s in client.get("/api/sessions/").json()["results"]}
    assert set(mine) == {done.pk, left.pk}
    assert mine[left.pk]["abandoned_at"] and mine[left.pk]["submitted_at"] is None
    ratings = [(s["index"], s["ratings"][0]["rating"]) for s in mine[left.pk]["step_labels"]]
    assert sorted(ratings) == [(0, 1), (1, 0)]
    assert mine[done.pk]["finish_reason"] == "solution" and mine[done.pk]["abandoned_at"] is None
    assert len(mine[done.pk]["step_labels"]) == 4

    # Her old tab is told why it can no longer rate, and its ratings stay as they were.
    stale = rate(client, left, 2, 1)
    assert stale.status_code == 409 and "lease ran out" in stale.content.decode()
    submit = client.post(
        reverse("label-submit", args=[left.pk]), {"finish_reason": "give_up", "reason": "x"}
    )
    assert submit.status_code == 409
    assert StepRating.objects.filter(step__session=left).count() == 2

    # Coming back, Ann gets new work without an error: not her finished solution, not Bob's.
    back = open_next(client)
    assert back.solution == third and back.queue == "leftover"

    # The export holds finished labels: Ann's complete one; an abandoned half label is not a
    # PRM800K record (PRM800K has no finish reason for "left").
    client.force_login(make_user("ada", "admin"))
    response = client.get(
        reverse("export-labels"), {"download": "1", "include_quality_control": "on"}
    )
    lines = [json.loads(line) for line in b"".join(response.streaming_content).splitlines()]
    exported = [line["question"]["pre_generated_steps"] for line in lines]
    assert exported == [first.steps]
    assert lines[0]["label"]["finish_reason"] == "solution"


@pytest.mark.django_db
def test_a_lapsed_lease_nobody_took_resumes_with_every_rating(three_solutions, client, make_user):
    client.force_login(make_user("ann", "annotator"))
    left = open_next(client)
    rate(client, left, 0, 1)
    rate(client, left, 1, 0)
    lease_runs_out(left)

    back = open_next(client)

    assert back.pk == left.pk
    page = client.get(reverse("label-session", args=[back.pk]))
    assert [step.rating for step in page.context["steps"]] == [1, 0, None]
    assert page.context["current"] == "s2"
    assert rate(client, back, 2, 1).status_code == 200


# --- a worker killed while it publishes the checkpoint ---------------------------------------

# The checkpoint's files are half in the store, its manifest not, when the worker dies.
KILLED_WHILE_PUBLISHING = (
    DIE_AFTER_TWO_UPLOADS
    + """
from trainer.training import runs
runs.execute_training_run(run_id=int(sys.argv[1]), worker_hostname="gpu-a")
"""
)


@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_while_publishing_its_checkpoint_records_no_version(
    settings, tmp_path, _artifact_store
):
    import subprocess
    import sys

    from conftest import ROOT, database_url

    label_demo_solutions(problems=4)
    run = runs.request_training_run(user=None, params=TINY_RUN, enqueue=False)
    env = dict(
        os.environ,
        DATABASE_URL=database_url(),
        STORE_URL=str(_artifact_store),
        STEPWISE_VAR_DIR=str(tmp_path / "gpu-a"),
        PYTHONPATH=str(ROOT),
        DJANGO_SETTINGS_MODULE="annotate.settings",
    )
    done = subprocess.run(
        [sys.executable, "-c", KILLED_WHILE_PUBLISHING, str(run.pk)],
        cwd=ROOT,
        env=env,
        timeout=300,
    )
    assert done.returncode == -signal.SIGKILL

    # Half the files are in the store, no manifest: nothing names them, nothing can read them.
    uploaded = [p for p in _artifact_store.rglob("*") if p.is_file()]
    assert uploaded and not any(p.name.endswith(".manifest.json") for p in uploaded)
    assert not ModelVersion.objects.exists()
    # The dead worker's run is failed by the usual recovery, and no version ever appears.
    runs.mark_stale_runs_failed(older_than=timezone.now() + timedelta(seconds=1))
    run.refresh_from_db()
    assert run.status == "failed" and "publishing it to checkpoints/run-" in run.log_tail
    assert not ModelVersion.objects.exists()
