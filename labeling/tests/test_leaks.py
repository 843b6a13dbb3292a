"""What a labeler or an outsider learns that they should not (issue 27).

One test (or a few) per finding: a labeler sees the problem, its answer and the steps, never
the reference solution or what sorts the problems; labelers are listed in an order that does
not follow their names; a token ends with the credentials it was made under; throttles and
the login lockout count the client's address, not a header the client writes; secrets and
exports are not cached; the schema needs a login; a problem level is MATH's 1 to 5.
Over 500 lines on purpose: one short test per finding, kept together as the review's record.
"""

import io
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from django.contrib.auth.forms import SetPasswordForm
from django.contrib.auth.hashers import get_hasher, make_password
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.db import DataError, IntegrityError, transaction
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from generators import GeneratorSpec, SamplingSettings
from labeling import quality, tokens
from labeling.models import Labeler, LabelingSession, Problem, StepLabel
from labeling.services import live
from labeling.services.importing import ImportFailed, import_problems
from labeling.services.labelers import get_or_create_labeler

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]


# --- 5. a labeler sees the problem and its answer, never the worked solution ----------------

REFERENCE = "Reference-solution-Q7: multiply six by seven to get $42$, then box it."
# What sorts the problems and gives labels away, with values found nowhere else on a page.
PROBLEM_SECRETS = {
    "unique_id": "uid-secret-Q7",
    "subject": "Subject-Secret-Q7",
    "split": "split-secret-Q7",
}
# Keys no labeler's answer may carry, at any depth: the problem's reference solution and
# sorting fields, a solution's verdict, scores, gold and generation internals, and the
# quality-control marks.
FORBIDDEN_KEYS = {
    "ground_truth_solution",
    "is_bad",
    "split",
    "level",
    "subject",
    "unique_id",
    "is_correct",
    "gold_ratings",
    "prm_score",
    "prm_step_scores",
    "prm_model_version",
    "source",
    "source_score",
    "meta",
    "generator",
    "sampling",
    "seed_offset",
    "base_url",
    "is_quality_control",
    "is_screening",
    "queue",
    "generation",
}


def walk(value, path="$"):
    """(path, key, value) of every member of a JSON document, at any depth."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield f"{path}.{key}", key, item
            yield from walk(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from walk(item, f"{path}[{index}]")


def leaks_in_json(document) -> list[str]:
    found = [p for p, key, _ in walk(document) if key in FORBIDDEN_KEYS]
    # The problem's "solution" key is its reference solution; a session's is a solution id.
    found += [p for p, key, v in walk(document) if key == "solution" and isinstance(v, str)]
    return found + leaks_in_text(json.dumps(document, ensure_ascii=False))


def leaks_in_text(text: str) -> list[str]:
    secrets = [REFERENCE, "Reference-solution-Q7", *PROBLEM_SECRETS.values(), "Gold-Q7"]
    return [secret for secret in secrets if secret in text]


@pytest.fixture
def reference_problem(make_solution):
    """A problem with a reference solution, its split and sorting fields, and two solutions
    to label: one quality control with gold and scores, one wrong with a PRM score."""
    problem = Problem.objects.create(
        text="What is $6 \\times 7$?",
        answer="42",
        solution=REFERENCE,
        level=3,
        is_bad=False,
        **PROBLEM_SECRETS,
    )
    make_solution(
        problem,
        steps=["Six sevens.", "# Answer\n\n42"],
        is_quality_control=True,
        gold_ratings=[1, 1],
        prm_score=0.93,
        prm_step_scores=[0.9, 0.95],
        source="Gold-Q7-generator",
        meta={"kind": "Gold-Q7"},
    )
    make_solution(
        problem,
        1,
        steps=["Six and seven make 13.", "# Answer\n\n13"],
        answer="13",
        is_correct=False,
        prm_score=0.12,
        source="Gold-Q7-generator",
    )
    return problem


def test_a_labelers_api_answers_carry_no_reference_solution_nor_what_sorts_problems(
    reference_problem, make_user
):
    client = APIClient()
    client.force_authenticate(make_user("ann"))
    served = client.post("/api/sessions/next/")
    assert served.status_code == 200
    assert served.json()["problem"] == {
        "id": reference_problem.pk,
        "text": reference_problem.text,
        "answer": "42",
        "created_at": served.json()["problem"]["created_at"],
    }
    sid = served.json()["session"]["id"]
    answers = {"next": served, "next again": client.post("/api/sessions/next/")}
    answers["rate"] = client.post(
        f"/api/sessions/{sid}/rate/", {"step": 0, "rating": 1}, format="json"
    )
    answers["detail"] = client.get(f"/api/sessions/{sid}/")
    answers["mine"] = client.get("/api/sessions/")
    client.post(f"/api/sessions/{sid}/rate/", {"step": 1, "rating": 1}, format="json")
    answers["submit"] = client.post(f"/api/sessions/{sid}/submit/", {"finish_reason": "solution"})
    answers["the next one"] = client.post("/api/sessions/next/")
    for name, answer in answers.items():
        assert answer.status_code == 200, (name, answer.content[:300])
        assert not leaks_in_json(answer.json()), (name, leaks_in_json(answer.json()))


def test_researchers_still_see_every_field_of_the_problem_they_label(reference_problem, make_user):
    client = APIClient()
    client.force_authenticate(make_user("res", role="researcher"))
    problem = client.post("/api/sessions/next/").json()["problem"]
    assert problem["solution"] == REFERENCE
    assert (problem["split"], problem["unique_id"], problem["level"]) == (
        "split-secret-Q7",
        "uid-secret-Q7",
        3,
    )
    assert problem["is_bad"] is False
    listed = client.get(f"/api/problems/{reference_problem.pk}/").json()
    assert listed["solution"] == REFERENCE


def test_the_labelers_pages_and_fragments_carry_no_reference_solution(
    client, reference_problem, make_user
):
    client.force_login(make_user("ann"))
    pages = {"workbench": client.get(reverse("label-next"), follow=True)}
    session = LabelingSession.objects.get()
    pages["rating fragment"] = client.post(
        reverse("label-rate", args=[session.pk]),
        {"step_index": 0, "completion_index": 0, "rating": 1},
        HTTP_HX_REQUEST="true",
    )
    client.post(
        reverse("label-rate", args=[session.pk]),
        {"step_index": 1, "completion_index": 0, "rating": 1},
    )
    pages["next session fragment"] = client.post(
        reverse("label-submit", args=[session.pk]),
        {"finish_reason": "solution"},
        HTTP_HX_REQUEST="true",
    )
    pages["my labels"] = client.get(reverse("my-labels"))
    pages["my label"] = client.get(reverse("my-label", args=[session.pk]))
    pages["home"] = client.get(reverse("home"))
    for name, page in pages.items():
        assert page.status_code == 200, name
        html = page.content.decode()
        assert not leaks_in_text(html), (name, leaks_in_text(html))
    # The page is the workbench, with the problem and its answer.
    workbench = pages["workbench"].content.decode()
    assert f'data-session="{session.pk}"' in workbench and "Answer:" in workbench


class OneProposal:
    """A generator that proposes one fixed step (the live tests' fake, reduced)."""

    def __init__(self, spec):
        pass

    def generate(self, *, requests, settings):
        return ["Six times seven is $42$." for _ in requests]

    def close(self):
        pass


def test_a_live_session_shows_no_reference_solution_nor_the_generator(
    client,
    reference_problem,
    make_user,
    monkeypatch,
    eager_tasks,
    django_capture_on_commit_callbacks,
):
    monkeypatch.setattr(live, "open_generator", OneProposal)
    Problem.objects.exclude(pk=reference_problem.pk).delete()
    reference_problem.solutions.all().delete()
    live.create_live_generation(
        user=None,
        problem_ids=[reference_problem.pk],
        generator=GeneratorSpec(
            backend="openai", model="Secret-Model-Q7", base_url="http://gen-secret-q7:8000/v1"
        ),
        settings=SamplingSettings(temperature=0.7, max_tokens=40, seed=3),
        proposals=2,
    )
    user = make_user("ann")
    client.force_login(user)
    with django_capture_on_commit_callbacks(execute=True):
        page = client.get(reverse("label-next"), follow=True)
    session = LabelingSession.objects.get(queue="live")
    api = APIClient()
    api.force_authenticate(user)
    answers = [api.get(f"/api/live/sessions/{session.pk}/")]
    answers.append(
        api.post(
            f"/api/live/sessions/{session.pk}/rate/",
            {"step": 0, "completion": 0, "rating": 1},
            format="json",
        )
    )
    fragment = client.get(reverse("live-steps", args=[session.pk]))
    for answer in answers:
        assert answer.status_code == 200, answer.content[:300]
        assert not leaks_in_json(answer.json()), leaks_in_json(answer.json())
        assert "Secret-Model-Q7" not in answer.content.decode()
        assert "gen-secret-q7" not in answer.content.decode()
    for html in (page.content.decode(), fragment.content.decode()):
        assert "Six times seven" in html or "live-pending" in html
        assert not leaks_in_text(html), leaks_in_text(html)
        assert "Secret-Model-Q7" not in html and "gen-secret-q7" not in html
    # The step itself keeps the generator for the researchers and the export.
    assert StepLabel.objects.get(session=session).extra["live"]["generator"]["model"] == (
        "Secret-Model-Q7"
    )


# --- 6. labelers are listed in an order that does not follow their usernames ----------------


@pytest.fixture
def named_labelers(make_user):
    """Three labelers whose username order is the reverse of their UUID order."""
    made = []
    for name, digit in (("alice", "c"), ("bob", "b"), ("carol", "a")):
        made.append(Labeler.objects.create(user=make_user(name), uuid=uuid.UUID(digit * 32)))
    return made


def test_the_quality_page_lists_labelers_by_uuid_not_by_username(client, make_user, named_labelers):
    by_uuid = sorted(str(labeler.uuid) for labeler in named_labelers)
    by_name = [
        str(labeler.uuid) for labeler in sorted(named_labelers, key=lambda x: x.user.username)
    ]
    assert by_uuid != by_name  # the fixture makes the two orders differ
    assert [str(f.uuid) for f in quality.labeler_figures()] == by_uuid
    for role in ("researcher", "admin"):
        client.force_login(make_user(f"{role}-viewer", role=role))
        html = client.get(reverse("quality")).content.decode()
        shown = [u for u in _data_labelers(html) if u in by_uuid]
        assert shown == by_uuid, role


def _data_labelers(html: str) -> list[str]:
    marker = 'data-labeler="'
    return [part.split('"', 1)[0] for part in html.split(marker)[1:]]


# --- 7. a token ends with the credentials it was made under ----------------------------------


def _works(token: str) -> int:
    return APIClient().get("/api/tokens/", HTTP_AUTHORIZATION=f"Token {token}").status_code


@pytest.fixture
def tokened(make_user):
    """An annotator, a token of theirs that works, and a bystander's token."""
    user = make_user("tok")
    token = tokens.create_api_token(user=user).token
    other = tokens.create_api_token(user=make_user("bystander")).token
    assert _works(token) == 200
    return user, token, other


def _change_password_with_the_command(user, monkeypatch):
    from django.contrib.auth.management.commands import changepassword

    monkeypatch.setattr(
        changepassword.Command, "_get_pass", lambda self, prompt=None: "N3w-horse-89"
    )
    call_command("changepassword", user.username, stdout=io.StringIO())


def _change_password_on_the_admin(user, client, make_user):
    client.force_login(make_user("root", role="admin", is_staff=True, is_superuser=True))
    url = reverse("admin:auth_user_password_change", args=[user.pk])
    answer = client.post(
        url, {"password1": "N3w-horse-89", "password2": "N3w-horse-89", "usable_password": "true"}
    )
    assert answer.status_code == 302, answer.content.decode()[:2000]


def _change_own_password(user, client):
    client.force_login(user)
    answer = client.post(
        reverse("password_change"),
        {
            "old_password": "tok-pass-123",
            "new_password1": "N3w-horse-89",
            "new_password2": "N3w-horse-89",
        },
    )
    assert answer.status_code == 302, answer.content.decode()[:2000]


def _reset_password(user):
    # What the password-reset confirmation page saves, once its link was followed.
    form = SetPasswordForm(user, {"new_password1": "N3w-horse-89", "new_password2": "N3w-horse-89"})
    assert form.is_valid(), form.errors
    form.save()


def _set_password_in_a_shell(user):
    user.set_password("N3w-horse-89")
    user.save()


@pytest.mark.parametrize("path", ["command", "admin", "own page", "reset", "shell"])
def test_a_password_change_ends_every_token_of_the_user(
    tokened, path, client, make_user, monkeypatch
):
    user, token, other = tokened
    second = tokens.create_api_token(user=user, expires_in_days=3).token
    if path == "command":
        _change_password_with_the_command(user, monkeypatch)
    elif path == "admin":
        _change_password_on_the_admin(user, client, make_user)
    elif path == "own page":
        _change_own_password(user, client)
    elif path == "reset":
        _reset_password(user)
    else:
        _set_password_in_a_shell(user)
    user.refresh_from_db()
    assert user.check_password("N3w-horse-89")
    assert (_works(token), _works(second)) == (401, 401)
    assert _works(other) == 200  # someone else's password changed nothing of theirs
    # A new token made after the change works.
    assert _works(tokens.create_api_token(user=user).token) == 200


def test_a_password_change_ends_the_users_other_web_sessions_but_keeps_this_one(tokened, make_user):
    user, _, _ = tokened
    elsewhere, here = Client(), Client()
    elsewhere.force_login(user)
    _change_own_password(user, here)
    assert here.get(reverse("home")).status_code == 200
    assert elsewhere.get(reverse("home")).status_code == 302


def _log_in(client, username: str, password: str) -> bool:
    """Through the login page, as a person does (axes needs the request)."""
    answer = client.post(reverse("login"), {"username": username, "password": password})
    return answer.status_code == 302 and "_auth_user_id" in client.session


def test_a_password_hash_upgrade_at_login_is_no_password_change(tokened, client):
    user, token, _ = tokened
    # A hash of an older algorithm: Django rehashes it at the next login.
    User.objects.filter(pk=user.pk).update(
        password=make_password("tok-pass-123", hasher="pbkdf2_sha1")
    )
    assert _log_in(client, "tok", "tok-pass-123")
    # Rehashed with the preferred hasher (the suite's cheap one; PBKDF2-SHA256 in production).
    assert User.objects.get(pk=user.pk).password.startswith(f"{get_hasher().algorithm}$")
    assert _works(token) == 200


@pytest.mark.parametrize("path", ["quality page", "shell"])
def test_a_deactivation_ends_every_token_even_after_reactivation(tokened, path, client, make_user):
    user, token, other = tokened
    admin = make_user("boss", role="admin")
    if path == "quality page":
        labeler = get_or_create_labeler(user=user)
        client.force_login(admin)
        url = reverse("labeler-active", args=[labeler.uuid])
        assert client.post(url, {"active": "0"}).status_code == 302
    else:
        user.is_active = False
        user.save()
    assert _works(token) == 401
    # Taken back is taken back: reactivating the account does not revive its old tokens.
    User.objects.filter(pk=user.pk).update(is_active=True)
    assert _works(token) == 401
    assert _works(other) == 200


def _admin_change_form(user: User, **changes) -> dict:
    data = {
        "username": user.username,
        "first_name": "",
        "last_name": "",
        "email": "",
        "is_active": "on",
        "groups": [str(g.pk) for g in user.groups.all()],
        "last_login_0": "",
        "last_login_1": "",
        "date_joined_0": timezone.now().strftime("%Y-%m-%d"),
        "date_joined_1": "00:00:00",
    }
    data.update(changes)
    return {k: v for k, v in data.items() if v is not None}


@pytest.mark.parametrize(
    "path",
    [
        "groups.add",
        "groups.remove",
        "groups.clear",
        "group.user_set.add",
        "admin form",
        "superuser",
    ],
)
def test_a_role_change_ends_every_token_of_the_user(tokened, path, client, make_user):
    user, token, other = tokened
    annotator, _ = Group.objects.get_or_create(name="annotator")
    researcher, _ = Group.objects.get_or_create(name="researcher")
    if path == "groups.add":
        user.groups.add(researcher)
    elif path == "groups.remove":
        user.groups.remove(annotator)
    elif path == "groups.clear":
        user.groups.clear()
    elif path == "group.user_set.add":
        researcher.user_set.add(user)
    elif path == "admin form":
        client.force_login(make_user("root", role="admin", is_staff=True, is_superuser=True))
        url = reverse("admin:auth_user_change", args=[user.pk])
        answer = client.post(url, _admin_change_form(user, groups=[str(researcher.pk)]))
        assert answer.status_code == 302, answer.content.decode()[:3000]
        assert list(user.groups.values_list("name", flat=True)) == ["researcher"]
    else:
        user.is_superuser = True
        user.save()
    assert _works(token) == 401
    assert _works(other) == 200


def test_saving_a_user_without_a_change_of_access_keeps_their_tokens(tokened, client):
    user, token, _ = tokened
    user.first_name = "Tess"
    user.save()
    user.groups.add(Group.objects.get(name="annotator"))  # already in it: no change
    assert _log_in(client, "tok", "tok-pass-123")  # saves last_login
    assert _works(token) == 200


# --- 8. throttles and the lockout count the client's address, not a header -----------------


def _anonymous_codes(headers: list[str]) -> list[int]:
    client = APIClient()
    return [
        client.get("/api/problems/", HTTP_X_FORWARDED_FOR=header).status_code for header in headers
    ]


def test_a_rotating_x_forwarded_for_does_not_escape_the_anonymous_throttle():
    # Default settings: no trusted proxy. 140 requests, each naming another address.
    codes = _anonymous_codes([f"10.1.{i // 250}.{i % 250}" for i in range(140)])
    assert codes[:60] == [401] * 60, codes
    assert codes[60:] == [429] * 80, codes


@pytest.fixture
def one_proxy(settings):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}


def test_behind_one_proxy_the_address_it_appends_is_the_client(one_proxy):
    # The client writes what it likes on the left; the proxy appends the address it saw.
    spoofed = _anonymous_codes([f"10.9.0.{i}, 203.0.113.7" for i in range(70)])
    assert spoofed[:60] == [401] * 60 and spoofed[60:] == [429] * 10, spoofed
    # Another client behind the same proxy has a count of its own.
    assert _anonymous_codes(["203.0.113.8"]) == [401]


def test_trusted_proxy_count_is_read_from_the_environment(tmp_path):
    script = (
        "from django.conf import settings; from core.clientip import client_address;"
        "print(settings.REST_FRAMEWORK['NUM_PROXIES'], settings.AXES_CLIENT_IP_CALLABLE)"
    )
    seen = {}
    for value in (None, "2"):
        env = {k: v for k, v in os.environ.items() if k != "TRUSTED_PROXY_COUNT"}
        env["STEPWISE_VAR_DIR"] = str(tmp_path)
        if value is not None:
            env["TRUSTED_PROXY_COUNT"] = value
        done = subprocess.run(
            [sys.executable, "manage.py", "shell", "--no-imports", "-c", script],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
        seen[value] = done.stdout.split()
    assert seen[None] == ["0", "core.clientip.client_address"]
    assert seen["2"][0] == "2"


def _login(client, password: str, forwarded: str) -> int:
    answer = client.post(
        reverse("login"),
        {"username": "victim", "password": password},
        HTTP_X_FORWARDED_FOR=forwarded,
    )
    return answer.status_code


def test_a_rotating_x_forwarded_for_does_not_escape_the_login_lockout(client, settings, make_user):
    settings.AXES_FAILURE_LIMIT = 3
    make_user("victim")
    for i in range(3):
        _login(client, "wrong", f"10.2.0.{i}")
    assert _login(client, "victim-pass-123", "10.2.0.99") == 429


def test_behind_one_proxy_the_lockout_is_per_client(client, settings, make_user, one_proxy):
    settings.AXES_FAILURE_LIMIT = 3
    make_user("victim")
    for i in range(3):
        _login(client, "wrong", f"10.3.0.{i}, 198.51.100.1")
    # The guesser stays locked out whatever it writes on the left ...
    assert _login(client, "victim-pass-123", "10.3.0.99, 198.51.100.1") == 429
    # ... and the real user behind the same proxy, from another address, is not.
    assert _login(Client(), "victim-pass-123", "198.51.100.2") == 302


# --- 9. secrets and exports are not cached; the schema needs a login; levels are 1 to 5 ------


def _no_store(response) -> bool:
    return "no-store" in response.get("Cache-Control", "")


@pytest.fixture
def submitted_label(make_labeler, make_solution):
    problem = Problem.objects.create(text="What is 1 + 1?", answer="2")
    solution = make_solution(problem)
    now = timezone.now()
    return LabelingSession.objects.create(
        labeler=make_labeler("lab"),
        solution=solution,
        started_at=now,
        submitted_at=now,
        finish_reason="solution",
        total_time=1000,
    )


def test_secrets_and_exports_are_never_stored_by_a_cache(client, make_user, submitted_label):
    admin = make_user("root", role="admin", is_staff=True, is_superuser=True)
    api = APIClient()
    api.force_authenticate(admin)
    client.force_login(admin)
    answers = {
        "POST /api/tokens/": api.post("/api/tokens/", {}, format="json"),
        "GET /api/tokens/": api.get("/api/tokens/"),
        "token page": client.get(reverse("api-token-page")),
        "token page, new token": client.post(reverse("api-token-page"), {"expires_in_days": ""}),
        "API export": api.get("/api/labels/export/"),
        "export page download": client.get(reverse("export-labels") + "?download=1"),
        "admin export action": client.post(
            reverse("admin:labeling_labelingsession_changelist"),
            {"action": "export_prm800k", "_selected_action": [submitted_label.pk]},
        ),
        "quality page": client.get(reverse("quality")),
    }
    for name, answer in answers.items():
        assert answer.status_code in (200, 201), (name, answer.status_code)
        assert _no_store(answer), (name, answer.get("Cache-Control"))
    assert "token" in answers["POST /api/tokens/"].json()
    assert b"new-token" in answers["token page, new token"].content
    assert answers["admin export action"]["Content-Disposition"].startswith("attachment")
    # An ordinary page is left to the usual rules.
    assert not _no_store(client.get(reverse("guidelines")))


def test_the_schema_and_its_docs_need_a_login(client, make_user, settings):
    assert APIClient().get("/api/schema/").status_code == 401
    docs = client.get("/api/docs/")
    assert docs.status_code == 302 and docs["Location"].startswith(reverse("login"))
    assert "next=/api/docs/" in docs["Location"]

    user = make_user("reader")
    client.force_login(user)
    assert client.get("/api/schema/").status_code == 200
    assert client.get("/api/docs/").status_code == 200
    token = tokens.create_api_token(user=user).token
    assert APIClient().get("/api/schema/", HTTP_AUTHORIZATION=f"Token {token}").status_code == 200

    settings.API_SCHEMA_PUBLIC = True
    assert APIClient().get("/api/schema/").status_code == 200
    assert Client().get("/api/docs/").status_code == 200


BAD_LEVELS = [0, 6, 99999, "Level 0", "Level 6"]


@pytest.mark.parametrize("level", BAD_LEVELS)
def test_a_level_outside_1_to_5_is_refused_by_an_import_with_file_and_line(tmp_path, level):
    path = tmp_path / "problems.jsonl"
    lines = [{"problem": "1+1?", "answer": "2", "level": 2}, {"problem": "2+2?", "answer": "4"}]
    lines[1]["level"] = level
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with pytest.raises(ImportFailed) as refused:
        import_problems(path=path, name="problems.jsonl")
    assert str(refused.value).startswith("problems.jsonl:2: 'level' must be at ")
    assert Problem.objects.count() == 0  # all or nothing


@pytest.mark.parametrize("level", [0, 6, 99999])
def test_a_level_outside_1_to_5_is_a_400_in_the_api(make_user, level):
    api = APIClient()
    api.force_authenticate(make_user("root", role="admin"))
    answer = api.post(
        "/api/problems/", [{"problem": "1+1?", "answer": "2", "level": level}], format="json"
    )
    assert answer.status_code == 400
    limit = "at least 1" if level < 1 else "at most 5"
    assert answer.json()["detail"] == f"item:1: 'level' must be {limit}, got {level}"
    assert not Problem.objects.exists()


@pytest.mark.parametrize("level", [0, 6, 99999])
def test_a_level_outside_1_to_5_is_refused_by_the_admin(client, make_user, level):
    client.force_login(make_user("root", role="admin", is_staff=True, is_superuser=True))
    answer = client.post(
        reverse("admin:labeling_problem_add"),
        {"text": "1+1?", "answer": "2", "solution": "", "subject": "", "level": str(level)},
    )
    assert answer.status_code == 200  # the form again, with the error
    assert "Ensure this value is" in answer.content.decode()
    assert not Problem.objects.exists()


@pytest.mark.parametrize("level", [0, 6, 99999])
def test_the_database_refuses_a_level_outside_1_to_5(level):
    # The CHECK; PostgreSQL's smallint refuses 99999 even before it (a DataError).
    refused = (IntegrityError, DataError)
    with pytest.raises(refused), transaction.atomic():
        Problem.objects.create(text="1+1?", answer="2", level=level)
    problem = Problem.objects.create(text="1+1?", answer="2", level=5)
    with pytest.raises(refused), transaction.atomic():
        Problem.objects.filter(pk=problem.pk).update(level=level)


def test_levels_1_to_5_and_maths_unknown_level_are_accepted(tmp_path):
    path = tmp_path / "problems.jsonl"
    lines = [{"problem": f"{n}+1?", "answer": str(n + 1), "level": n} for n in (1, 5)]
    lines += [
        {"problem": "9+1?", "answer": "10", "level": "Level 5"},
        # MATH writes "Level ?" for a few problems: no level, not a refusal.
        {"problem": "8+1?", "answer": "9", "level": "Level ?"},
        {"problem": "7+1?", "answer": "8"},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert import_problems(path=path, name="p.jsonl").created == 5
    assert sorted(Problem.objects.values_list("level", flat=True), key=str) == [
        1,
        5,
        5,
        None,
        None,
    ]


def test_the_demo_problems_have_levels_in_range():
    call_command("seed_demo", "--no-labels", stdout=io.StringIO())
    levels = set(Problem.objects.values_list("level", flat=True))
    assert levels and levels <= {1, 2, 3, 4, 5}
