"""The REST API: every endpoint under every role, object-level checks, tokens, bad uploads."""

import io
import json
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from labeling.demo.seed import create_demo_accounts
from labeling.models import (
    Generation,
    ImportJob,
    LabelingSession,
    Problem,
    Solution,
    StepRating,
)
from labeling.services import import_jobs, workbench
from labeling.services.labelers import get_or_create_labeler
from trainer.models import ModelVersion

pytestmark = pytest.mark.django_db
FIXTURES = Path(__file__).parent / "fixtures"
ROLES = ("anonymous", "annotator", "researcher", "admin")


@pytest.fixture
def demo():
    call_command("seed_demo", "--no-labels", stdout=io.StringIO())


def client_for(role: str) -> APIClient:
    client = APIClient()
    if role != "anonymous":
        client.force_authenticate(User.objects.get(username=role))
    return client


@pytest.fixture
def small():
    """Demo accounts and two solutions: enough for permission checks, quicker than the demo."""
    create_demo_accounts()
    problem = Problem.objects.create(text="What is $6 \\times 7$?", answer="42", unique_id="t/1")
    for answer in ("42", "41"):
        Solution.objects.create(
            problem=problem,
            steps=[f"The product is {answer}."],
            answer=answer,
            is_correct=answer == "42",
        )


@pytest.fixture
def other_session(small):
    """A session that belongs to annotator2, for object-level checks."""
    labeler = get_or_create_labeler(user=User.objects.get(username="annotator2"))
    return workbench.next_session(labeler=labeler).session


def _counts() -> tuple[int, int, int]:
    return Problem.objects.count(), Solution.objects.count(), StepRating.objects.count()


# Expected status per endpoint for anonymous, annotator, researcher, admin.
MATRIX = [
    ("get", "/api/problems/", None, (401, 403, 200, 200)),
    ("get", "/api/problems/{problem}/", None, (401, 403, 200, 200)),
    ("post", "/api/problems/", [{"problem": "1+1?", "answer": "2"}], (401, 403, 403, 201)),
    ("get", "/api/solutions/", None, (401, 403, 200, 200)),
    ("get", "/api/solutions/{solution}/", None, (401, 403, 200, 200)),
    ("post", "/api/solutions/{solution}/role/", {"role": "quality_control"}, (401, 403, 403, 200)),
    ("get", "/api/sessions/", None, (401, 200, 200, 200)),
    ("get", "/api/sessions/{other_session}/", None, (401, 404, 200, 200)),
    ("post", "/api/sessions/{other_session}/rate/", {"step": 0, "rating": 1}, (401, 404, 404, 404)),
    ("post", "/api/sessions/next/", None, (401, 200, 200, 200)),
    ("get", "/api/labels/export/", None, (401, 403, 200, 200)),
    ("get", "/api/imports/", None, (401, 403, 403, 200)),
    ("get", "/api/tokens/", None, (401, 200, 200, 200)),
    ("get", "/api/training-runs/", None, (401, 403, 200, 200)),
    ("post", "/api/training-runs/", {"params": {"epochs": 1}}, (401, 403, 201, 201)),
    ("post", "/api/training-runs/", {"params": {"epochs": -1}}, (401, 403, 400, 400)),
    ("get", "/api/model-versions/", None, (401, 403, 200, 200)),
    ("post", "/api/model-versions/{model_version}/activate/", None, (401, 403, 200, 200)),
    ("get", "/api/generations/", None, (401, 403, 200, 200)),
    # No model version is active here: selection has nothing to score with.
    ("post", "/api/generations/", {"batch_size": 5}, (401, 403, 409, 409)),
    # The API description needs a login as the rest does (API_SCHEMA_PUBLIC opens it).
    ("get", "/api/schema/", None, (401, 200, 200, 200)),
]


@pytest.mark.parametrize(
    "method,url,body,expected", MATRIX, ids=[f"{m} {u}" for m, u, *_ in MATRIX]
)
@pytest.mark.parametrize("role", ROLES)
def test_permission_matrix(role, method, url, body, expected, other_session):
    ids = {
        "problem": Problem.objects.first().pk,
        "solution": Solution.objects.first().pk,
        "other_session": other_session.pk,
        "model_version": ModelVersion.objects.create(checkpoint="/x").pk,
    }
    response = getattr(client_for(role), method)(url.format(**ids), body, format="json")
    assert response.status_code == expected[ROLES.index(role)], response.content[:300]


def test_annotator_lists_only_their_own_sessions(other_session):
    mine = workbench.next_session(
        labeler=get_or_create_labeler(user=User.objects.get(username="annotator"))
    ).session
    listed = client_for("annotator").get("/api/sessions/").json()["results"]
    assert [s["id"] for s in listed] == [mine.pk]
    everyone = client_for("researcher").get("/api/sessions/").json()["results"]
    assert {s["id"] for s in everyone} == {mine.pk, other_session.pk}
    # Labelers appear as UUIDs, never usernames.
    assert "annotator" not in json.dumps(everyone)


def test_a_script_labels_a_solution_through_the_api(demo):
    client = client_for("annotator")
    served = client.post("/api/sessions/next/").json()
    session_id, steps = served["session"]["id"], served["steps"]
    for index in range(len(steps)):
        response = client.post(
            f"/api/sessions/{session_id}/rate/", {"step": index, "rating": 1}, format="json"
        )
        assert response.status_code == 200, response.json()
    # A retried request stores nothing twice.
    client.post(f"/api/sessions/{session_id}/rate/", {"step": 0, "rating": 1}, format="json")
    done = client.post(
        f"/api/sessions/{session_id}/submit/", {"finish_reason": "solution"}, format="json"
    )
    assert done.status_code == 200
    assert done.json()["finish_reason"] == "solution"
    assert StepRating.objects.filter(step__session_id=session_id).count() == len(steps)
    bad = client.post(f"/api/sessions/{session_id}/rate/", {"step": 0, "rating": 5}, format="json")
    assert bad.status_code == 400


@pytest.fixture
def one_solution(make_user, make_solution):
    """An annotator's API client and the one solution to label: 3 steps, alternatives at 1."""
    problem = Problem.objects.create(text="What is $6 \\times 7$?", answer="42")
    make_solution(problem, alternatives={"1": ["Alternative one.", "Alternative two."]})
    client = APIClient()
    client.force_authenticate(make_user("script"))
    return client


def test_the_api_finishes_a_minus_one_with_alternatives_as_the_page_does(one_solution):
    client = one_solution
    served = client.post("/api/sessions/next/").json()
    sid, state = served["session"]["id"], served["session"]["state"]
    assert served["alternatives"] == {"1": ["Alternative one.", "Alternative two."]}
    assert (state["current"]["key"], state["outcome"], state["total_steps"]) == ("s0", None, 4)

    def rate(step, rating, completion_index=None):
        body = {"step": step, "rating": rating}
        if completion_index is not None:
            body["completion_index"] = completion_index
        return client.post(f"/api/sessions/{sid}/rate/", body, format="json")

    assert rate(0, 1).status_code == 200
    state = rate(1, -1).json()["state"]
    assert (state["error_step"], state["alternatives_offered"]) == (1, 2)
    assert state["current"] == {
        "index": 1,
        "completion": 1,
        "key": "s1c1",
        "text": "Alternative one.",
        "rating": None,
        "flagged": None,
    }
    # Refusals of the labeling rules are conflicts with the state, each with its reason.
    early = client.post(f"/api/sessions/{sid}/submit/", {"finish_reason": "found_error"})
    assert early.status_code == 409 and "alternatives" in early.json()["detail"]
    skipped = rate(1, 1, completion_index=2)
    assert skipped.status_code == 409 and "not reached" in skipped.json()["detail"]
    assert rate(2, 1).status_code == 409  # labels stop at the first -1

    assert rate(1, 1, completion_index=1).status_code == 200
    session = rate(1, 0, completion_index=2).json()
    assert (session["state"]["current"], session["state"]["outcome"]) == (None, "found_error")
    assert [
        [(r["completion_index"], r["rating"]) for r in step["ratings"]]
        for step in session["step_labels"]
    ] == [[(0, 1)], [(0, -1), (1, 1), (2, 0)]]
    done = client.post(f"/api/sessions/{sid}/submit/", {"finish_reason": "found_error"})
    assert done.status_code == 200 and done.json()["finish_reason"] == "found_error"
    again = client.post(f"/api/sessions/{sid}/submit/", {"finish_reason": "solution"})
    assert again.status_code == 409 and "already finished" in again.json()["detail"]


@pytest.mark.parametrize(
    ("finish_reason", "text_field"),
    [
        ("solution", "finish_reason_text"),
        ("bad_problem", "finish_reason_text"),
        ("give_up", "finish_reason_text"),
        # `reason`, the field's name before: deprecated, still taken.
        ("give_up", "reason"),
    ],
)
def test_the_api_submits_every_finish_reason(one_solution, finish_reason, text_field):
    client = one_solution
    sid = client.post("/api/sessions/next/").json()["session"]["id"]
    submit = f"/api/sessions/{sid}/submit/"
    if finish_reason == "solution":
        early = client.post(submit, {"finish_reason": "solution"})
        assert early.status_code == 409 and "Rate every step" in early.json()["detail"]
        for step in range(4):
            client.post(f"/api/sessions/{sid}/rate/", {"step": step, "rating": 1})
        reason = ""
    else:
        unexplained = client.post(submit, {"finish_reason": finish_reason})
        assert unexplained.status_code == 409 and "reason" in unexplained.json()["detail"]
        reason = "The statement is ambiguous."
    done = client.post(submit, {"finish_reason": finish_reason, text_field: reason})
    assert done.status_code == 200, done.content
    assert (done.json()["finish_reason"], done.json()["finish_reason_text"]) == (
        finish_reason,
        reason,
    )
    # A bad_problem session files a report; the problem is marked bad only on confirmation.
    problem = Problem.objects.get()
    assert not problem.is_bad
    assert problem.reports.count() == (finish_reason == "bad_problem")


def test_solutions_filter_by_correctness_and_labeled_state(demo):
    client = client_for("researcher")
    wrong = client.get("/api/solutions/?is_correct=false&page_size=500").json()
    assert wrong["count"] == Solution.objects.filter(is_correct=False).count()
    assert all(not s["is_correct"] for s in wrong["results"])
    assert client.get("/api/solutions/?labeled=true").json()["count"] == 0
    unlabeled = client.get("/api/solutions/?labeled=false").json()["count"]
    assert unlabeled == Solution.objects.count()
    # A bad value of a filter is a 400; a parameter that is no filter is ignored.
    assert client.get("/api/solutions/?is_correct=maybe").status_code == 400
    assert client.get("/api/solutions/?generation=abc").status_code == 400
    assert client.get("/api/solutions/?colour=abc").json()["count"] == Solution.objects.count()
    # The data pages' filters apply too: a solution's problem level, say.
    assert client.get("/api/solutions/?level=abc").status_code == 400
    assert client.get("/api/problems/?level=abc").status_code == 400


def test_bulk_solutions_are_graded_like_the_import_command(demo):
    problem = Problem.objects.exclude(unique_id=None).first()
    client = client_for("admin")
    body = [
        {"unique_id": problem.unique_id, "steps": ["So the answer is 12345."], "answer": "12345"},
        {"unique_id": problem.unique_id, "steps": ["Done."], "answer": problem.answer},
    ]
    response = client.post("/api/solutions/", body, format="json")
    assert response.status_code == 201
    assert response.json()["created"] == 2
    made = Solution.objects.filter(problem=problem).order_by("-id")[:2]
    assert sorted(s.is_correct for s in made) == [False, True]


@pytest.mark.parametrize(
    "body,message",
    [
        ([{"unique_id": "nope", "steps": ["x"]}], "item:1: no problem with unique_id 'nope'"),
        ([{"problem": "2+2?", "answer": "4"}, {"answer": "5"}], "item:2:"),
        ("not a list", "JSON object or a non-empty JSON array"),
        ([], "non-empty"),
    ],
)
def test_bad_bulk_bodies_are_refused_and_change_nothing(demo, body, message):
    before = _counts()
    url = "/api/problems/" if "answer" in json.dumps(body) else "/api/solutions/"
    response = client_for("admin").post(url, body, format="json")
    assert response.status_code == 400
    assert message in json.dumps(response.json())
    assert _counts() == before


def _upload(client, name: str, content: bytes, kind: str = "prm800k"):
    file = SimpleUploadedFile(name, content, content_type="application/octet-stream")
    return client.post("/api/imports/", {"kind": kind, "file": file}, format="multipart")


def test_an_uploaded_prm800k_file_is_imported_by_a_job(demo, django_capture_on_commit_callbacks):
    client = client_for("admin")
    content = (FIXTURES / "prm800k_phase2.jsonl").read_bytes()
    with django_capture_on_commit_callbacks(execute=False) as queued:
        response = _upload(client, "phase2.jsonl", content)
    assert response.status_code == 202
    assert response.json()["status"] == "queued"
    assert len(queued) == 1  # the task is enqueued once the job row is committed
    job_id = response.json()["id"]
    import_jobs.run_import_job(job_id=job_id)
    job = client.get(f"/api/imports/{job_id}/").json()
    assert job["status"] == "succeeded", job
    assert job["result"]["lines"] == len(content.splitlines())
    assert LabelingSession.objects.filter(submitted_at__isnull=False).exists()
    # A redelivered task does not import twice.
    before = _counts()
    import_jobs.run_import_job(job_id=job_id)
    assert _counts() == before


@pytest.mark.parametrize(
    "name,content,status,message",
    [
        (
            "not_json.jsonl",
            (FIXTURES / "bad" / "not_json.jsonl").read_bytes(),
            400,
            "not_json.jsonl:",
        ),
        (
            "latin1.jsonl",
            '{"problem": "caf\u00e9"}\n'.encode("latin-1"),
            400,
            "latin1.jsonl:1: not UTF-8",
        ),
        (
            "rating.jsonl",
            (FIXTURES / "bad" / "bad_rating.jsonl").read_bytes(),
            400,
            "rating.jsonl:",
        ),
        ("empty.jsonl", b"\n\n", 400, "no JSON lines"),
    ],
)
def test_bad_uploads_are_refused_with_file_and_line(demo, settings, name, content, status, message):
    before, jobs = _counts(), ImportJob.objects.count()
    response = _upload(client_for("admin"), name, content)
    assert response.status_code == status
    assert message in response.json()["detail"]
    assert (_counts(), ImportJob.objects.count()) == (before, jobs)
    # Nothing was published to the artifact store, nor left where the upload was spooled.
    for folder in (Path(settings.STORE_URL), Path(settings.STORE_SCRATCH_DIR)):
        assert not folder.is_dir() or not [p for p in folder.rglob("*") if p.is_file()]


def test_an_oversized_upload_is_refused(demo, settings):
    settings.IMPORT_MAX_UPLOAD_BYTES = 100
    response = _upload(client_for("admin"), "big.jsonl", b'{"problem": "x"}\n' * 20, "problems")
    assert response.status_code == 413
    assert "upload limit" in response.json()["detail"]


def test_a_problems_file_with_a_duplicate_id_fails_its_job_and_stores_nothing(demo):
    lines = [
        {"problem": "What is 7*6?", "answer": "42", "unique_id": "dup/1.json"},
        {"problem": "What is 6*7?", "answer": "42", "unique_id": "dup/1.json"},
    ]
    content = "".join(json.dumps(line) + "\n" for line in lines).encode()
    before = _counts()
    response = _upload(client_for("admin"), "dups.jsonl", content, "problems")
    job = import_jobs.run_import_job(job_id=response.json()["id"])
    assert job.status == "failed"
    assert job.error.startswith("dups.jsonl:2:")
    assert _counts() == before


def test_tokens_are_shown_once_stored_hashed_and_revocable(demo):
    owner = client_for("researcher")
    created = owner.post("/api/tokens/", {"expires_in_days": 30}, format="json").json()
    secret = created["token"]
    listed = owner.get("/api/tokens/").json()
    assert [t["token_key"] for t in listed] == [created["token_key"]]
    assert secret not in json.dumps(listed)
    from knox.models import AuthToken

    # Only a hash is kept: the secret is in no stored column, and the stored row is no
    # credential (a leaked database does not let anyone in).
    (stored,) = AuthToken.objects.filter(user__username="researcher").values()
    assert secret not in json.dumps(stored, default=str)
    for column in ("digest", "token_key"):
        leaked = APIClient()
        leaked.credentials(HTTP_AUTHORIZATION=f"Token {stored[column]}")
        assert leaked.get("/api/solutions/").status_code == 401

    script = APIClient()
    script.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    assert script.get("/api/solutions/").status_code == 200
    # Another user cannot revoke it.
    assert client_for("annotator").delete(f"/api/tokens/{created['token_key']}/").status_code == 404
    assert owner.delete(f"/api/tokens/{created['token_key']}/").status_code == 204
    assert script.get("/api/solutions/").status_code == 401


def test_the_token_page_shows_a_new_token_once(client, demo):
    client.force_login(User.objects.get(username="annotator"))
    page = client.post("/settings/tokens/", {"expires_in_days": ""}).content.decode()
    from knox.models import AuthToken

    token = AuthToken.objects.get(user__username="annotator")
    assert token.token_key in page and "Your new token" in page
    again = client.get("/settings/tokens/").content.decode()
    assert "Your new token" not in again and token.token_key in again
    client.post("/settings/tokens/", {"revoke": token.token_key})
    assert not AuthToken.objects.filter(user__username="annotator").exists()


def test_export_streams_prm800k_lines_with_filters(demo):
    call_command("import_prm800k", str(FIXTURES / "prm800k_phase2.jsonl"), stdout=io.StringIO())
    client = client_for("researcher")
    with CaptureQueriesContext(connection) as queries:
        response = client.get("/api/labels/export/")
        assert response.status_code == 200 and response.streaming
        lines = b"".join(response.streaming_content).decode().splitlines()
    originals = (FIXTURES / "prm800k_phase2.jsonl").read_text().splitlines()
    # Queries per chunk of sessions, not per line: 8 lines take the role check and 3 queries
    # (the throttle's count in the cache table, and its savepoint, aside: per request).
    cache = ('"stepwise_cache"', "SAVEPOINT")
    data = [q["sql"] for q in queries if not any(word in q["sql"] for word in cache)]
    assert len(originals) == 8 and len(data) <= 5, [sql[:80] for sql in data]
    # Import then export gives back the same objects, field for field.
    canonical = lambda text: json.dumps(json.loads(text), sort_keys=True)  # noqa: E731
    assert sorted(map(canonical, lines)) == sorted(map(canonical, originals))
    assert client.get("/api/labels/export/?since=yesterday").status_code == 400
    none = client.get("/api/labels/export/?generation=987")
    assert b"".join(none.streaming_content) == b""


def test_a_second_training_run_while_one_is_live_is_a_conflict(small):
    client = client_for("researcher")
    first = client.post("/api/training-runs/", {"params": {"epochs": 1}}, format="json")
    assert first.status_code == 201 and first.json()["status"] == "queued"
    second = client.post("/api/training-runs/", {}, format="json")
    assert second.status_code == 409
    assert f"Training run {first.json()['id']}" in second.json()["detail"]
    watched = client.get(f"/api/training-runs/{first.json()['id']}/").json()
    assert watched["params"]["epochs"] == 1
    cancelled = client.post(f"/api/training-runs/{first.json()['id']}/cancel/")
    assert cancelled.json()["status"] == "cancelled"


# What would tell a labeler that a solution is quality control or screening: the queue
# names, the marks, and the generation (screening is generation -1).
GIVEAWAYS = ("quality_control", "screening", "generation", "leftover", "is_quality_control")


@pytest.mark.parametrize("role", ["quality_control", "screening"])
def test_quality_control_is_blind_in_a_labelers_api_responses(make_user, make_solution, role):
    problem = Problem.objects.create(text="What is $3+4$?", answer="7")
    fields = {"is_quality_control": True} if role == "quality_control" else {"is_screening": True}
    if role == "screening":
        fields["generation"] = Generation.objects.create(number=Generation.SCREENING)
    solution = make_solution(problem, steps=["Three and four.", "# Answer\n\n7"], **fields)
    client = APIClient()
    client.force_authenticate(make_user("ann"))
    served = client.post("/api/sessions/next/")
    sid = served.json()["session"]["id"]
    assert served.json()["session"]["solution"] == solution.pk
    answers = [served]
    for step in (0, 1):
        body = {"step": step, "rating": 1}
        answers.append(client.post(f"/api/sessions/{sid}/rate/", body, format="json"))
    answers.append(client.get(f"/api/sessions/{sid}/"))
    answers.append(client.post(f"/api/sessions/{sid}/submit/", {"finish_reason": "solution"}))
    answers.append(client.get("/api/sessions/"))
    for answer in answers:
        assert answer.status_code == 200, answer.content
        text = answer.content.decode()
        assert not [word for word in GIVEAWAYS if word in text], text

    # Those who review labels still see where each session came from.
    reviewer = APIClient()
    reviewer.force_authenticate(make_user("res", role="researcher"))
    seen = reviewer.get(f"/api/sessions/{sid}/").json()
    assert seen["queue"] == role and seen[f"is_{role}"] is True
    served = reviewer.post("/api/sessions/next/").json()
    assert served["queue"] == role and served["session"][f"is_{role}"] is True


def test_an_old_field_name_is_served_and_answered_with_its_sunset(demo):
    # Issue 42: names kept since a rename had no date; a request using one now learns it from
    # the headers (RFC 9745 Deprecation, RFC 8594 Sunset), and the new names carry none.
    from core import deprecation

    client = client_for("annotator")
    served = client.post("/api/sessions/next/").json()
    url = f"/api/sessions/{served['session']['id']}/rate/"

    old = client.post(url, {"step": 0, "rating": 1}, format="json")
    assert old.status_code == 200
    assert old["Sunset"] == "Tue, 01 Jun 2027 00:00:00 GMT" and old["Deprecation"].startswith("@")
    assert deprecation.SUNSET.isoformat() == "2027-06-01"
    new = client.post(url, {"step_index": 1, "rating": 1}, format="json")
    assert new.status_code == 200 and "Sunset" not in new and "Deprecation" not in new
    submitted = client.post(
        f"/api/sessions/{served['session']['id']}/submit/",
        {"finish_reason": "give_up", "reason": "stuck"},
        format="json",
    )
    assert submitted.status_code == 200 and "Sunset" in submitted
