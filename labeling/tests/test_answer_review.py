"""Issue 40, "unsure goes to a person": the answer-review queue, a decision, its snapshot, the
API's roles and statuses, the JSONL export, and grading that leaves a person's decision alone."""

import io
import json
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from core.errors import Invalid, NotFound
from labeling import selectors
from labeling.models import AnswerReview, Problem, Solution
from labeling.services.answer_review import AnswerAlreadyDecided, decide_answer
from labeling.services.labelers import get_or_create_labeler

pytestmark = pytest.mark.django_db


def _solution(problem: Problem, answer: str, *, is_correct=None, age_minutes: int = 0) -> Solution:
    solution = Solution.objects.create(
        problem=problem,
        steps=[f"Some work towards {answer!r}.", f"# Answer\n\n{answer}"],
        answer=answer,
        is_correct=is_correct,
    )
    if age_minutes:
        Solution.objects.filter(pk=solution.pk).update(
            created_at=timezone.now() - timedelta(minutes=age_minutes)
        )
    return solution


@pytest.fixture
def problem():
    return Problem.objects.create(
        text="At what time is the meeting, if it starts $3$ hours after $9$ a.m.?",
        answer="12 p.m.",
        unique_id="test/review/1.json",
    )


@pytest.fixture
def rita(make_user):
    return make_user("rita", "researcher")


def test_the_queue_holds_ungraded_answers_with_something_to_compare_oldest_first(problem):
    newer = _solution(problem, "noon", age_minutes=1)
    older = _solution(problem, "12:00 pm", age_minutes=5)
    _solution(problem, "12", is_correct=True)  # graded
    _solution(problem, "11", is_correct=False)  # graded
    _solution(problem, "")  # no final answer read
    _solution(problem, "   ")  # nothing but spaces
    no_truth = Problem.objects.create(text="What is the time?", answer=" ")
    _solution(no_truth, "noon")

    assert list(selectors.answer_review_queue()) == [older, newer]
    assert list(selectors.answer_review_queue(skipped=[older.pk])) == [newer]


def test_a_decision_sets_correctness_keeps_the_texts_and_leaves_the_queue(problem, rita):
    noon = _solution(problem, "noon")
    review = decide_answer(solution_id=noon.pk, user=rita, verdict="equal")

    noon.refresh_from_db()
    assert noon.is_correct is True
    assert (review.answer, review.ground_truth, review.decided_by) == ("noon", "12 p.m.", rita)
    assert list(selectors.answer_review_queue()) == []

    # Later edits of either text do not change what was compared.
    Problem.objects.filter(pk=problem.pk).update(answer="12:00")
    Solution.objects.filter(pk=noon.pk).update(answer="twelve noon")
    review.refresh_from_db()
    assert (review.answer, review.ground_truth) == ("noon", "12 p.m.")

    midnight = _solution(problem, "midnight")
    decide_answer(solution_id=midnight.pk, user=rita, verdict="not_equal")
    midnight.refresh_from_db()
    assert midnight.is_correct is False


def test_deciding_twice_is_a_conflict_that_names_who_decided(problem, rita, make_user):
    noon = _solution(problem, "noon")
    decide_answer(solution_id=noon.pk, user=rita, verdict="equal")

    with pytest.raises(AnswerAlreadyDecided, match="by rita"):
        decide_answer(solution_id=noon.pk, user=make_user("ada", "admin"), verdict="not_equal")
    noon.refresh_from_db()
    assert noon.is_correct is True and AnswerReview.objects.count() == 1


def test_graded_unknown_and_bad_verdicts_are_refused(problem, rita):
    graded = _solution(problem, "12 p.m.", is_correct=True)
    with pytest.raises(AnswerAlreadyDecided, match="not ungraded"):
        decide_answer(solution_id=graded.pk, user=rita, verdict="not_equal")
    with pytest.raises(NotFound):
        decide_answer(solution_id=graded.pk + 100, user=rita, verdict="equal")
    with pytest.raises(Invalid):
        decide_answer(solution_id=_solution(problem, "noon").pk, user=rita, verdict="unsure")
    assert AnswerReview.objects.count() == 0


def test_regrading_leaves_a_persons_decision_alone(rita):
    problem = Problem.objects.create(text="What is $6 \\cdot 7$?", answer="42")
    # Stored ungraded (the grader was unsure when it was imported); a person then decided.
    decided = _solution(problem, "42")
    waiting = _solution(problem, "42.0")
    decide_answer(solution_id=decided.pk, user=rita, verdict="not_equal")

    out = io.StringIO()
    call_command("regrade", stdout=out)

    decided.refresh_from_db()
    waiting.refresh_from_db()
    assert decided.is_correct is False  # the person's verdict, though the grader says equal
    assert waiting.is_correct is True  # the undecided one was graded again


# --- the API --------------------------------------------------------------------------------


def _api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_annotators_are_refused_every_endpoint(problem, make_user):
    noon = _solution(problem, "noon")
    api = _api(make_user("ann"))
    assert api.get(reverse("api-answer-review-queue")).status_code == 403
    assert api.get(reverse("api-answer-review-export")).status_code == 403
    post = api.post(reverse("api-answer-reviews"), {"solution": noon.pk, "verdict": "equal"})
    assert post.status_code == 403
    assert APIClient().get(reverse("api-answer-review-queue")).status_code in (401, 403)


def test_the_api_serves_the_queue_and_takes_decisions(problem, rita, make_user):
    older = _solution(problem, "12:00 pm", age_minutes=5)
    newer = _solution(problem, "noon")
    graded = _solution(problem, "12 p.m.", is_correct=True)
    api = _api(rita)

    queue = api.get(reverse("api-answer-review-queue"), {"limit": 1}).json()
    assert queue["count"] == 2
    assert [(i["solution"], i["answer"], i["ground_truth"]) for i in queue["results"]] == [
        (older.pk, "12:00 pm", "12 p.m.")
    ]
    skipping = api.get(reverse("api-answer-review-queue"), {"skipped": [older.pk]}).json()
    assert [i["solution"] for i in skipping["results"]] == [newer.pk]

    url = reverse("api-answer-reviews")
    bad = api.post(url, {"solution": older.pk, "verdict": "maybe"}, format="json")
    assert bad.status_code == 400
    assert api.post(url, {"solution": 10**6, "verdict": "equal"}, format="json").status_code == 404
    made = api.post(url, {"solution": older.pk, "verdict": "equal"}, format="json")
    assert made.status_code == 201, made.content
    assert made.json()["decided_by"] == str(get_or_create_labeler(user=rita).uuid)
    again = _api(make_user("ada", "admin")).post(
        url, {"solution": older.pk, "verdict": "not_equal"}, format="json"
    )
    assert again.status_code == 409 and "rita" in again.json()["detail"]
    graded_post = api.post(url, {"solution": graded.pk, "verdict": "equal"}, format="json")
    assert graded_post.status_code == 409


def test_the_export_is_jsonl_of_pairs_naming_the_decider_by_uuid(problem, rita, make_user):
    noon = _solution(problem, "noon", age_minutes=2)
    midnight = _solution(problem, "midnight")
    decide_answer(solution_id=noon.pk, user=rita, verdict="equal")
    olga = make_user("olga", "admin")
    decide_answer(solution_id=midnight.pk, user=olga, verdict="not_equal")

    response = _api(olga).get(reverse("api-answer-review-export"))
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/jsonl")
    body = b"".join(response.streaming_content).decode()
    lines = [json.loads(line) for line in body.splitlines()]
    assert [(line["answer"], line["ground_truth"], line["verdict"]) for line in lines] == [
        ("noon", "12 p.m.", "equal"),
        ("midnight", "12 p.m.", "not_equal"),
    ]
    assert lines[0]["decided_by"] == str(get_or_create_labeler(user=rita).uuid)
    assert lines[1]["decided_by"] == str(get_or_create_labeler(user=olga).uuid)
    assert {line["problem_unique_id"] for line in lines} == {"test/review/1.json"}
    assert all(line["decided_at"] for line in lines)
    assert "rita" not in body and "olga" not in body  # (letters no UUID holds)


# --- the page -------------------------------------------------------------------------------


def test_the_page_is_for_researchers_and_admins(client, problem, rita, make_user):
    _solution(problem, "noon")
    client.force_login(make_user("ann"))
    assert client.get(reverse("answer-review")).status_code == 403
    client.force_login(rita)
    page = client.get(reverse("answer-review")).content.decode()
    assert 'data-answer="solution"' in page and "noon" in page
    assert 'href="/answers/review/"' in page  # in the navigation


def test_the_page_decides_skips_and_shows_the_empty_state(client, problem, rita):
    noon = _solution(problem, "noon", age_minutes=2)
    midnight = _solution(problem, "midnight")
    client.force_login(rita)

    skipped = client.get(reverse("answer-review"), {"skipped": str(noon.pk)}).content.decode()
    assert f'data-solution="{midnight.pk}"' in skipped
    response = client.post(
        reverse("answer-review-decide", args=[midnight.pk]),
        {"verdict": "not_equal", "skipped": str(noon.pk)},
    )
    assert response.status_code == 302 and f"skipped={noon.pk}" in response["Location"]
    midnight.refresh_from_db()
    assert midnight.is_correct is False

    empty = client.get(response["Location"]).content.decode()
    assert "Nothing to review" in empty and "start again" in empty
    decide_answer(solution_id=noon.pk, user=rita, verdict="equal")
    assert "Nothing to review" in client.get(reverse("answer-review")).content.decode()


def test_an_answer_the_grader_is_unsure_of_is_stored_ungraded_and_queued(problem, rita):
    # Answers with something the grader does not read: a relation it does not compare, a
    # time of day without a.m. or p.m., a unit on a function's argument. Each of them would
    # have been graded on a fragment before; now they wait for a person.
    problem.answer = "75"
    problem.save()
    unsure = {
        "x \\approx 75": _solution(problem, "x \\approx 75"),
        "75 \\pmod{360}": _solution(problem, "75 \\pmod{360}"),
        "\\log 75 \\text{ m}": _solution(problem, "\\log 75 \\text{ m}"),
    }
    wrong = _solution(problem, "76")
    call_command("regrade", stdout=io.StringIO())
    for solution in unsure.values():
        solution.refresh_from_db()
        assert solution.is_correct is None
    wrong.refresh_from_db()
    assert wrong.is_correct is False
    queued = {s.answer for s in selectors.answer_review_queue()}
    assert queued == set(unsure)
    decide_answer(solution_id=unsure["x \\approx 75"].pk, user=rita, verdict="equal")
    unsure["x \\approx 75"].refresh_from_db()
    assert unsure["x \\approx 75"].is_correct is True


def test_decided_pairs_measure_the_grader_through_the_export(problem, rita, tmp_path):
    # The team's own hand-judged pairs: exported, then graded by `measure_grading`, which
    # reports the figures the docs give for the project's corpora.
    problem.answer = "12 p.m."
    problem.save()
    decide_answer(solution_id=_solution(problem, "noon").pk, user=rita, verdict="equal")
    decide_answer(solution_id=_solution(problem, "3 p.m.").pk, user=rita, verdict="not_equal")
    decide_answer(solution_id=_solution(problem, "12:00").pk, user=rita, verdict="equal")
    export = tmp_path / "reviewed.jsonl"
    export.write_text("".join(json.dumps(p) + "\n" for p in selectors.answer_review_pairs()))
    out = io.StringIO()
    call_command("measure_grading", str(export), stdout=out)
    report = out.getvalue()
    # `noon` and `3 p.m.` are decided right; `12:00` may be noon or midnight: unsure.
    assert "3 pairs; on the 2 decided, accuracy 100.00%, 0 false accepts; unsure 33.3%" in report
    assert "review: 1 unsure: '12:00' vs '12 p.m.'" in report

    export.write_text('{"answer": "5"}\n')
    with pytest.raises(CommandError, match="reviewed.jsonl:1"):
        call_command("measure_grading", str(export))
