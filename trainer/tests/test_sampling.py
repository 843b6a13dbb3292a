"""Sampling runs: a generator's solutions graded into the pool, deduplicated, counted; cancel
and resume; the page and the API, who may use them and what they refuse.

The feature is proved with the real SmolLM2 through both backends (`generator_spec`); a small
scripted generator stands in only where a rule needs exact control of what is written.
"""

from unittest import mock

import pytest
from django.urls import reverse
from kombu.exceptions import OperationalError

from generators import GeneratorSpec, GeneratorUnavailable, SamplingSettings
from labeling.grading import grade_answer
from labeling.models import Problem, Solution
from trainer.models import SamplingRun, SamplingRunItem
from trainer.sampling import services as sampling

# Small: SmolLM2 on a shared CPU writes a few dozen tokens a second.
REAL_SETTINGS = SamplingSettings(temperature=0.7, top_p=0.95, max_tokens=96, seed=7)
FAKE = GeneratorSpec(backend="openai", model="scripted", base_url="http://scripted.invalid/v1")


@pytest.fixture(autouse=True)
def scripted_url_allowed(settings):
    """FAKE's URL resolves nowhere: the scripted generator stands in for it. The operator's
    allow-list names it, as a URL a researcher may pick."""
    settings.GENERATOR_ALLOWED_BASE_URLS = [FAKE.base_url]


def make_problems(n: int = 2) -> list[Problem]:
    texts = ["What is $2 + 3$?", "What is $4 \\cdot 5$?", "What is $9 - 6$?", "What is $8 / 2$?"]
    answers = ["5", "20", "3", "4"]
    return [
        Problem.objects.create(text=texts[i % 4] + " " * (i // 4), answer=answers[i % 4])
        for i in range(n)
    ]


class Scripted:
    """A generator that writes what `reply(problem_text, seed)` says; records every call."""

    def __init__(self, reply, *, fail_on_call: int | None = None) -> None:
        self.spec = FAKE
        self.reply = reply
        self.calls = 0
        self.fail_on_call = fail_on_call

    def generate(self, *, requests, settings):
        self.calls += 1
        if self.calls == self.fail_on_call:
            raise GeneratorUnavailable("The generator at scripted.invalid did not answer.")
        return [self.reply(r.messages[-1]["content"], r.seed) for r in requests]

    def close(self) -> None:
        pass


@pytest.fixture
def scripted(monkeypatch):
    """`scripted(reply, **options)`: runs use that generator instead of a real one."""

    def install(reply, **options) -> Scripted:
        generator = Scripted(reply, **options)
        monkeypatch.setattr(sampling, "open_generator", lambda spec: generator)
        return generator

    return install


def request(problems, *, samples=2, generator=FAKE, settings=None, user=None, **extra):
    return sampling.request_sampling_run(
        user=user,
        purpose="solutions",
        generator=generator,
        settings=settings or SamplingSettings(max_tokens=64),
        samples=samples,
        problem_ids=[p.pk for p in problems],
        solution_ids=None,
        then_select=extra.pop("then_select", None),
        enqueue=False,
        **extra,
    )


def execute(run: SamplingRun) -> SamplingRun:
    return sampling.execute_sampling_run(run_id=run.pk, worker_hostname="test")


def items_done(run: SamplingRun) -> list[int]:
    return list(
        SamplingRunItem.objects.filter(run=run, done_at__isnull=False)
        .order_by("position")
        .values_list("position", flat=True)
    )


# --- the real generator -----------------------------------------------------------------------


@pytest.mark.django_db
def test_a_run_puts_the_real_generators_graded_solutions_into_the_pool(generator_spec, settings):
    # `transformers serve` reseeds one global generator per request: requests in flight
    # together draw from each other's seeds, so the same seeds give the same samples only one
    # request at a time (vLLM seeds each request on its own).
    settings.GENERATOR_CONCURRENCY = 1
    problems = make_problems(2)
    run = request(problems, samples=2, generator=generator_spec, settings=REAL_SETTINGS)
    assert run.status == "queued" and items_done(run) == []

    run = execute(run)

    assert run.status == "succeeded", run.error
    assert items_done(run) == [0, 1]
    assert sampling.progress(run) == {"done": 2, "total": 2, "percent": 100}
    added = list(Solution.objects.filter(sampling_run=run).select_related("problem"))
    # Every sample is accounted for: stored, or skipped with its reason.
    assert run.stored == len(added)
    assert run.stored + sum(run.skipped.values()) == 4
    assert set(run.skipped) <= {"duplicate", "unfinished"}
    for solution in added:
        assert solution.source == generator_spec.source
        assert solution.steps[-1] == f"# Answer\n\n{solution.answer}" and solution.answer
        assert solution.is_correct == grade_answer(solution.answer, solution.problem.answer)
        assert solution.meta["sampling"]["sample"] in (0, 1)
    # The run keeps the generator and settings every solution was drawn with.
    assert run.generator == generator_spec.to_dict()
    assert run.sampling == REAL_SETTINGS.to_dict()
    stored_per_item = SamplingRunItem.objects.filter(run=run).values_list("stored", flat=True)
    assert sum(stored_per_item) == run.stored

    # The first problem again draws the same samples (same seeds): all already in the pool.
    first = SamplingRunItem.objects.get(run=run, position=0)
    again = execute(
        request(problems[:1], samples=2, generator=generator_spec, settings=REAL_SETTINGS)
    )
    assert again.status == "succeeded", again.error
    assert again.stored == 0
    assert again.skipped.get("duplicate", 0) == first.stored


@pytest.mark.django_db
def test_a_cancelled_real_run_resumes_and_does_only_the_items_left(generator_spec, monkeypatch):
    problems = make_problems(3)
    run = request(problems, samples=1, generator=generator_spec, settings=REAL_SETTINGS)
    calls = []
    real = sampling._sample_item

    def cancel_after_the_first(**kwargs):
        real(**kwargs)
        calls.append(kwargs["item"].position)
        if len(calls) == 1:
            sampling.cancel_sampling_run(run_id=run.pk)

    monkeypatch.setattr(sampling, "_sample_item", cancel_after_the_first)
    run = execute(run)
    assert run.status == "cancelled"
    assert items_done(run) == [0]
    first = set(Solution.objects.filter(sampling_run=run).values_list("pk", flat=True))

    run = sampling.resume_sampling_run(run_id=run.pk, enqueue=False)
    assert run.status == "queued" and not run.cancel_requested
    run = execute(run)
    assert run.status == "succeeded", run.error
    assert calls == [0, 1, 2]  # item 0 was not sampled again
    assert items_done(run) == [0, 1, 2]
    assert first <= set(Solution.objects.filter(sampling_run=run).values_list("pk", flat=True))
    assert run.stored == Solution.objects.filter(sampling_run=run).count()


# --- rules, with a scripted generator ---------------------------------------------------------


@pytest.mark.django_db
def test_duplicates_in_the_pool_and_in_the_batch_are_skipped_and_unfinished_samples_dropped(
    scripted, make_solution
):
    (problem,) = make_problems(1)
    make_solution(problem, steps=["Add: $2 + 3 = 5$.", "# Answer\n\n5"], answer="5")

    def reply(text, seed):
        # seed 0: what the pool already holds; 1 and 2: one new solution twice; 3: no answer.
        return {
            0: "Add: $2 + 3 = 5$.\n\n# Answer\n\n5",
            1: "Count up from 2: 3, 4, 5.\n\n# Answer\n\n6",
            2: "Count up from 2: 3, 4, 5.\n\n# Answer\n\n6",
        }.get(seed, "Let me think about this for a very long")

    scripted(reply)
    run = execute(request([problem], samples=4, settings=SamplingSettings(seed=0)))

    assert run.status == "succeeded"
    assert run.stored == 1
    assert run.skipped == {"duplicate": 2, "unfinished": 1}
    (added,) = Solution.objects.filter(sampling_run=run)
    assert added.answer == "6" and added.is_correct is False and added.source == "scripted"
    assert added.meta == {"sampling": {"seed": 1, "sample": 1}}
    assert Solution.objects.filter(problem=problem).count() == 2


@pytest.mark.django_db
def test_a_generator_that_fails_fails_the_run_and_keeps_the_items_done(scripted):
    problems = make_problems(3)
    generator = scripted(lambda text, seed: f"Step {seed}.\n\n# Answer\n\n{seed}", fail_on_call=2)
    run = execute(request(problems, samples=2))

    assert run.status == "failed"
    assert "did not answer" in run.error
    assert items_done(run) == [0]
    assert run.stored == 2 and Solution.objects.filter(sampling_run=run).count() == 2

    generator.fail_on_call = None
    run = execute(sampling.resume_sampling_run(run_id=run.pk, enqueue=False))
    assert run.status == "succeeded"
    assert items_done(run) == [0, 1, 2]
    # Item p draws seeds p*2, p*2+1 whichever attempt reaches it: six distinct solutions.
    seeds = sorted(s.meta["sampling"]["seed"] for s in Solution.objects.filter(sampling_run=run))
    assert seeds == [0, 1, 2, 3, 4, 5]


@pytest.mark.django_db
def test_cancel_and_resume_refuse_what_the_status_does_not_allow(scripted):
    scripted(lambda text, seed: "x\n\n# Answer\n\n1")
    run = request(make_problems(1))
    with pytest.raises(sampling.SamplingRefused):
        sampling.resume_sampling_run(run_id=run.pk, enqueue=False)
    run = sampling.cancel_sampling_run(run_id=run.pk)
    assert run.status == "cancelled"
    with pytest.raises(sampling.SamplingRefused):
        sampling.cancel_sampling_run(run_id=run.pk)
    run = execute(sampling.resume_sampling_run(run_id=run.pk, enqueue=False))
    assert run.status == "succeeded"
    with pytest.raises(sampling.SamplingRefused):
        sampling.resume_sampling_run(run_id=run.pk, enqueue=False)


@pytest.mark.django_db
def test_a_stale_run_is_failed_with_a_resumable_message():
    run = request(make_problems(1))
    SamplingRun.objects.filter(pk=run.pk).update(
        status="running", worker_hostname="gpu-1@host", worker_pid=2**22 + 12345
    )
    assert (
        sampling.mark_stale_sampling_runs_failed(
            older_than=run.created_at, worker_hostname="other@host"
        )
        == []
    )
    failed = sampling.mark_stale_sampling_runs_failed(
        older_than=run.created_at, worker_hostname="gpu-1@host"
    )
    assert failed == [run.pk]
    run.refresh_from_db()
    assert run.status == "failed" and "the worker stopped; resume to continue" in run.error


# --- the page and the API ---------------------------------------------------------------------


@pytest.mark.django_db
def test_annotators_cannot_see_or_start_sampling_runs(client, make_user):
    run = request(make_problems(1))
    client.force_login(make_user("ann", "annotator"))
    assert client.get(reverse("sampling-list")).status_code == 403
    assert client.get(reverse("sampling-detail", args=[run.pk])).status_code == 403
    assert client.post(reverse("sampling-cancel", args=[run.pk])).status_code == 403
    assert client.get("/api/sampling-runs/").status_code == 403
    assert (
        client.post("/api/sampling-runs/", {}, content_type="application/json").status_code == 403
    )
    assert client.post(f"/api/sampling-runs/{run.pk}/cancel/").status_code == 403
    assert SamplingRun.objects.get(pk=run.pk).status == "queued"


@pytest.mark.django_db
def test_the_page_starts_a_run_and_shows_its_progress(
    client, make_user, scripted, django_capture_on_commit_callbacks
):
    scripted(lambda text, seed: f"Step {seed}.\n\n# Answer\n\n5")
    problems = make_problems(2)
    client.force_login(make_user("rita", "researcher"))
    page = client.get(reverse("sampling-list")).content.decode()
    assert "Start sampling run" in page

    form = {
        "purpose": "solutions",
        "problem_ids": f"{problems[0].pk}, {problems[1].pk}",
        "limit": 20,
        "samples": 2,
        "backend": "openai",
        "model": "scripted",
        "base_url": "http://scripted.invalid/v1",
        "temperature": 0.5,
        "top_p": 0.9,
        "max_tokens": 64,
        "seed": 3,
    }
    with django_capture_on_commit_callbacks(execute=False) as queued:
        response = client.post(reverse("sampling-list"), form)
    assert response.status_code == 302
    run = SamplingRun.objects.get()
    assert run.sampling == {"temperature": 0.5, "top_p": 0.9, "max_tokens": 64, "seed": 3}
    assert len(queued) == 1
    page = client.get(response.url).content.decode()
    assert "0 of 2 items done" in page and "hx-get" in page

    execute(run)
    page = client.get(response.url).content.decode()
    assert "2 of 2 items done" in page
    assert "4 solutions added to the pool" in page
    assert "Solutions it added (4)" in page
    assert "hx-get" not in page  # no polling once the run is over
    assert "temperature" in page and "scripted" in page


@pytest.mark.django_db
def test_the_page_refuses_bad_settings_with_400(client, make_user):
    problems = make_problems(1)
    client.force_login(make_user("rita", "researcher"))
    base = {
        "purpose": "solutions",
        "limit": 5,
        "samples": 2,
        "backend": "openai",
        "model": "m",
        "base_url": FAKE.base_url,
        "temperature": 0.7,
        "top_p": 0.9,
        "max_tokens": 64,
        "seed": 0,
    }
    for bad in (
        {"problem_ids": "999999"},
        {"problem_ids": "a, b"},
        {"problem_ids": str(2**70)},
        {"problem_ids": str(problems[0].pk), "temperature": 5},
        {"problem_ids": str(problems[0].pk), "backend": "local", "base_url": ""},
        {"problem_ids": str(problems[0].pk), "samples": 5000},
        {"purpose": "rollouts"},
    ):
        response = client.post(reverse("sampling-list"), {**base, **bad})
        assert response.status_code == 400, bad
    assert not SamplingRun.objects.exists()


@pytest.mark.django_db
def test_the_api_starts_watches_cancels_and_resumes_a_run(
    client, make_user, django_capture_on_commit_callbacks
):
    problems = make_problems(3)
    Problem.objects.filter(pk=problems[2].pk).update(split="test")
    client.force_login(make_user("rita", "researcher"))
    body = {
        "purpose": "solutions",
        "problems": {"split": "test"},
        "samples": 2,
        "generator": FAKE.to_dict(),
        "sampling": {"temperature": 0.2, "max_tokens": 32},
    }
    with (
        mock.patch("core.jobs.queue_task") as queue,
        django_capture_on_commit_callbacks(execute=True),
    ):
        response = client.post("/api/sampling-runs/", body, content_type="application/json")
    assert response.status_code == 201, response.content
    data = response.json()
    queue.assert_called_once_with(sampling.SAMPLING_TASK, (data["id"],), task_id=mock.ANY)
    assert data["status"] == "queued" and data["progress"] == {"done": 0, "total": 1, "percent": 0}
    assert data["sampling"]["temperature"] == 0.2 and data["generator"]["model"] == "scripted"
    assert SamplingRunItem.objects.get(run_id=data["id"]).problem_id == problems[2].pk

    response = client.post(f"/api/sampling-runs/{data['id']}/cancel/")
    assert response.status_code == 200 and response.json()["status"] == "cancelled"
    assert client.post(f"/api/sampling-runs/{data['id']}/cancel/").status_code == 409
    with mock.patch("core.jobs.queue_task"):
        response = client.post(f"/api/sampling-runs/{data['id']}/resume/")
    assert response.status_code == 200 and response.json()["status"] == "queued"
    assert client.get(f"/api/sampling-runs/{data['id']}/").json()["id"] == data["id"]
    assert [r["id"] for r in client.get("/api/sampling-runs/").json()["results"]] == [data["id"]]


@pytest.mark.django_db
def test_the_api_records_the_selection_a_run_chains_with_its_settings_filled_in(
    client, make_user, settings
):
    settings.SELECTION_PER_PROBLEM_CAP = 7
    problem = make_problems(1)[0]
    client.force_login(make_user("rita", "researcher"))
    body = {
        "problem_ids": [problem.pk],
        "samples": 2,
        "generator": FAKE.to_dict(),
        "then_select": {"batch_size": 3},
    }
    with mock.patch("core.jobs.queue_task"):
        response = client.post("/api/sampling-runs/", body, content_type="application/json")
    assert response.status_code == 201, response.content
    then_select = SamplingRun.objects.get().then_select
    assert then_select["batch_size"] == 3 and then_select["per_problem_cap"] == 7


@pytest.mark.django_db
def test_the_api_answers_400_for_bad_ids_and_settings_never_500(client, make_user):
    problem = make_problems(1)[0]
    solution = Solution.objects.create(
        problem=problem, steps=["# Answer\n\n5"], answer="5", is_correct=True
    )
    client.force_login(make_user("rita", "researcher"))
    good = {"problem_ids": [problem.pk], "samples": 2, "generator": FAKE.to_dict()}
    for bad in (
        {"problem_ids": [987654]},
        {"problem_ids": ["x"]},
        {"samples": 0},
        {"samples": 2000},
        {"generator": {"backend": "gpt"}},
        {"generator": {"backend": "local", "model": "not-registered"}},
        {"sampling": {"temperature": -1}},
        {"sampling": {"beam": 4}},
        {"purpose": "rollouts"},
        {"purpose": "rollouts", "problem_ids": [], "solution_ids": [solution.pk], "samples": 65},
        {"problem_ids": [], "problems": {"split": "nowhere"}},
        {"then_select": {"strategy": "best"}},
        {"then_select": {"batch_size": -1}},
        {"then_select": {"batch_size": "many", "wrong_share": [1]}},
        {"problem_ids": [2**70]},
    ):
        response = client.post(
            "/api/sampling-runs/", {**good, **bad}, content_type="application/json"
        )
        assert response.status_code == 400, (bad, response.status_code, response.content)
    assert not SamplingRun.objects.exists()
    assert client.get("/api/sampling-runs/4242/").status_code == 404


@pytest.mark.django_db(transaction=True)
def test_a_broker_that_is_down_answers_503_and_records_the_run_failed(
    client, make_user, monkeypatch
):
    # A real commit, as in production: the task is queued when the run's row is committed.
    def down(*args, **kwargs):
        raise OperationalError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    monkeypatch.setattr("core.jobs.queue_task", down)
    problem = make_problems(1)[0]
    client.force_login(make_user("rita", "researcher"))
    body = {"problem_ids": [problem.pk], "samples": 1, "generator": FAKE.to_dict()}
    response = client.post("/api/sampling-runs/", body, content_type="application/json")
    assert response.status_code == 503
    assert "broker is unreachable" in response.json()["detail"]
    run = SamplingRun.objects.get()
    assert run.status == "failed"  # and resumable once the broker is back
    monkeypatch.setattr("core.jobs.queue_task", lambda *a, **k: None)
    response = client.post(f"/api/sampling-runs/{run.pk}/resume/")
    assert response.status_code == 200 and response.json()["status"] == "queued"


@pytest.mark.django_db
def test_a_succeeded_run_that_asked_for_it_queues_the_next_generations_selection(
    scripted, monkeypatch, django_capture_on_commit_callbacks
):
    from trainer import pipeline
    from trainer.models import ModelVersion
    from trainer.selection.services import SelectionParams

    version = ModelVersion.objects.create(name="v", checkpoint="/m/v", is_active=True)
    queued = []
    monkeypatch.setattr(pipeline, "send_task", lambda name, args, **kw: queued.append((name, args)))
    scripted(lambda text, seed: f"Step {seed}.\n\n# Answer\n\n5")
    # As the form and the API hand it over: checked, with the SELECTION_* settings filled in.
    then_select = SelectionParams.from_dict({"batch_size": 3}).to_dict()
    run = request(make_problems(1), then_select=then_select)
    with django_capture_on_commit_callbacks(execute=True):
        execute(run)
    run.refresh_from_db()
    assert run.status == "succeeded"
    # The new solutions are scored by the active version as they arrive, and the selection
    # it asked for is queued.
    assert sorted(queued) == sorted(
        [
            (pipeline.SCORE_TASK, (version.pk,)),
            (pipeline.SELECT_GENERATION_TASK, (version.pk, run.then_select)),
        ]
    )
    assert run.then_select["batch_size"] == 3
    assert "Selection of the next generation queued" in run.log_tail


@pytest.mark.django_db
@pytest.mark.parametrize("fails", [False, True], ids=["succeeded", "failed-after-storing"])
def test_what_any_run_stored_is_scored_by_the_active_version(
    scripted, monkeypatch, django_capture_on_commit_callbacks, fails
):
    # Issue 43, item 3: a run that chained no selection (or failed after storing some) left its
    # solutions "not scored yet" and the model versions page at "306 of 307 scored" for good.
    from trainer import pipeline
    from trainer.models import ModelVersion

    version = ModelVersion.objects.create(name="v", checkpoint="/m/v", is_active=True)
    queued = []
    monkeypatch.setattr(pipeline, "send_task", lambda name, args, **kw: queued.append((name, args)))
    scripted(lambda text, seed: f"Step {seed}.\n\n# Answer\n\n5", fail_on_call=2 if fails else None)
    with django_capture_on_commit_callbacks(execute=True):
        run = execute(request(make_problems(2)))
    assert run.status == ("failed" if fails else "succeeded") and run.stored
    assert queued == [(pipeline.SCORE_TASK, (version.pk,))]
