"""Races of the model side, each forced at the moment that used to break it.

Two requests at once must leave a state that the same two made one after the other could have
left: publishing generations, activating model versions, cancelling a run that is saving its
checkpoint or finishing its last item. `Meeting` (labeling/tests/interleave.py) holds each
racer between its read and its write; the database now makes the second one wait or refuse.
"""

import sys
import threading
from functools import partial
from pathlib import Path

import celery.loaders.base
import pytest
import requests
from celery.app.task import Task

import trainer
from core import queueing
from generators import GeneratorSpec, SamplingSettings
from labeling.models import Generation, Problem, Solution
from labeling.tests.interleave import Meeting, require_postgresql, run_in_threads
from labeling.tokens import create_api_token
from trainer import pipeline
from trainer.models import ModelVersion, SamplingRun, TrainingRun
from trainer.sampling import services as sampling
from trainer.selection import services as selection
from trainer.tests.labels import label_demo_solutions
from trainer.training import model_versions, runs
from trainer.training.ml.prm import PRM

TINY = {"epochs": 1, "batch_size": 8, "eval_fraction": 0.3}
SCORE_TASK = "trainer.tasks.score_task"


@pytest.fixture
def queued(monkeypatch):
    """Tasks queued, as (name, args), instead of sent: the broker is not what is tested."""
    calls = []

    def record(task, args=None, kwargs=None, **options):
        calls.append((task.name, tuple(args or ())))

    monkeypatch.setattr(Task, "apply_async", record)
    return calls


@pytest.fixture
def researcher_token(make_user) -> str:
    return create_api_token(user=make_user("rita", "researcher")).token


# --- publishing generations -------------------------------------------------------------------


@pytest.fixture
def pool(transactional_db, make_solution):
    """Four problems, three unlabeled solutions each (one of them wrong)."""
    for p in range(4):
        problem = Problem.objects.create(text=f"What is {p} + 1?", answer=str(p + 1))
        for n in range(3):
            make_solution(problem, n, is_correct=n != 0)


PUBLISH = {"strategy": "uniform", "batch_size": 3, "per_problem_cap": 1}


def publish_two_at_once(monkeypatch, *params: dict):
    """Publish with each `params` in a thread of its own, the first to read the pool holding
    its commit until the other has read the pool too (or waits for a lock), the second writing
    only once the first has committed: the interleaving that once made both publish from
    one reading of the pool."""
    meeting = Meeting(2)
    first_committed = threading.Event()
    arrivals = []
    order = threading.Lock()
    real_shortlist = selection.shortlist

    def shortlist_then_wait(*args, **kwargs):
        listed = real_shortlist(*args, **kwargs)  # the pool is read
        with order:
            arrivals.append(threading.current_thread())
            first = len(arrivals) == 1
        meeting.arrive()
        if not first:
            assert first_committed.wait(timeout=120), "the first publication never committed"
        return listed

    monkeypatch.setattr(selection, "shortlist", shortlist_then_wait)

    def publisher(kwargs):
        def publish():
            try:
                return selection.select_generation(model_version=None, **kwargs)
            finally:
                if arrivals and arrivals[0] is threading.current_thread():
                    first_committed.set()

        return publish

    results = run_in_threads(*(publisher(p) for p in params))
    return results, meeting


def selection_state() -> list[tuple]:
    return list(
        Solution.objects.order_by("pk").values_list(
            "pk", "generation__number", "selection_reason", "is_quality_control", "priority"
        )
    )


def test_two_publications_at_once_end_as_if_one_came_after_the_other(pool, monkeypatch):
    """Two researchers publish the next generation at the same moment. Each generation keeps
    the quality-control solutions it records (once, the second took the first's into its own
    batch, and they were never served), and the result is the one the two give one after the
    other."""
    require_postgresql()
    params = {**PUBLISH, "quality_control_count": 2}
    (one, two), meeting = publish_two_at_once(monkeypatch, params, params)

    assert sorted([one.number, two.number]) == [1, 2]
    for generation in Generation.objects.all():
        held = Solution.objects.filter(generation=generation, is_quality_control=True)
        assert held.count() == generation.params["selected"]["quality_control"] == 2
    assert meeting.outcomes[0] == "blocked", "the second publication did not wait"

    raced = selection_state()
    Generation.objects.all().delete()
    Solution.objects.update(
        selection_reason="", is_quality_control=False, priority=0.0, labels_wanted=1
    )
    monkeypatch.undo()
    for _ in range(2):
        selection.select_generation(model_version=None, **params)
    assert raced == selection_state()


def test_a_redelivered_selection_racing_its_original_publishes_one_generation(pool, monkeypatch):
    """The broker hands the same selection message to two workers at once: one generation,
    which both deliveries return."""
    require_postgresql()
    params = {**PUBLISH, "request_id": "task-1"}
    (one, two), _ = publish_two_at_once(monkeypatch, params, params)

    assert one.pk == two.pk
    assert Generation.objects.count() == 1


# --- activating model versions ----------------------------------------------------------------


def activate(live_server, token: str, version: ModelVersion):
    return requests.post(
        f"{live_server.url}/api/model-versions/{version.pk}/activate/",
        headers={"Authorization": f"Token {token}"},
        timeout=60,
    )


@pytest.fixture
def versions(transactional_db):
    ModelVersion.objects.create(name="old", checkpoint="/m/old", is_active=True)
    return [ModelVersion.objects.create(name=name, checkpoint=f"/m/{name}") for name in "ab"]


def test_two_activations_at_once_take_turns_and_the_later_one_wins(
    live_server, researcher_token, versions, queued, monkeypatch
):
    """Two researchers activate different versions at the same moment: both are answered
    200, the one activated last is active, and its rescoring is queued."""
    require_postgresql()
    meeting = Meeting(2)
    real_activate = model_versions._activate

    def activate_after_meeting(version):
        meeting.arrive()  # each has read that its version is not active yet
        return real_activate(version)

    monkeypatch.setattr(model_versions, "_activate", activate_after_meeting)
    answers = run_in_threads(
        *(partial(activate, live_server, researcher_token, v) for v in versions)
    )

    assert [a.status_code for a in answers] == [200, 200], [a.text for a in answers]
    active = ModelVersion.objects.get(is_active=True)
    other = ModelVersion.objects.get(pk=({v.pk for v in versions} - {active.pk}).pop())
    assert active.promoted_at > other.promoted_at, "an earlier activation won"
    assert (SCORE_TASK, (active.pk,)) in queued
    assert meeting.outcomes[0] == "blocked", "the second activation did not wait"


@pytest.fixture
def fresh_task_registry(monkeypatch):
    """The web process before it queued any task: trainer.tasks not imported, its tasks
    unknown to Celery (restored afterwards)."""
    from annotate.celery import app

    for name in [name for name in app.tasks if name.startswith("trainer.tasks.")]:
        monkeypatch.delitem(app.tasks, name)
    monkeypatch.delitem(sys.modules, "trainer.tasks", raising=False)
    monkeypatch.delattr(trainer, "tasks", raising=False)


def test_the_first_tasks_two_threads_queue_are_found_and_neither_answers_500(
    live_server, researcher_token, versions, fresh_task_registry, queued, monkeypatch
):
    """Two activations at once in a web process that has not queued a task yet: each one's
    rescoring finds its task. (Celery's autodiscovery, busy importing for the first thread,
    answered the second with nothing: NotRegistered, a 500 after the activation committed,
    and that version's rescoring never queued.)"""
    require_postgresql()
    second_done = threading.Event()
    entered = []
    real_queue_task = queueing.queue_task
    real_find = celery.loaders.base.find_related_module

    def queue_task(name, args=(), **kwargs):
        entered.append(name)
        try:
            return real_queue_task(name, args, **kwargs)
        finally:
            if len(entered) > 1:
                second_done.set()

    def slow_find(package, related_name):
        # Importing the first thread's tasks takes until the second has queued (or failed).
        second_done.wait(timeout=10)
        return real_find(package, related_name)

    monkeypatch.setattr(queueing, "queue_task", queue_task)
    monkeypatch.setattr(celery.loaders.base, "find_related_module", slow_find)
    answers = run_in_threads(
        *(partial(activate, live_server, researcher_token, v) for v in versions)
    )

    assert [a.status_code for a in answers] == [200, 200], [a.text[-300:] for a in answers]
    active = ModelVersion.objects.get(is_active=True)
    assert sorted(args for name, args in queued if name == SCORE_TASK) == sorted(
        (v.pk,) for v in versions
    )
    assert active.pk in {v.pk for v in versions}


# --- cancelling a run at its end --------------------------------------------------------------


@pytest.fixture
def training(settings, tmp_path, transactional_db) -> Path:
    settings.STORE_SCRATCH_DIR = tmp_path / "models"
    settings.PRM_AUTO_PROMOTE = True
    settings.PRM_PROMOTE_METRIC = "step_auroc"
    label_demo_solutions(problems=4)
    return settings.STORE_SCRATCH_DIR


def test_a_cancel_during_the_checkpoint_save_wins(
    training, client, researcher, monkeypatch, settings
):
    """The researcher cancels while the checkpoint is being written: the cancel is accepted,
    so the run ends cancelled, with no model version and no checkpoint left on disk."""
    require_postgresql()
    run = runs.request_training_run(user=researcher, params=TINY, enqueue=False)
    saving, answered = threading.Event(), threading.Event()
    real_save = PRM.save

    def slow_save(prm, path):
        saving.set()
        assert answered.wait(timeout=120), "the cancel was never answered"
        return real_save(prm, path)

    monkeypatch.setattr(PRM, "save", slow_save)

    def work():
        return runs.execute_training_run(run_id=run.pk, worker_hostname="celery@test")

    def cancel():
        assert saving.wait(timeout=600), "the run never reached its save"
        try:
            return client.post(f"/api/training-runs/{run.pk}/cancel/")
        finally:
            answered.set()

    finished, answer = run_in_threads(work, cancel, timeout=900)

    assert answer.status_code == 200 and answer.json()["cancel_requested"] is True
    assert finished.status == TrainingRun.Status.CANCELLED, finished.error
    assert not ModelVersion.objects.exists()
    assert not (training / f"run-{run.pk}").exists()
    assert [p.name for p in training.iterdir()] == []
    # Published before the cancel won, and removed from the store once it had.
    store_dir = Path(settings.STORE_URL)
    assert not [p for p in store_dir.rglob("*.manifest.json")]
    assert "cancelled while the checkpoint was saved" in finished.log_tail


def test_a_cancel_after_the_run_passed_its_point_of_no_return_is_refused_as_too_late(
    training, client, researcher, monkeypatch
):
    """A cancel that comes while the finished run records its model version waits for it,
    and is told it came too late: the run succeeded, its version stands."""
    require_postgresql()
    run = runs.request_training_run(user=researcher, params=TINY, enqueue=False)
    recording = threading.Event()
    meeting = Meeting(2)
    real_record = model_versions.record_model_version

    def record_when_the_cancel_waits(**kwargs):
        recording.set()
        meeting.arrive()  # the cancel waits for the run's row
        return real_record(**kwargs)

    monkeypatch.setattr(model_versions, "record_model_version", record_when_the_cancel_waits)

    def work():
        return runs.execute_training_run(run_id=run.pk, worker_hostname="celery@test")

    def cancel():
        assert recording.wait(timeout=600), "the run never recorded its version"
        return client.post(f"/api/training-runs/{run.pk}/cancel/")

    finished, answer = run_in_threads(work, cancel, timeout=900)

    assert answer.status_code == 409
    assert "Too late to cancel" in answer.json()["detail"]
    assert finished.status == TrainingRun.Status.SUCCEEDED and not finished.cancel_requested
    assert ModelVersion.objects.get().training_run_id == run.pk
    assert meeting.outcomes == ["blocked"]


class LastItemCancelled:
    """A generator whose last call is answered while the researcher cancels the run."""

    spec = GeneratorSpec(backend="openai", model="scripted", base_url="http://scripted.invalid/v1")

    def __init__(self, *, run_id: int, calls: int) -> None:
        self.run_id, self.calls, self.made = run_id, calls, 0
        self.answer: SamplingRun | None = None

    def generate(self, *, requests, settings):
        self.made += 1
        if self.made == self.calls:
            self.answer = sampling.cancel_sampling_run(run_id=self.run_id)
        return [f"Step {r.seed}.\n\n# Answer\n\n5" for r in requests]

    def close(self) -> None:
        pass


@pytest.mark.django_db
def test_a_sampling_run_cancelled_during_its_last_item_ends_cancelled_and_selects_nothing(
    monkeypatch, django_capture_on_commit_callbacks
):
    """A cancel answered "stopping after the current item" while that item is the last one:
    the run ends cancelled, not succeeded, and the selection it was to chain is not queued."""
    ModelVersion.objects.create(name="v", checkpoint="/m/v", is_active=True)
    sent = []
    monkeypatch.setattr(pipeline, "send_task", lambda name, args, **kw: sent.append(name))
    problems = [Problem.objects.create(text=f"What is {n} + 5?", answer="5") for n in range(2)]
    run = sampling.request_sampling_run(
        user=None,
        purpose="solutions",
        generator=LastItemCancelled.spec,
        settings=SamplingSettings(max_tokens=64),
        samples=1,
        problem_ids=[p.pk for p in problems],
        solution_ids=None,
        then_select={"batch_size": 3},
        enqueue=False,
    )
    generator = LastItemCancelled(run_id=run.pk, calls=len(problems))
    monkeypatch.setattr(sampling, "open_generator", lambda spec: generator)
    with django_capture_on_commit_callbacks(execute=True):
        finished = sampling.execute_sampling_run(run_id=run.pk, worker_hostname="test")

    assert generator.answer.cancel_requested and generator.answer.status == "running"
    assert finished.status == "cancelled"
    # No selection; what it stored is scored, as anything new in the pool (issue 43, item 3).
    assert sent == [pipeline.SCORE_TASK]
    # The items done stay done: a resumed run has nothing left and then succeeds.
    assert finished.stored == 2
