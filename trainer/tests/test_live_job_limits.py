"""Issue 41, item 10: per-person limits on live jobs. One person's queued and running judge
runs, sampling runs and imports are bounded (LIVE_JOBS_PER_PERSON); past it a request is
refused with a 429 that says why, while other people, the schedule and commands go on."""

import io
from unittest import mock

import pytest

from core.jobs import JobStatus, TooManyLiveJobs
from generators import GeneratorSpec, SamplingSettings
from labeling.models import ImportJob, Problem, Solution
from labeling.services import import_jobs
from trainer.judging import services as judging
from trainer.judging.models import JudgeRun
from trainer.judging.services import JudgeParams
from trainer.sampling.models import SamplingRun

pytestmark = pytest.mark.django_db

FAKE = GeneratorSpec(backend="openai", model="scripted", base_url="http://scripted.invalid/v1")
SETTINGS = SamplingSettings(temperature=0.0, max_tokens=32)


@pytest.fixture(autouse=True)
def limits(settings):
    settings.GENERATOR_ALLOWED_BASE_URLS = [FAKE.base_url]
    settings.LIVE_JOBS_PER_PERSON = 2


@pytest.fixture
def problem():
    return Problem.objects.create(text="What is $2 + 3$?", answer="5", split="test")


def test_sampling_runs_past_the_limit_are_a_429_for_that_person_only(client, make_user, problem):
    rita, sam = make_user("rita", "researcher"), make_user("sam", "researcher")
    body = {
        "purpose": "solutions",
        "problems": {"split": "test"},
        "samples": 1,
        "generator": FAKE.to_dict(),
        "sampling": {"max_tokens": 32},
    }
    client.force_login(rita)
    with mock.patch("core.jobs.queue_task"):
        first = [client.post("/api/sampling-runs/", body, content_type="application/json")
                 for _ in range(2)]  # fmt: skip
        assert [r.status_code for r in first] == [201, 201]
        refused = client.post("/api/sampling-runs/", body, content_type="application/json")
        assert refused.status_code == 429
        assert "2 sampling runs queued or running" in refused.json()["detail"]
        assert SamplingRun.objects.filter(requested_by=rita).count() == 2

        client.force_login(sam)  # another person is not held up by rita's runs
        other = client.post("/api/sampling-runs/", body, content_type="application/json")
        assert other.status_code == 201

        # Once one of rita's ends, she may ask again.
        SamplingRun.objects.filter(pk=first[0].json()["id"]).update(status=JobStatus.SUCCEEDED)
        client.force_login(rita)
        again = client.post("/api/sampling-runs/", body, content_type="application/json")
        assert again.status_code == 201


def test_judge_runs_past_the_limit_are_refused_but_commands_are_not(make_user, problem):
    solution = Solution.objects.create(problem=problem, steps=["2 + 3 = 5.", "# Answer\n\n5"])
    rita = make_user("rita", "researcher")

    def judge(user):
        return judging.request_judge_run(
            user=user,
            generator=FAKE,
            settings=SETTINGS,
            params=JudgeParams(),
            solution_ids=[solution.pk],
            enqueue=False,
        )

    judge(rita), judge(rita)
    with pytest.raises(TooManyLiveJobs, match="LIVE_JOBS_PER_PERSON = 2"):
        judge(rita)
    judge(None), judge(None), judge(None)  # a command or the schedule: no person to bound
    assert JudgeRun.objects.count() == 5


def test_imports_past_the_limit_are_refused_before_the_upload_is_read(make_user):
    ada = make_user("ada", "admin")
    line = b'{"problem": "What is $1 + 1$?", "answer": "2"}\n'

    def upload(stream):
        return import_jobs.create_import_job(
            user=ada, kind="problems", upload=stream, file_name="p.jsonl"
        )

    with mock.patch.object(import_jobs, "_enqueue"):
        upload(io.BytesIO(line)), upload(io.BytesIO(line))
        unread = mock.Mock(wraps=io.BytesIO(line))
        with pytest.raises(TooManyLiveJobs):
            upload(unread)
    unread.read.assert_not_called()
    assert ImportJob.objects.filter(requested_by=ada).count() == 2
