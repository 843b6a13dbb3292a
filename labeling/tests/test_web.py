"""The pages of the foundation: login, the problem list, and the admin's export download."""

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command
from django.urls import reverse

from labeling.demo.seed import DEMO_ACCOUNTS
from labeling.mathtext import render_excerpt
from labeling.models import Generation, LabelingSession, Problem, Solution

pytestmark = pytest.mark.django_db
FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def demo():
    call_command("seed_demo", "--no-labels", stdout=io.StringIO())


def sign_in(client, username: str, password: str) -> bool:
    """Log in through the real login form (which django-axes guards)."""
    response = client.post(reverse("login"), {"username": username, "password": password})
    return response.status_code == 302


def login(client, role: str) -> None:
    username, password, _ = next(a for a in DEMO_ACCOUNTS if a[2] == role)
    assert sign_in(client, username, password)


def test_seed_demo_loads_varied_problems_and_solutions_idempotently(demo):
    problems = Problem.objects.all()
    assert problems.count() >= 40
    assert len(set(problems.values_list("subject", flat=True))) >= 5
    assert len(set(problems.values_list("level", flat=True))) >= 4
    for problem in problems:
        solutions = list(problem.solutions.all())
        assert len(solutions) >= 3, problem
        assert any(s.is_correct for s in solutions), problem
        assert any(not s.is_correct for s in solutions), problem
    # Some solutions contain a wrong step yet reach the right answer.
    right_answer_wrong_step = [
        s for s in Solution.objects.filter(is_correct=True) if -1 in s.meta.get("gold_ratings", [])
    ]
    assert len(right_answer_wrong_step) >= 10
    # The grader agrees with the demo's own account of which answers are right.
    for s in Solution.objects.all():
        assert s.is_correct == (s.meta["kind"] != "wrong_answer"), (s.answer, s.problem.answer)

    before = (Problem.objects.count(), Solution.objects.count())
    call_command("seed_demo", stdout=io.StringIO())
    assert (Problem.objects.count(), Solution.objects.count()) == before


def test_seed_demo_prints_working_credentials(client):
    out = io.StringIO()
    call_command("seed_demo", stdout=out)
    for username, password, role in DEMO_ACCOUNTS:
        assert f"{username} / {password}" in out.getvalue()
        assert sign_in(client, username, password), role


def test_anonymous_users_are_sent_to_login(client):
    response = client.get(reverse("problem-list"))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_problem_list_shows_researchers_the_demo_problems_escaped(client, demo):
    Problem.objects.create(text="<script>alert(1)</script> What is 2+2?", answer="4")
    login(client, "annotator")
    assert client.get(reverse("problem-list")).status_code == 403
    login(client, "researcher")
    pages = client.get(reverse("problem-list")).context["page"].paginator.page_range
    page = "".join(client.get(reverse("problem-list"), {"page": n}).content.decode() for n in pages)
    for problem in Problem.objects.all():  # each problem's start, its math marked for KaTeX
        assert render_excerpt(problem.text, 160) in page, problem
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<script>alert(1)" not in page


def test_admin_downloads_the_export_as_a_streamed_file_with_filters(client, demo):
    call_command("import_prm800k", str(FIXTURES / "prm800k_phase2.jsonl"), stdout=io.StringIO())
    lines = [json.loads(x) for x in (FIXTURES / "prm800k_phase2.jsonl").read_text().splitlines()]
    login(client, "admin")

    assert client.get(reverse("export-labels")).status_code == 200
    response = client.get(
        reverse("export-labels"), {"download": "1", "include_quality_control": "on"}
    )
    assert response.status_code == 200 and response.streaming
    assert response["Content-Disposition"].startswith("attachment; filename=")
    body = b"".join(response.streaming_content).decode()
    assert [json.loads(x) for x in body.splitlines()] == lines

    # An unticked checkbox is absent from the query: QC sessions are left out.
    response = client.get(reverse("export-labels"), {"download": "1"})
    exported = [json.loads(x) for x in b"".join(response.streaming_content).splitlines()]
    assert exported == [o for o in lines if not o["is_quality_control_question"]]

    response = client.get(reverse("export-labels"), {"download": "1", "labeler": "bob"})
    assert response.status_code == 400


@pytest.mark.parametrize("role", ["annotator", "researcher"])
def test_only_admins_may_export(client, demo, role):
    login(client, role)
    assert client.get(reverse("export-labels")).status_code == 403
    assert client.get(reverse("export-labels"), {"download": "1"}).status_code == 403


def test_admin_action_exports_the_selected_sessions(client, demo):
    call_command("import_prm800k", str(FIXTURES / "prm800k_phase2.jsonl"), stdout=io.StringIO())
    chosen = list(LabelingSession.objects.order_by("id").values_list("id", flat=True)[:2])
    login(client, "admin")
    response = client.post(
        reverse("admin:labeling_labelingsession_changelist"),
        {"action": "export_prm800k", "_selected_action": chosen},
    )
    assert response.status_code == 200
    body = b"".join(response.streaming_content).decode()
    assert len(body.splitlines()) == 2


def test_users_without_a_role_cannot_label(client, django_user_model):
    user = django_user_model.objects.create_user("visitor", password="pw-visitor-1")
    client.force_login(user)
    assert client.get(reverse("label-next")).status_code == 403


def test_deactivated_labelers_are_refused(client, demo, django_user_model):
    user = django_user_model.objects.get(username="annotator")
    client.force_login(user)
    assert client.get(reverse("label-next")).status_code == 302
    user.is_active = False
    user.save()
    client.force_login(user)
    # Django logs an inactive user out; the labeling pages send them to the login page.
    assert client.get(reverse("label-next"))["Location"].startswith(reverse("login"))


@pytest.mark.parametrize("role", ["quality_control", "screening"])
def test_quality_control_is_blind_on_the_labelers_page(client, make_user, make_solution, role):
    problem = Problem.objects.create(text="What is $3+4$?", answer="7")
    fields = {"is_quality_control": True} if role == "quality_control" else {"is_screening": True}
    if role == "screening":
        fields["generation"] = Generation.objects.create(number=Generation.SCREENING)
    make_solution(problem, steps=["Three and four.", "# Answer\n\n7"], **fields)
    # A second one, so that a submission swaps the next session in (prefetch).
    make_solution(problem, 1, steps=["Four and three.", "# Answer\n\n7"], **fields)
    client.force_login(make_user("ann"))
    opened = client.get(reverse("label-next"), follow=True)
    session = LabelingSession.objects.get()
    assert session.queue == role  # served from it, and the page does not say so
    pages = [opened]
    for step in (0, 1):
        url = reverse("label-rate", args=[session.pk])
        pages.append(client.post(url, {"step_index": step, "completion_index": 0, "rating": 1}))
    pages.append(
        client.post(
            reverse("label-submit", args=[session.pk]),
            {"finish_reason": "solution"},
            HTTP_HX_REQUEST="true",
        )
    )
    for page in pages:
        assert page.status_code == 200
        text = page.content.decode().lower()
        giveaways = ("quality_control", "quality control", "quality-control", "screening")
        giveaways += ("generation", "leftover", "is_quality_control", "served from")
        assert not [word for word in giveaways if word in text], text
    assert "data-session" in pages[-1].content.decode()  # the next session came in


def test_a_rating_names_its_step_and_the_answer_names_the_press(client, make_user, make_solution):
    make_solution(Problem.objects.create(text="What is $3+4$?", answer="7"))
    client.force_login(make_user("ann"))
    client.get(reverse("label-next"))
    url = reverse("label-rate", args=[LabelingSession.objects.get().pk])
    # No "rate the active step": the page's active step may be stale when the request lands.
    missing = client.post(url, {"rating": 1})
    assert missing.status_code == 400 and b"step_index is required" in missing.content
    answer = client.post(url, {"step_index": 0, "completion_index": 0, "rating": 1, "seq": 7})
    assert 'data-seq="7"' in answer.content.decode()
    assert list(LabelingSession.objects.get().step_labels.values_list("index", flat=True)) == [0]
