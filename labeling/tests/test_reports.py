"""Bad-problem reports: one labeler's report is recorded, not applied for everyone, and an
admin's review confirms (the problem is marked bad) or dismisses it."""

import io
import json
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from core import prm800k
from core.errors import Conflict
from labeling import quality
from labeling.models import Problem, ProblemReport, Solution
from labeling.services import reports
from labeling.services.workbench import next_session, rate_step, submit_session
from trainer.selection.pool import unlabeled_pool

pytestmark = pytest.mark.django_db


@pytest.fixture
def problem(db):
    return Problem.objects.create(text="What is 2+2?", answer="4", unique_id="p/bad")


@pytest.fixture
def other(db):
    return Problem.objects.create(text="What is 3+3?", answer="6", unique_id="p/good")


def report(labeler, reason: str = "The answer key is wrong.", now=None):
    """Serve the labeler's next solution and end it with a bad-problem report."""
    session = next_session(labeler=labeler, now=now).session
    return submit_session(
        session_id=session.pk,
        labeler=labeler,
        finish_reason="bad_problem",
        finish_reason_text=reason,
        now=now,
    )


def served(labeler) -> Solution | None:
    """The solution the labeler's next session is on (None: nothing to label), left open."""
    got = next_session(labeler=labeler)
    return got.session.solution if got else None


def give_up(labeler) -> Solution:
    """Serve the labeler's next solution and give up on it."""
    got = next_session(labeler=labeler)
    submit_session(
        session_id=got.session.pk, labeler=labeler, finish_reason="give_up", finish_reason_text="x"
    )
    return got.session.solution


def test_a_report_hides_the_problem_from_its_reporter_only(
    problem, other, make_labeler, make_solution
):
    reported = [make_solution(problem, n) for n in range(3)]
    fine = make_solution(other, 9)
    reporter, colleague = make_labeler("reporter"), make_labeler("colleague")

    session = report(reporter)
    assert session.solution == reported[0]
    assert (session.finish_reason, session.finish_reason_text) == (
        "bad_problem",
        "The answer key is wrong.",
    )
    problem.refresh_from_db()
    assert not problem.is_bad
    (filed,) = ProblemReport.objects.all()
    assert (filed.problem, filed.labeler, filed.session_id, filed.status) == (
        problem,
        reporter,
        session.pk,
        "open",
    )

    # The colleague is still served the problem; the reporter only the other problem.
    assert served(colleague) == reported[1]
    assert give_up(reporter) == fine
    assert served(reporter) is None
    # Still in the pool that selection picks from until an admin confirms.
    assert set(unlabeled_pool().filter(problem=problem)) == set(reported[1:])


def test_confirm_excludes_the_problem_from_every_queue_and_from_selection(
    problem, make_labeler, make_solution, make_user
):
    for n in range(3):
        make_solution(problem, n)
    admin = make_user("boss", "admin")
    first, second, colleague = (make_labeler(name) for name in ("first", "second", "colleague"))
    report(first)
    report(second, "Two answers are right.")

    assert reports.confirm_report(problem_id=problem.pk, by=admin) == 2
    problem.refresh_from_db()
    assert problem.is_bad
    assert set(ProblemReport.objects.values_list("status", "reviewed_by")) == {
        ("confirmed", admin.pk)
    }
    assert served(colleague) is None
    assert not unlabeled_pool().filter(problem=problem).exists()
    # Reviewed once: a second review finds nothing open.
    with pytest.raises(reports.ReportRefused, match="no open reports"):
        reports.dismiss_report(problem_id=problem.pk, by=admin)
    with pytest.raises(reports.NoSuchProblem):
        reports.confirm_report(problem_id=problem.pk + 100, by=admin)


def test_dismiss_keeps_the_problem_in_the_queues(
    problem, other, make_labeler, make_solution, make_user
):
    solutions = [make_solution(problem, n) for n in range(3)]
    admin = make_user("boss", "admin")
    reporter, colleague = make_labeler("reporter"), make_labeler("colleague")
    report(reporter)

    assert reports.dismiss_report(problem_id=problem.pk, by=admin) == 1
    problem.refresh_from_db()
    assert not problem.is_bad
    assert ProblemReport.objects.get().status == "dismissed"
    assert reports.open_reports() == []
    assert served(colleague) == solutions[1]
    assert unlabeled_pool().filter(problem=problem).count() == 2
    # The reporter is not asked about it again.
    assert served(reporter) is None


def test_quality_control_is_never_excluded_by_a_report(
    problem, make_labeler, make_solution, make_user
):
    gold = [make_solution(problem, n, is_quality_control=True) for n in range(2)]
    screening = make_solution(problem, 5, is_screening=True)
    shared = make_solution(problem, 9)
    admin = make_user("boss", "admin")
    reporter, colleague = make_labeler("reporter"), make_labeler("colleague")

    # Screening comes first: reported, the problem's quality control is served still.
    assert report(reporter).solution == screening
    assert give_up(reporter) == gold[0]
    assert give_up(reporter) == gold[1]
    assert served(reporter) is None  # only the shared solution is hidden
    assert served(colleague) == screening

    # Confirming would take gold out of quality control: refused, and nothing changes.
    with pytest.raises(reports.ReportRefused, match="3 quality-control or screening") as refused:
        reports.confirm_report(problem_id=problem.pk, by=admin)
    assert isinstance(refused.value, Conflict)  # 409
    problem.refresh_from_db()
    assert not problem.is_bad and ProblemReport.objects.get().status == "open"
    (entry,) = reports.open_reports()
    assert entry.gold_solutions == 3

    # Unmarked on purpose, the problem can be confirmed.
    quality.mark_solutions(solutions=Solution.objects.filter(problem=problem), role=None)
    assert reports.confirm_report(problem_id=problem.pk, by=admin) == 1
    assert not unlabeled_pool().filter(pk=shared.pk).exists()


def test_the_review_page_lists_reports_and_only_admins_review(
    client, problem, other, make_labeler, make_solution, make_user
):
    make_solution(problem, 1)
    make_solution(other, 2)
    reporter = make_labeler("lab7")
    report(reporter, "The answer should be 5.")
    report(reporter, "Unreadable statement.")
    page = reverse("problem-reports")
    confirm = reverse("problem-report-confirm", args=[problem.pk])
    dismiss = reverse("problem-report-dismiss", args=[other.pk])

    client.force_login(make_user("ann", "annotator"))
    assert client.get(page).status_code == 403
    assert client.post(confirm).status_code == 403

    client.force_login(make_user("res", "researcher"))
    listed = client.get(page)
    assert listed.status_code == 200
    html = listed.content.decode()
    for text in ("What is 2+2?", "The answer should be 5.", "Unreadable statement."):
        assert text in html
    assert str(reporter.uuid) in html and "lab7" not in html.split("<main>")[1]
    assert "Confirm bad" not in html
    assert client.post(confirm).status_code == 403
    assert client.post(dismiss).status_code == 403
    assert ProblemReport.objects.filter(status="open").count() == 2

    client.force_login(make_user("boss", "admin"))
    assert "Confirm bad" in client.get(page).content.decode()
    assert client.get(confirm).status_code == 405
    assert client.post(confirm).status_code == 302
    assert client.post(dismiss).status_code == 302
    assert Problem.objects.get(pk=problem.pk).is_bad
    assert not Problem.objects.get(pk=other.pk).is_bad
    after = client.get(page).content.decode()
    assert "No open reports." in after and "1 report(s) on problem" in after
    assert client.post(reverse("problem-report-confirm", args=[999])).status_code == 404


def test_the_review_page_says_why_a_quality_control_problem_is_not_confirmed(
    client, problem, make_labeler, make_solution, make_user
):
    make_solution(problem, 1, is_quality_control=True)
    report(make_labeler("reporter"))
    client.force_login(make_user("boss", "admin"))
    html = client.get(reverse("problem-reports")).content.decode()
    assert "1 quality-control or screening solution: unmark before confirming" in html
    response = client.post(reverse("problem-report-confirm", args=[problem.pk]), follow=True)
    assert "Unmark them in the admin first" in response.content.decode()
    assert not Problem.objects.get().is_bad


def test_the_prm800k_export_of_a_bad_problem_session_is_unchanged(
    problem, make_labeler, make_solution, make_user
):
    solution = make_solution(problem, 1)
    labeler = make_labeler("reporter")
    t0 = timezone.now()
    sid = next_session(labeler=labeler, now=t0).session.pk
    rate_step(
        session_id=sid, labeler=labeler, step_index=0, rating=1, now=t0 + timedelta(seconds=5)
    )
    session = submit_session(
        session_id=sid,
        labeler=labeler,
        finish_reason="bad_problem",
        finish_reason_text="Ambiguous.",
        now=t0 + timedelta(seconds=9),
    )

    def exported() -> dict:
        out = io.StringIO()
        call_command("export_prm800k", "--out", "-", stdout=out, stderr=io.StringIO())
        (record,) = [json.loads(line) for line in out.getvalue().splitlines()]
        return record

    record = exported()
    assert record == {
        **prm800k.modelled_top(
            labeler=labeler.uuid,
            submitted_at=session.submitted_at,
            generation=None,
            is_quality_control=False,
            is_screening=False,
        ),
        "question": record["question"],
        "label": {
            "steps": [
                {
                    "completions": [{"text": solution.steps[0], "rating": 1, "flagged": False}],
                    "human_completion": None,
                    "chosen_completion": 0,
                }
            ],
            "total_time": 9_000,
            "finish_reason": "bad_problem",
        },
    }
    assert record["question"]["pre_generated_steps"] == solution.steps
    # A review changes the problem, never the label already given.
    reports.confirm_report(problem_id=problem.pk, by=make_user("boss", "admin"))
    assert exported() == record
