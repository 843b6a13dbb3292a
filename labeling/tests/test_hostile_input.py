"""Hostile and malformed input: every refusal a 4xx that names the problem, nothing stored,
no uploaded file left behind (issue 16, findings 3, 4 and 8).

Over 500 lines on purpose: one test per hostile shape, each short, read side by side with the
refusal it checks; split by endpoint they would repeat the same fixtures.
"""

import gc
import json
import socket
import time
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils.html import escape
from rest_framework.test import APIClient

from core import store
from core.roles import ROLES
from labeling import mathtext, tokens
from labeling.models import (
    Generation,
    ImportJob,
    LabelingSession,
    Problem,
    Solution,
    StepLabel,
    StepRating,
)
from labeling.services import import_jobs, workbench
from labeling.services.labelers import get_or_create_labeler
from labeling.tests.hostile_text import HOSTILE_TEXT
from labeling.tests.hostile_text import hostile_text as hostile_shape

pytestmark = pytest.mark.django_db
FIXTURES = Path(__file__).parent / "fixtures"
DEEP = "[" * 100_000 + "]" * 100_000
LONG_INTEGER = "9" * 5000


def _create_role_users() -> None:
    # Without passwords: hashing one costs more than most of these tests.
    for role in ROLES:
        User.objects.create(username=role).groups.add(Group.objects.get_or_create(name=role)[0])


@pytest.fixture
def problem():
    _create_role_users()
    return Problem.objects.create(text="What is $6 \\times 7$?", answer="42", unique_id="t/1")


@pytest.fixture
def kept(settings):
    """`kept()`: every file left of uploads, in this test's own artifact store (conftest.py)
    and in this host's scratch space and store cache, so that leftovers can be counted."""

    def files() -> list[Path]:
        folders = (settings.STORE_URL, settings.STORE_SCRATCH_DIR, settings.STORE_CACHE_DIR)
        return [
            p
            for folder in map(Path, folders)
            if folder.is_dir()
            for p in folder.rglob("*")
            if p.is_file()
        ]

    return files


def client_for(role: str) -> APIClient:
    client = APIClient()
    client.force_authenticate(User.objects.get(username=role))
    return client


def post_raw(client: APIClient, url: str, body: str):
    return client.generic("POST", url, body.encode("utf-8"), content_type="application/json")


def counts() -> tuple[int, ...]:
    models = (Problem, Solution, LabelingSession, StepLabel, StepRating, ImportJob, Generation)
    return tuple(model.objects.count() for model in models)


def detail(response) -> str:
    body = response.json()
    return body["detail"] if "detail" in body else json.dumps(body, ensure_ascii=False)


# --- request bodies ------------------------------------------------------------------------


@pytest.fixture
def open_session(problem):
    Solution.objects.create(problem=problem, steps=["6*7=42."], answer="42", is_correct=True)
    labeler = get_or_create_labeler(user=User.objects.get(username="admin"))
    return workbench.next_session(labeler=labeler).session


JSON_ENDPOINTS = [
    "/api/problems/",
    "/api/solutions/",
    "/api/solutions/{solution}/role/",
    "/api/sessions/{session}/rate/",
    "/api/sessions/{session}/submit/",
    "/api/sessions/{session}/human-completion/",
    "/api/tokens/",
    "/api/training-runs/",
    "/api/generations/",
    "/api/imports/",
]


@pytest.mark.parametrize("url", JSON_ENDPOINTS)
def test_a_body_nested_100k_deep_is_a_400_on_every_json_endpoint(open_session, url):
    before = counts()
    url = url.format(solution=open_session.solution_id, session=open_session.pk)
    response = post_raw(client_for("admin"), url, DEEP)
    assert response.status_code == 400, response.content[:300]
    assert "nested deeper than" in detail(response)
    assert counts() == before


@pytest.mark.parametrize(
    "body,message",
    [
        ('[{"unique_id": "t/1", "steps": ["x"], "score": NaN}]', "NaN is not a JSON number"),
        ('[{"unique_id": "t/1", "steps": ["x"], "score": Infinity}]', "Infinity is not a JSON"),
        ('[{"unique_id": "t/1", "steps": ["x"], "score": -Infinity}]', "-Infinity is not a JSON"),
        ('[{"unique_id": "t/1", "steps": ["x"], "score": 1e400}]', "1e400 is out of range"),
        (f'[{{"unique_id": "t/1", "steps": ["x"], "score": {LONG_INTEGER}}}]', "longer than 40"),
        ('[{"unique_id": "t/1", "steps": ["x"], "steps": ["y"]}]', "the key 'steps' appears twice"),
        ('[{"unique_id": "t/1", "steps": ["a\\u0000b"]}]', "NUL character"),
        ('[{"unique_id": "t/1", "steps": ["\\ud800"]}]', "unpaired surrogate"),
    ],
    ids=["nan", "infinity", "minus-infinity", "1e400", "5000-digits", "duplicate", "nul", "half"],
)
def test_json_that_no_strict_reader_takes_is_a_400_naming_it(problem, body, message):
    before = counts()
    response = post_raw(client_for("admin"), "/api/solutions/", body)
    assert response.status_code == 400, response.content[:300]
    assert message in detail(response)
    assert counts() == before


def test_solutions_pages_stay_json_after_hostile_scores_are_refused(problem):
    admin = client_for("admin")
    for score in ("NaN", "Infinity", "1e400", "-1e999"):
        body = f'[{{"unique_id": "t/1", "steps": ["{score}"], "score": {score}}}]'
        assert post_raw(admin, "/api/solutions/", body).status_code == 400
    # Large but finite scores are kept as floats, an integer of 40 digits included.
    fine = '[{"unique_id": "t/1", "steps": ["x"], "score": 1e300}, '
    fine += f'{{"unique_id": "t/1", "steps": ["y"], "score": {10**39}}}]'
    assert post_raw(admin, "/api/solutions/", fine).status_code == 201
    page = admin.get("/api/solutions/")
    assert page.status_code == 200
    assert [s["source_score"] for s in page.json()["results"]] == [1e300, 1e39]


def test_a_duplicate_key_in_a_rating_is_refused_not_last_wins(open_session):
    response = post_raw(
        client_for("admin"),
        f"/api/sessions/{open_session.pk}/rate/",
        '{"step": 0, "rating": 1, "rating": -1}',
    )
    assert response.status_code == 400
    assert "the key 'rating' appears twice" in detail(response)
    assert not StepRating.objects.exists()


# --- bulk creates: field limits from the models ---------------------------------------------


def _long(model, field: str) -> str:
    return "x" * (model._meta.get_field(field).max_length + 1)


@pytest.mark.parametrize(
    "url,item,message",
    [
        (
            "/api/problems/",
            {"problem": "1+1?", "answer": "2", "subject": _long(Problem, "subject")},
            "item:1: 'subject' is longer than 64 characters (65)",
        ),
        (
            "/api/problems/",
            {"problem": "1+1?", "answer": "2", "split": _long(Problem, "split")},
            "item:1: 'split' is longer than 32 characters",
        ),
        (
            "/api/problems/",
            {"problem": "1+1?", "answer": "2", "unique_id": _long(Problem, "unique_id")},
            "item:1: 'unique_id' is longer than 255 characters",
        ),
        (
            "/api/problems/",
            {"problem": "1+1?", "answer": "2", "level": 99999},
            "item:1: 'level' must be at most 5, got 99999",
        ),
        (
            "/api/problems/",
            {"problem": "1+1?", "answer": "2", "level": -3},
            "item:1: 'level' must be at least 1, got -3",
        ),
        (
            "/api/problems/",
            {"problem": "1+1?", "answer": "2", "level": "Level 99999"},
            "item:1: 'level' must be at most 5",
        ),
        (
            "/api/problems/",
            {"problem": "1+1?", "answer": "2\u0000"},
            "NUL character",
        ),
        (
            "/api/solutions/",
            {"unique_id": "t/1", "steps": ["x"], "source": _long(Solution, "source")},
            "item:1: 'source' is longer than 128 characters (129)",
        ),
        (
            "/api/solutions/",
            {"unique_id": "t/1", "steps": ["fine", ""]},
            "item:1: 'steps[1]' is empty",
        ),
        (
            "/api/solutions/",
            {"unique_id": "t/1", "steps": ["  \n"]},
            "item:1: 'steps[0]' is empty",
        ),
        (
            "/api/solutions/",
            {"unique_id": "t/1", "steps": ["x"], "alternatives": {"0": [" "]}},
            "item:1: 'alternatives[0]' must be a list of non-empty strings",
        ),
    ],
    ids=[
        "subject",
        "split",
        "unique-id",
        "level-99999",
        "level-minus-3",
        "level-text",
        "nul",
        "source",
        "empty-step",
        "blank-step",
        "blank-alternative",
    ],
)
def test_bulk_creates_are_checked_against_the_models_before_the_database(
    problem, url, item, message
):
    before = counts()
    response = client_for("admin").post(url, [item], format="json")
    assert response.status_code == 400, response.content[:300]
    assert message in detail(response)
    assert counts() == before


# --- uploads ---------------------------------------------------------------------------------


def upload(client: APIClient, name: str, content: bytes, kind: str):
    file = SimpleUploadedFile(name, content, content_type="application/octet-stream")
    return client.post("/api/imports/", {"kind": kind, "file": file}, format="multipart")


def _prm800k_line(**changes) -> dict:
    line = json.loads((FIXTURES / "prm800k_phase2.jsonl").read_text().splitlines()[0])
    for path, value in changes.items():
        target = line
        *parents, key = path.split("__")
        for part in parents:
            target = target[int(part)] if part.isdigit() else target[part]
        target[key] = value
    return line


def _lines(*objects: dict) -> bytes:
    return "".join(json.dumps(o) + "\n" for o in objects).encode()


PROBLEM_LINE = {"problem": "What is 1+1?", "answer": "2", "unique_id": "u/1"}


@pytest.mark.parametrize(
    "kind,content,message",
    [
        ("problems", b'{"problem": "1+1?", "answer": "2"}\n' + DEEP.encode(), "up.jsonl:2: nested"),
        (
            "problems",
            b'{"problem": "1+1?", "answer": "2", "level": ' + LONG_INTEGER.encode() + b"}\n",
            "up.jsonl:1: a number longer than 40 characters",
        ),
        ("problems", b'{"problem": "1+1?", "answer": NaN}\n', "up.jsonl:1: NaN is not"),
        (
            "problems",
            b'{"problem": "1+1?", "answer": "2", "answer": "3"}\n',
            "up.jsonl:1: the key 'answer' appears twice",
        ),
        (
            "problems",
            _lines(PROBLEM_LINE, {**PROBLEM_LINE, "unique_id": "u/2", "subject": "s" * 65}),
            "up.jsonl:2: 'subject' is longer than 64 characters",
        ),
        (
            "problems",
            _lines({**PROBLEM_LINE, "level": 40000}),
            "up.jsonl:1: 'level' must be at most 5",
        ),
        (
            "solutions",
            _lines({"unique_id": "u/1", "steps": ["x"], "source": "m" * 129}),
            "up.jsonl:1: 'source' is longer than 128",
        ),
        (
            "solutions",
            b'{"unique_id": "u/1", "steps": ["x"], "score": Infinity}\n',
            "up.jsonl:1: Infinity is not a JSON number",
        ),
        ("solutions", _lines({"unique_id": "u/1", "steps": [""]}), "up.jsonl:1: 'steps[0]' is"),
        (
            "prm800k",
            _lines(_prm800k_line(label__total_time=10**20)),
            "up.jsonl:1: 'label.total_time' must be at most 9223372036854775807",
        ),
        (
            "prm800k",
            _lines(_prm800k_line(generation=2**31)),
            "up.jsonl:1: 'generation' must be at most 2147483647",
        ),
        (
            "prm800k",
            _lines(_prm800k_line(label__steps__0__chosen_completion=-(2**31) - 1)),
            "up.jsonl:1: 'label.steps[0].chosen_completion' must be at least -2147483648",
        ),
        (
            "prm800k",
            _lines(_prm800k_line(timestamp="9999-12-31T23:00:00-05:00")),
            "up.jsonl:1: 'timestamp' is not an ISO 8601 time",
        ),
    ],
    ids=[
        "deep",
        "5000-digits",
        "nan",
        "duplicate-key",
        "subject",
        "level",
        "source",
        "infinity",
        "empty-step",
        "total-time",
        "generation",
        "chosen-completion",
        "timestamp",
    ],
)
def test_bad_uploads_are_refused_at_upload_with_file_and_line_and_leave_no_file(
    problem, kept, kind, content, message
):
    before = counts()
    response = upload(client_for("admin"), "up.jsonl", content, kind)
    assert response.status_code == 400, response.content[:300]
    assert response.json()["detail"].startswith(message), response.json()
    assert counts() == before
    assert kept() == []


def test_a_job_that_fails_late_deletes_its_file(problem, kept):
    # Two lines with one id pass the upload's line checks; the import itself refuses them.
    content = _lines(PROBLEM_LINE, {**PROBLEM_LINE, "problem": "What is 2+0?"})
    response = upload(client_for("admin"), "dups.jsonl", content, "problems")
    assert response.status_code == 202
    assert store.exists(ImportJob.objects.get().upload)  # the file and its manifest
    assert len(kept()) == 2
    job = import_jobs.run_import_job(job_id=response.json()["id"])
    assert job.status == "failed" and job.error.startswith("dups.jsonl:2:")
    assert kept() == []


def test_a_job_that_succeeds_deletes_its_file(problem, kept):
    response = upload(client_for("admin"), "ok.jsonl", _lines(PROBLEM_LINE), "problems")
    job = import_jobs.run_import_job(job_id=response.json()["id"])
    assert job.status == "succeeded"
    assert kept() == []


def test_an_upload_over_the_limit_is_refused_and_leaves_no_file(problem, kept, settings):
    settings.IMPORT_MAX_UPLOAD_BYTES = 1000
    # Within the Content-Length allowance for the form around it, over the limit for the file.
    content = _lines(*[{**PROBLEM_LINE, "unique_id": f"u/{i}"} for i in range(40)])
    assert 1000 < len(content) < 64 * 1024
    response = upload(client_for("admin"), "big.jsonl", content, "problems")
    assert response.status_code == 413
    assert "larger than the upload limit (1,000 bytes)" in response.json()["detail"]
    assert kept() == []


def test_an_upload_over_the_limit_is_refused_before_its_body_is_read(
    live_server, settings, tmp_path
):
    """Against a real server: the request claims 100 MB and sends 1 KB; the answer comes at
    once, so nothing waited for (or spooled) the body."""
    settings.IMPORT_MAX_UPLOAD_BYTES = 10 * 1024**2
    _create_role_users()
    token = tokens.create_api_token(user=User.objects.get(username="admin")).token
    host, port = live_server.thread.host, live_server.thread.port
    boundary = "hostile-boundary"
    head = (
        f"--{boundary}\r\n"
        'Content-Disposition: form-data; name="kind"\r\n\r\nproblems\r\n'
        f"--{boundary}\r\n"
        'Content-Disposition: form-data; name="file"; filename="huge.jsonl"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode() + b'{"problem": "x", "answer": "y"}\n' * 30
    request = (
        "POST /api/imports/ HTTP/1.1\r\n"
        f"Host: {host}:{port}\r\n"
        f"Authorization: Token {token}\r\n"
        f"Content-Type: multipart/form-data; boundary={boundary}\r\n"
        f"Content-Length: {100 * 1024**2}\r\n\r\n"
    ).encode()
    started = time.monotonic()
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(request + head)
        answer = b""
        try:
            while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
                chunk = sock.recv(65536)
                if not chunk:
                    break
                answer += chunk
        except TimeoutError:
            pytest.fail(f"no answer within 10 s while the body was withheld: {answer[:200]!r}")
    assert time.monotonic() - started < 10
    assert answer.startswith(b"HTTP/1.1 413"), answer[:300]
    assert b"larger than the upload limit" in answer
    assert not ImportJob.objects.exists()


# --- training parameters (trainer/training/params.py) through the API
# ---------------------------------


@pytest.mark.parametrize(
    "params,message",
    [
        ({"learning_rate": "nan"}, "learning_rate"),
        ({"warmup_ratio": -5}, "warmup_ratio"),
        ({"epochs": True}, "epochs"),
        # The choices are read from a registry (a dict): a list or an object is no key of it.
        ({"label_source": ["human"]}, "label_source must be one of"),
        ({"consensus_sources": {"rollout": 1}}, "consensus_sources must be one of"),
    ],
    ids=["nan-learning-rate", "negative-warmup", "boolean-epochs", "list-source", "object-sources"],
)
def test_bad_training_params_are_a_400(problem, params, message):
    from trainer.models import TrainingRun

    response = client_for("researcher").post(
        "/api/training-runs/", {"params": params}, format="json"
    )
    assert response.status_code == 400, response.content[:300]
    assert message in detail(response)
    assert not TrainingRun.objects.exists()


def test_an_oversized_form_posted_to_a_page_is_refused_before_it_is_read(client, settings):
    # The CSRF check reads a page's form before any view: the refusal still is a 4xx.
    settings.IMPORT_MAX_UPLOAD_BYTES = 10 * 1024**2
    client = type(client)(enforce_csrf_checks=True)
    client.cookies["csrftoken"] = "x" * 32
    body = b'--b\r\nContent-Disposition: form-data; name="username"\r\n\r\nx\r\n--b--\r\n'
    response = client.generic(
        "POST",
        "/accounts/login/",
        body,
        content_type="multipart/form-data; boundary=b",
        CONTENT_LENGTH=str(100 * 1024**2),  # claimed; the test client would fail a read past it
    )
    assert response.status_code == 400


# --- hostile text through the renderers, and invisible characters (issue 27) -----------------

HOSTILE_SIZE = 50_000
# Wall clock, with room for a loaded machine: the quadratic paths took 3 to 20 s and more.
FAST = 0.5


def hostile_text(shape: str, size: int = HOSTILE_SIZE) -> str:
    return hostile_shape(shape, size)


def seconds(call) -> float:
    """The fastest of up to three runs, each after a full garbage collection: a collection of
    the test process's heap landing inside one run doubled a 50 kB page's 0.2 s (on CI's
    2-core AMD machine), and a machine busy elsewhere gets another chance; a slow path is slow
    every time."""
    best = float("inf")
    for _ in range(3):
        gc.collect()
        started = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - started)
        if best < FAST:
            break
    return best


RENDERERS = {
    "math": mathtext.render_math,
    "step": mathtext.render_step,
    "answer": mathtext.render_answer,
    "markdown": mathtext.render_markdown,
}


@pytest.mark.parametrize("renderer", RENDERERS)
@pytest.mark.parametrize("shape", HOSTILE_TEXT)
def test_50_kb_of_hostile_text_renders_in_under_half_a_second(shape, renderer):
    text = hostile_text(shape)
    assert seconds(lambda: RENDERERS[renderer](text)) < FAST


@pytest.mark.parametrize("shape", HOSTILE_TEXT)
def test_a_guideline_as_long_as_markdown_takes_renders_fast_or_says_why_not(shape):
    """At the length limit Markdown is still given the text, unless its shape would make it
    slow: then the page shows it as plain text, saying why, as the admin's form would."""
    text = hostile_text(shape, mathtext.MARKDOWN_MAX_CHARS)
    assert seconds(lambda: mathtext.render_markdown(text)) < FAST
    html = mathtext.render_markdown(text)
    if "markdown-refused" in html:
        reason = mathtext.markdown_refusal(text)
        assert html.startswith(
            f'<p class="markdown-refused">Shown as plain text: {escape(reason)}.</p>'
        )
    assert "<script" not in html


def test_a_real_guideline_of_the_longest_kind_is_rendered_as_markdown(problem):
    from labeling.models import Guideline

    body = Guideline.objects.get().body  # the default guideline, from its migration
    seven = "\n\n".join([body] * 7)
    assert len(seven) <= mathtext.MARKDOWN_MAX_CHARS
    assert mathtext.markdown_refusal(seven) is None
    html = mathtext.render_markdown(seven)
    assert html.count("<table>") == 7 and "markdown-refused" not in html


@pytest.mark.parametrize(
    "shape",
    ["inline-math-open", "display-math-open", "dollar-letter", "begin-align", "backslash",
     "open-bracket", "answer-heading", "invisible"],
)  # fmt: skip
def test_the_inspection_page_of_a_solution_with_a_50_kb_step_answers_fast(client, shape):
    """Under half a second, or (a machine slower than that) in at most twice the time a
    linear page would take, 4 times the text in at most 8 times the time of a quarter of it
    measured in the same run: the quadratic paths took 3 to 20 s and 16 times."""
    _create_role_users()
    client.force_login(User.objects.get(username="researcher"))
    problem = Problem.objects.create(text="What is $1+1$?", answer="2")
    fine = Solution.objects.create(problem=problem, steps=["$1+1=2$."], answer="2", is_correct=True)
    assert client.get(f"/inspect/solutions/{fine.pk}/").status_code == 200  # templates loaded

    def page_seconds(size: int) -> float:
        text = hostile_text(shape, size)
        hostile = Solution.objects.create(
            problem=problem, steps=["Start.", text], answer=text[:5000], is_correct=False
        )
        statuses = []
        taken = seconds(lambda: statuses.append(client.get(f"/inspect/solutions/{hostile.pk}/")))
        assert {r.status_code for r in statuses} == {200}
        return taken

    full, quarter = page_seconds(HOSTILE_SIZE), page_seconds(HOSTILE_SIZE // 4)
    assert full < FAST or full < 8 * quarter, f"{full:.2f} s at 50 kB, {quarter:.2f} s at 12.5 kB"
    assert full < 3.0


def test_the_admin_refuses_a_guideline_markdown_would_render_slowly(client, make_user, monkeypatch):
    from labeling.models import Guideline

    client.force_login(make_user("boss", role="admin", is_staff=True, is_superuser=True))
    url = "/admin/labeling/guideline/add/"
    before = Guideline.objects.count()
    for body, message in [
        ("[" * 5000, "do not close"),
        ("x" * 30_000, "it is 30,000 characters long"),
        ("> " * 40 + "deep", "nests lists or quotes more than 10 deep"),
        ("*a" * 9000, "too dense with emphasis"),
        ("# a\n" * 2000, "too many headings, rules or link definitions"),
        ("a|b\n-|-\n" * 1000, "more than 2,500 cells"),
        ("<a" * 2000, "2,000 HTML tags"),
    ]:
        response = client.post(url, {"title": "Hostile", "body": body})
        assert response.status_code == 200  # the form again, with the error
        page = response.content.decode()
        assert "This guideline cannot be shown as Markdown" in page and message in page
    assert Guideline.objects.count() == before
    fine = {"title": "Fine", "body": "Rate $1+1=2$ as **+1**."}
    # A shape the budgets do not foresee is refused by the time its rendering took.
    monkeypatch.setattr(mathtext, "MARKDOWN_RENDER_LIMIT_S", -1.0)
    assert "Markdown took" in client.post(url, fine).content.decode()
    monkeypatch.undo()
    response = client.post(url, fine)
    assert response.status_code == 302 and Guideline.objects.count() == before + 1
    # One stored anyway (written before the limit, or from a shell) is shown as text, at once.
    Guideline.objects.create(title="Old", body="[" * 30_000)
    started = time.perf_counter()
    page = client.get("/guidelines/").content.decode()
    assert time.perf_counter() - started < FAST
    assert "Shown as plain text: it is 30,000 characters long" in page


def _every_invisible(text: str) -> str:
    from labeling.tests.test_math_rendering import INVISIBLE

    return "".join(f"{text}{char}" for char in INVISIBLE) + text


def test_invisible_characters_reach_the_workbench_and_inspection_pages_marked(client):
    from labeling.tests.test_math_rendering import INVISIBLE, mark

    _create_role_users()
    problem = Problem.objects.create(text=_every_invisible("What is $6 \\times 7$? "), answer="42")
    steps = [_every_invisible("Six sevens $x$ "), "# Answer\n\n4\u202e2"]
    Solution.objects.create(
        problem=problem,
        steps=steps,
        answer="4\u202e2",
        is_correct=True,
        alternatives={"0": [_every_invisible("An alternative ")]},
    )
    annotator = User.objects.get(username="annotator")
    client.force_login(annotator)
    pages = {"workbench": client.get("/label/", follow=True).content.decode()}
    session = LabelingSession.objects.get(labeler__user=annotator)
    rated = client.post(f"/label/{session.pk}/rate/", {"step_index": 0, "rating": -1})
    pages["alternatives"] = rated.content.decode()
    client.force_login(User.objects.get(username="researcher"))
    pages["inspection"] = client.get(f"/inspect/solutions/{session.solution_id}/").content.decode()
    for name, page in pages.items():
        for char in INVISIBLE:
            assert char not in page, (name, f"U+{ord(char):04X}")
            assert mark(char) in page, (name, f"U+{ord(char):04X}")
    assert "An alternative " in pages["alternatives"]
    assert mark("\u202e") in pages["inspection"].split("Ground-truth answer")[1]


def test_an_import_keeps_invisible_characters_and_notes_them(problem):
    admin = client_for("admin")
    lines = _lines(
        {"problem": "Is 2\u202e1 equal to 12?", "answer": "no", "unique_id": "u/1"},
        {"problem": "What is 1\u200b+1?", "answer": "2\u200b", "unique_id": "u/2"},
        {"problem": "What is 2+2?", "answer": "4", "unique_id": "u/3"},
    )
    job = import_jobs.run_import_job(
        job_id=upload(admin, "up.jsonl", lines, "problems").json()["id"]
    )
    assert job.status == "succeeded"
    assert job.result["control_characters"] == {"U+200B": 2, "U+202E": 1}
    (note,) = job.result["notes"]
    assert note.startswith("2 line(s) hold invisible format or control characters")
    assert "U+200B ×2, U+202E ×1" in note and "(up.jsonl:1, up.jsonl:2)" in note
    # The text is stored as it came: the page marks it (test above), nothing is lost.
    assert Problem.objects.get(unique_id="u/1").text == "Is 2\u202e1 equal to 12?"

    solutions = _lines(
        {"unique_id": "u/3", "steps": ["2+2=4.\u2066", "# Answer\n\n4"]},
        {"unique_id": "u/3", "steps": ["So 4."], "alternatives": {"0": ["Four\ufeff."]}},
    )
    response = upload(admin, "s.jsonl", solutions, "solutions")
    job = import_jobs.run_import_job(job_id=response.json()["id"])
    assert job.result["control_characters"] == {"U+2066": 1, "U+FEFF": 1}
    assert "(s.jsonl:1, s.jsonl:2)" in job.result["notes"][0]

    marked = _prm800k_line(label__steps__0__completions__0__text="Step \u202eone.")
    response = upload(admin, "p.jsonl", _lines(marked), "prm800k")
    job = import_jobs.run_import_job(job_id=response.json()["id"])
    assert job.status == "succeeded", job.error
    assert job.result["control_characters"]["U+202E"] >= 1
    assert "p.jsonl:1" in job.result["notes"][0]
