"""Judge runs with a scripted judge: labels stored per step with their provenance, unreadable
replies counted (no label, no crash), cancel and resume, the API's refusals, the page, the
command and the JSONL export. The real SmolLM2 judges in test_judge_live.py."""

import json
import subprocess
from unittest import mock

import pytest
from django.core.management import call_command
from django.db import IntegrityError, transaction
from django.urls import reverse

from core.jobs import JobOrigin
from generators import GeneratorSpec, GeneratorUnavailable, SamplingSettings
from labeling.models import Problem, Solution, StepRating
from trainer.judging import services as judging
from trainer.judging.models import JudgeLabel, JudgeRun, JudgeRunItem
from trainer.judging.prompts import JUDGE_PROMPT_VERSION
from trainer.judging.services import JudgeParams

pytestmark = pytest.mark.django_db

FAKE = GeneratorSpec(backend="openai", model="scripted-judge", base_url="http://judge.invalid/v1")
SETTINGS = SamplingSettings(temperature=0.0, top_p=1.0, max_tokens=128, seed=3)


@pytest.fixture(autouse=True)
def scripted_url_allowed(settings):
    """FAKE's URL resolves nowhere: the scripted judge stands in for it."""
    settings.GENERATOR_ALLOWED_BASE_URLS = [FAKE.base_url]


class Scripted:
    """A judge that answers `reply(user_message)`; records the messages it was asked."""

    def __init__(self, reply, *, fail_on_call=None, on_call=None) -> None:
        self.spec, self.reply, self.asked = FAKE, reply, []
        self.fail_on_call, self.on_call = fail_on_call, on_call

    def generate(self, *, requests, settings):
        self.asked.append(requests[0].messages[-1]["content"])
        if len(self.asked) == self.fail_on_call:
            raise GeneratorUnavailable("The generator at judge.invalid did not answer.")
        if self.on_call:
            self.on_call(len(self.asked))
        return [self.reply(r.messages[-1]["content"]) for r in requests]

    def close(self) -> None:
        pass


@pytest.fixture
def scripted(monkeypatch):
    def install(reply, **options) -> Scripted:
        judge = Scripted(reply, **options)
        monkeypatch.setattr(judging, "open_generator", lambda spec: judge)
        return judge

    return install


def make_solutions() -> list[Solution]:
    problem = Problem.objects.create(
        text=r"What is $\frac{1}{2} + \frac{1}{3}$?", answer=r"\frac{5}{6}", unique_id="t/1.json"
    )
    steps = [
        [r"$\frac{1}{2} = \frac{3}{6}$ and $\frac{1}{3} = \frac{2}{6}$.", "# Answer\n\n5/6"],
        [r"Add tops and bottoms: $\frac{1+1}{2+3} = \frac{2}{5}$.", "# Answer\n\n2/5"],
        ["We add.", r"$\frac{3}{6} + \frac{2}{6} = \frac{5}{6}$.", "# Answer\n\n5/6"],
    ]
    return [
        Solution.objects.create(
            problem=problem, steps=s, answer=s[-1].split("\n")[-1], is_correct=i != 1
        )
        for i, s in enumerate(steps)
    ]


def per_step_reply(content: str) -> str:
    """Right for the first solution, junk for the second, too short for the third."""
    if "tops and bottoms" in content:
        return "Looks fine to me! The answer is 2/5."
    if "We add." in content:
        return "Step 1: 0 - no progress\n"
    return "Step 1: +1 - equivalent fractions\nStep 2: +1 - $\\frac{5}{6}$ is right"


def request(solutions, *, params=None, generator=FAKE, settings=SETTINGS) -> JudgeRun:
    return judging.request_judge_run(
        user=None,
        origin=JobOrigin.COMMAND,
        generator=generator,
        settings=settings,
        params=params or JudgeParams(),
        solution_ids=[s.pk for s in solutions],
        enqueue=False,
    )


def execute(run: JudgeRun) -> JudgeRun:
    return judging.execute_judge_run(run_id=run.pk, worker_hostname="test")


def labels_of(run: JudgeRun) -> dict[int, list[tuple[int, int, str]]]:
    found: dict[int, list] = {}
    for label in JudgeLabel.objects.filter(run=run).order_by("solution", "index"):
        found.setdefault(label.solution_id, []).append((label.index, label.rating, label.reason))
    return found


def test_a_run_stores_labels_per_step_counts_unreadable_replies_and_records_provenance(
    scripted,
):
    judge = scripted(per_step_reply)
    solutions = make_solutions()
    run = request(solutions, generator=FAKE.with_api_key("sk-never-stored"))
    assert run.status == "queued" and judging.progress(run)["done"] == 0
    run = execute(run)
    assert run.status == "succeeded", run.error
    assert judging.progress(run) == {"done": 3, "total": 3, "percent": 100}
    right, junk, short = solutions
    assert labels_of(run) == {
        right.pk: [(0, 1, "equivalent fractions"), (1, 1, "$\\frac{5}{6}$ is right")],
        short.pk: [(0, 0, "no progress")],
    }
    assert (run.stored, run.unreadable) == (3, 1)
    item = JudgeRunItem.objects.get(run=run, solution=junk)
    assert item.unreadable and item.stored == 0 and item.reply.startswith("Looks fine")
    # Each solution asked once, with its steps numbered.
    assert len(judge.asked) == 3 and "Step 2: # Answer\n\n5/6" in judge.asked[0]
    # Provenance: the judge (never its key), the settings, the prompt version, the format.
    assert run.generator == FAKE.to_dict()
    assert run.sampling == SETTINGS.to_dict()
    assert (run.prompt_version, run.format) == (JUDGE_PROMPT_VERSION, "per_step")
    assert "sk-never-stored" not in json.dumps(list(JudgeRun.objects.values())[0], default=str)
    # Never mixed into human ratings.
    assert not StepRating.objects.exists()


def test_the_first_error_format_labels_up_to_the_first_wrong_step(scripted):
    scripted(
        lambda content: "Paragraph 0 is wrong. \\boxed{0}" if "tops" in content else "\\boxed{-1}"
    )
    solutions = make_solutions()
    run = execute(request(solutions, params=JudgeParams(format="first_error")))
    assert run.status == "succeeded" and run.format == "first_error"
    labels = labels_of(run)
    assert [(i, r) for i, r, _ in labels[solutions[1].pk]] == [(0, -1)]
    assert [(i, r) for i, r, _ in labels[solutions[2].pk]] == [(0, 1), (1, 1), (2, 1)]
    assert (run.stored, run.unreadable) == (6, 0)


def test_a_cancel_mid_run_keeps_whole_solutions_and_a_resume_judges_only_the_rest(scripted):
    solutions = make_solutions()
    run = request(solutions)

    def cancel_after_the_first(calls: int) -> None:
        if calls == 1:
            judging.cancel_judge_run(run_id=run.pk)

    judge = scripted(per_step_reply, on_call=cancel_after_the_first)
    run = execute(run)
    assert run.status == "cancelled"
    assert judging.progress(run)["done"] == 1
    assert list(labels_of(run)) == [solutions[0].pk]
    assert "cancelled" in run.log_tail.lower()

    run = judging.resume_judge_run(run_id=run.pk, enqueue=False)
    assert run.status == "queued" and not run.cancel_requested
    judge.on_call = None
    run = execute(run)
    assert run.status == "succeeded"
    assert judging.progress(run)["done"] == 3
    # Three solutions, three questions in all: the first was not judged again.
    assert len(judge.asked) == 3
    assert (run.stored, run.unreadable) == (3, 1)
    assert JudgeLabel.objects.filter(run=run).count() == 3


def test_a_judge_that_fails_fails_the_run_which_resumes_where_it_stopped(scripted):
    judge = scripted(per_step_reply, fail_on_call=2)
    solutions = make_solutions()
    run = execute(request(solutions))
    assert run.status == "failed" and "did not answer" in run.error
    assert judging.progress(run)["done"] == 1
    judge.fail_on_call = None
    run = execute(judging.resume_judge_run(run_id=run.pk, enqueue=False))
    assert run.status == "succeeded" and judging.progress(run)["done"] == 3
    assert JudgeLabel.objects.filter(run=run).count() == 3


def test_cancel_and_resume_refuse_what_the_status_does_not_allow(scripted):
    scripted(per_step_reply)
    run = request(make_solutions())
    with pytest.raises(judging.JudgeRefused):
        judging.resume_judge_run(run_id=run.pk, enqueue=False)
    assert judging.cancel_judge_run(run_id=run.pk).status == "cancelled"
    with pytest.raises(judging.JudgeRefused):
        judging.cancel_judge_run(run_id=run.pk)
    with pytest.raises(judging.JudgeRunNotFound):
        judging.cancel_judge_run(run_id=run.pk + 100)


def test_bad_requests_are_refused_and_record_nothing():
    solutions = make_solutions()
    for ids in ([], [solutions[0].pk, 987654], ["1"], [True], None):
        with pytest.raises(judging.InvalidJudgeRun):
            judging.request_judge_run(
                user=None,
                generator=FAKE,
                settings=SETTINGS,
                params=JudgeParams(),
                solution_ids=ids,
                enqueue=False,
            )
    with pytest.raises(judging.InvalidJudgeRun):
        JudgeParams(format="essay")
    with pytest.raises(judging.InvalidJudgeRun):
        request(solutions, generator=GeneratorSpec(backend="local", model="not-registered"))
    assert not JudgeRun.objects.exists()


def test_the_database_refuses_a_rating_outside_minus_one_to_one_and_a_second_label():
    solution = make_solutions()[0]
    run = JudgeRun.objects.create(
        generator=FAKE.to_dict(), sampling={}, prompt_version="v", format="per_step"
    )
    JudgeLabel.objects.create(solution=solution, index=0, run=run, rating=1)
    with pytest.raises(IntegrityError), transaction.atomic():
        JudgeLabel.objects.create(solution=solution, index=1, run=run, rating=2)
    with pytest.raises(IntegrityError), transaction.atomic():
        JudgeLabel.objects.create(solution=solution, index=0, run=run, rating=-1)


def test_the_export_has_one_line_per_readable_solution_with_ratings_reasons_and_provenance(
    scripted,
):
    scripted(per_step_reply)
    right, junk, short = make_solutions()
    run = execute(request([right, junk, short]))
    lines = [json.loads(line) for line in judging.export_lines(run=run)]
    assert [line["solution_id"] for line in lines] == [right.pk, short.pk]
    first, last = lines
    assert set(first) == {"solution_id", "problem", "steps", "ratings", "reasons", "provenance"}
    assert first["problem"] == {
        "text": right.problem.text,
        "answer": right.problem.answer,
        "unique_id": "t/1.json",
    }
    assert first["steps"] == right.steps
    assert first["ratings"] == [1, 1]
    assert first["reasons"] == ["equivalent fractions", "$\\frac{5}{6}$ is right"]
    # A step the judge did not rate is null, never a guess.
    assert last["ratings"] == [0, None, None] and last["reasons"] == ["no progress", None, None]
    assert first["provenance"] == {
        "judge_run": run.pk,
        "generator": FAKE.to_dict(),
        "sampling": SETTINGS.to_dict(),
        "prompt_version": JUDGE_PROMPT_VERSION,
        "format": "per_step",
    }


# --- the API ---------------------------------------------------------------------------------


def test_the_api_starts_lists_cancels_resumes_and_exports_a_run(
    client, researcher, scripted, django_capture_on_commit_callbacks
):
    scripted(per_step_reply)
    solutions = make_solutions()
    body = {
        "solution_ids": [s.pk for s in solutions],
        "format": "first_error",
        "generator": FAKE.to_dict(),
        "sampling": {"temperature": 0.1},
    }
    with (
        mock.patch("core.jobs.queue_task") as queue,
        django_capture_on_commit_callbacks(execute=True),
    ):
        response = client.post("/api/judge-runs/", body, content_type="application/json")
    assert response.status_code == 201, response.content
    data = response.json()
    queue.assert_called_once_with(judging.JUDGE_TASK, (data["id"],), task_id=mock.ANY)
    assert data["format"] == "first_error" and data["prompt_version"] == JUDGE_PROMPT_VERSION
    assert data["progress"] == {"done": 0, "total": 3, "percent": 0}
    # Left out, a setting takes the judge's default, not a sampler's.
    assert data["sampling"]["temperature"] == 0.1
    assert data["sampling"]["max_tokens"] == judging.JUDGE_SETTINGS.max_tokens
    assert JudgeRun.objects.get().origin == "api"

    assert [r["id"] for r in client.get("/api/judge-runs/").json()["results"]] == [data["id"]]
    response = client.post(f"/api/judge-runs/{data['id']}/cancel/")
    assert response.status_code == 200 and response.json()["status"] == "cancelled"
    assert client.post(f"/api/judge-runs/{data['id']}/cancel/").status_code == 409
    with mock.patch("core.jobs.queue_task"):
        response = client.post(f"/api/judge-runs/{data['id']}/resume/")
    assert response.status_code == 200 and response.json()["status"] == "queued"

    execute(JudgeRun.objects.get(pk=data["id"]))
    response = client.get(f"/api/judge-runs/{data['id']}/export/")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/x-ndjson")
    lines = [json.loads(line) for line in b"".join(response.streaming_content).splitlines()]
    # per_step_reply has no box: every critic reply is unreadable, nothing is exported, and
    # the run failed saying so: a run that stored nothing is no success (issue 43, item 5).
    assert lines == []
    shown = client.get(f"/api/judge-runs/{data['id']}/").json()
    assert shown["unreadable"] == 3 and shown["status"] == "failed"
    assert "every reply (3) was unreadable" in shown["error"]


def test_the_api_answers_400_for_bad_input_and_records_nothing(client, researcher):
    solution = make_solutions()[0]
    good = {"solution_ids": [solution.pk], "generator": FAKE.to_dict()}
    for bad in (
        {"solution_ids": []},
        {"solution_ids": ["x"]},
        {"solution_ids": [987654]},
        {"solution_ids": None},
        {"format": "essay"},
        {"format": 3},
        {"generator": {"backend": "gpt", "model": "m"}},
        {"generator": {"backend": "local", "model": "not-registered"}},
        {"generator": {**FAKE.to_dict(), "api_key": "sk-x"}},
        {"sampling": {"temperature": -1}},
        {"sampling": {"beam": 4}},
    ):
        response = client.post("/api/judge-runs/", {**good, **bad}, content_type="application/json")
        assert response.status_code == 400, (bad, response.content)
    response = client.post(
        "/api/judge-runs/", {"generator": FAKE.to_dict()}, content_type="application/json"
    )
    assert response.status_code == 400
    assert client.get("/api/judge-runs/987654/").status_code == 404
    assert not JudgeRun.objects.exists()


def test_annotators_cannot_see_or_start_judge_runs(client, make_user):
    run = JudgeRun.objects.create(
        generator=FAKE.to_dict(), sampling={}, prompt_version="v", format="per_step"
    )
    client.force_login(make_user("ann", "annotator"))
    assert client.get("/api/judge-runs/").status_code == 403
    assert client.post("/api/judge-runs/", {}, content_type="application/json").status_code == 403
    assert client.get(f"/api/judge-runs/{run.pk}/export/").status_code == 403
    assert client.get(reverse("judge-list")).status_code == 403
    assert client.get(reverse("judge-detail", args=[run.pk])).status_code == 403
    assert client.get(reverse("judge-export", args=[run.pk])).status_code == 403


# --- the page and the command ----------------------------------------------------------------


def test_the_page_starts_a_run_and_shows_its_labels_per_solution(
    client, researcher, scripted, django_capture_on_commit_callbacks
):
    scripted(per_step_reply)
    solutions = make_solutions()
    page = client.get(reverse("judge-list")).content.decode()
    assert "Start judge run" in page and 'name="format"' in page
    assert reverse("judge-list") in client.get(reverse("sampling-list")).content.decode()
    form = {
        "solution_ids": ", ".join(str(s.pk) for s in solutions),
        "format": "per_step",
        "backend": "openai",
        "model": FAKE.model,
        "base_url": FAKE.base_url,
        "temperature": "0",
        "top_p": "1",
        "max_tokens": "128",
        "seed": "3",
    }
    with mock.patch("core.jobs.queue_task"):
        response = client.post(reverse("judge-list"), form)
    assert response.status_code == 302, response.content.decode()[:2000]
    run = JudgeRun.objects.get()
    assert run.origin == "page" and run.requested_by == researcher
    execute(run)
    page = client.get(response.url).content.decode()
    assert "3 of 3 solutions judged" in page
    assert "equivalent fractions" in page and "unreadable reply" in page
    assert JUDGE_PROMPT_VERSION in page
    download = client.get(reverse("judge-export", args=[run.pk]))
    assert download.status_code == 200
    assert len(b"".join(download.streaming_content).splitlines()) == 2

    for bad in ({"format": "essay"}, {"solution_ids": "1, x"}, {"temperature": "-1"}):
        response = client.post(reverse("judge-list"), {**form, **bad})
        assert response.status_code == 400, bad
    assert JudgeRun.objects.count() == 1


def test_the_command_judges_in_the_foreground_and_exports_jsonl(scripted, tmp_path):
    scripted(lambda content: "\\boxed{-1}")
    solutions = make_solutions()
    call_command(
        "judge",
        "--solutions",
        ",".join(str(s.pk) for s in solutions),
        "--format",
        "first_error",
        "--base-url",
        FAKE.base_url,
        "--model",
        FAKE.model,
        "--max-tokens",
        "64",
    )
    run = JudgeRun.objects.get()
    assert run.status == "succeeded" and run.origin == "command"
    assert run.format == "first_error" and run.sampling["max_tokens"] == 64
    assert run.sampling["temperature"] == judging.JUDGE_SETTINGS.temperature
    out = tmp_path / "judge.jsonl"
    call_command("judge", "--export", str(run.pk), "--out", str(out))
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [line["solution_id"] for line in lines] == [s.pk for s in solutions]
    assert all(set(line["ratings"]) == {1} for line in lines)


# --- the worker ------------------------------------------------------------------------------


def test_the_task_runs_the_run_on_the_gpu_queue(scripted, settings):
    from trainer import tasks

    scripted(per_step_reply)
    run = request(make_solutions())
    assert settings.CELERY_TASK_ROUTES["trainer.tasks.*"]["queue"] == "gpu"
    assert tasks.judge_task.name == judging.JUDGE_TASK
    assert tasks.judge_task.apply(args=(run.pk,)).get() == "succeeded"
    # A redelivered message finds the run finished and judges nothing again.
    assert tasks.judge_task.apply(args=(run.pk,)).get() == "succeeded"
    assert JudgeLabel.objects.filter(run=run).count() == 3


def test_a_run_whose_worker_is_gone_is_failed_and_resumes():
    from celery.signals import worker_ready
    from django.utils import timezone

    from trainer import tasks  # noqa: F401 (connects the worker_ready handlers, run alone too)

    orphan = subprocess.Popen(["true"])
    orphan.wait()
    run = request(make_solutions())
    now = timezone.now()
    JudgeRun.objects.filter(pk=run.pk).update(
        status="running", heartbeat_at=now, worker_hostname="celery@gpu2", worker_pid=orphan.pid
    )
    worker_ready.send(sender=mock.Mock(hostname="celery@gpu2"))
    run.refresh_from_db()
    assert run.status == "failed" and "resume to continue" in run.error
    assert judging.resume_judge_run(run_id=run.pk, enqueue=False).status == "queued"
