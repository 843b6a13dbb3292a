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

from labeling import imports, services
from labeling.models import ImportJob, LabelingSession, Problem, Solution, StepRating
from trainer.models import ModelVersion

pytestmark = pytest.mark.django_db
FIXTURES = Path(__file__).parent / "fixtures"
ROLES = ("anonymous", "annotator", "researcher", "admin")


@pytest.fixture
def demo():
    call_command("seed_demo", stdout=io.StringIO())


def client_for(role: str) -> APIClient:
    client = APIClient()
    if role != "anonymous":
        client.force_authenticate(User.objects.get(username=role))
    return client


@pytest.fixture
def small():
    """Demo accounts and two solutions: enough for permission checks, quicker than the demo."""
    services.create_demo_accounts()
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
    labeler = services.get_or_create_labeler(user=User.objects.get(username="annotator2"))
    return services.next_assignment(labeler=labeler).session


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
    ("post", "/api/sessions/{other_session}/rate/", {"step": 0, "rating": 1}, (401, 403, 403, 403)),
    ("post", "/api/labeling/next/", None, (401, 200, 200, 200)),
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
    ("get", "/api/schema/", None, (200, 200, 200, 200)),  # the API description is public
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
        "model_version": ModelVersion.objects.create(checkpoint_path="/x").pk,
    }
    response = getattr(client_for(role), method)(url.format(**ids), body, format="json")
    assert response.status_code == expected[ROLES.index(role)], response.content[:300]


def test_annotator_lists_only_their_own_sessions(other_session):
    mine = services.next_assignment(
        labeler=services.get_or_create_labeler(user=User.objects.get(username="annotator"))
    ).session
    listed = client_for("annotator").get("/api/sessions/").json()["results"]
    assert [s["id"] for s in listed] == [mine.pk]
    everyone = client_for("researcher").get("/api/sessions/").json()["results"]
    assert {s["id"] for s in everyone} == {mine.pk, other_session.pk}
    # Labelers appear as UUIDs, never usernames.
    assert "annotator" not in json.dumps(everyone)


def test_a_script_labels_a_solution_through_the_api(demo):
    client = client_for("annotator")
    task = client.post("/api/labeling/next/").json()
    session_id, steps = task["session"]["id"], task["steps"]
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


def test_solutions_filter_by_correctness_and_labeled_state(demo):
    client = client_for("researcher")
    wrong = client.get("/api/solutions/?is_correct=false&page_size=500").json()
    assert wrong["count"] == Solution.objects.filter(is_correct=False).count()
    assert all(not s["is_correct"] for s in wrong["results"])
    assert client.get("/api/solutions/?labeled=true").json()["count"] == 0
    assert client.get("/api/solutions/?level=abc").status_code in (200, 400)
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
    imports.run_import_job(job_id=job_id)
    job = client.get(f"/api/imports/{job_id}/").json()
    assert job["status"] == "succeeded", job
    assert job["result"]["lines"] == len(content.splitlines())
    assert LabelingSession.objects.filter(submitted_at__isnull=False).exists()
    # A redelivered task does not import twice.
    before = _counts()
    imports.run_import_job(job_id=job_id)
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
def test_bad_uploads_are_refused_with_file_and_line(demo, name, content, status, message):
    before, jobs = _counts(), ImportJob.objects.count()
    response = _upload(client_for("admin"), name, content)
    assert response.status_code == status
    assert message in response.json()["detail"]
    assert (_counts(), ImportJob.objects.count()) == (before, jobs)
    assert not list(imports.upload_dir().glob("*.jsonl")) or all(
        p.stat().st_size != len(content) for p in imports.upload_dir().glob("*.jsonl")
    )


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
    job = imports.run_import_job(job_id=response.json()["id"])
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

    assert not AuthToken.objects.filter(digest=secret).exists()  # only the hash is kept

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
    with CaptureQueriesContext(connection):
        response = client.get("/api/labels/export/")
    assert response.status_code == 200 and response.streaming
    lines = b"".join(response.streaming_content).decode().splitlines()
    originals = (FIXTURES / "prm800k_phase2.jsonl").read_text().splitlines()
    assert sorted(json.loads(x)["labeler"] for x in lines) == sorted(
        json.loads(x)["labeler"] for x in originals
    )
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
