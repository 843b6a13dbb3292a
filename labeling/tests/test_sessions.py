"""Labeling sessions: queues, leases, ratings, submission: every label is made exactly once."""

import io
import json
import threading
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from labeling.models import Generation, LabelingSession, Problem, Solution, StepRating
from labeling.services.workbench import (
    LEASE,
    LabelingRefused,
    NotYourSession,
    next_session,
    rate_step,
    submit_session,
)


@pytest.fixture
def problem(db):
    return Problem.objects.create(text="What is 2+2?", answer="4")


@pytest.mark.django_db
def test_queues_serve_screening_then_qc_then_generation_then_leftovers(
    problem, make_labeler, make_solution
):
    generation = Generation.objects.create(number=3)
    leftover = make_solution(problem, 1)
    low = make_solution(problem, 2, generation=generation, priority=0.1)
    high = make_solution(problem, 3, generation=generation, priority=0.9)
    qc = make_solution(problem, 4, generation=generation, is_quality_control=True)
    screening = make_solution(problem, 5, is_screening=True)
    labeler = make_labeler("ann")

    served = []
    for _ in range(5):
        next_one = next_session(labeler=labeler)
        served.append((next_one.session.solution_id, next_one.queue))
        submit_session(
            session_id=next_one.session.pk,
            labeler=labeler,
            finish_reason="give_up",
            finish_reason_text="test",
        )
    assert served == [
        (screening.pk, "screening"),
        (qc.pk, "quality_control"),
        (high.pk, "generation"),
        (low.pk, "generation"),
        (leftover.pk, "leftover"),
    ]
    assert next_session(labeler=labeler) is None


@pytest.mark.django_db
def test_qc_is_served_to_every_labeler_but_a_shared_solution_to_one(
    problem, make_labeler, make_solution
):
    qc = make_solution(problem, 1, is_quality_control=True)
    shared = make_solution(problem, 2)
    a, b = make_labeler("a"), make_labeler("b")
    assert next_session(labeler=a).session.solution == qc
    assert next_session(labeler=b).session.solution == qc
    for labeler in (a, b):
        session = next_session(labeler=labeler).session  # resumed
        submit_session(
            session_id=session.pk, labeler=labeler, finish_reason="give_up", finish_reason_text="x"
        )
    assert next_session(labeler=a).session.solution == shared
    assert next_session(labeler=b) is None


@pytest.mark.django_db
def test_open_session_is_resumed_and_expired_lease_returns_solution(
    problem, make_labeler, make_solution
):
    solution = make_solution(problem, 1)
    a, b = make_labeler("a"), make_labeler("b")
    now = timezone.now()
    first = next_session(labeler=a, now=now)
    rate_step(session_id=first.session.pk, labeler=a, step_index=0, rating=1, now=now)
    again = next_session(labeler=a, now=now + timedelta(minutes=5))
    assert (again.session.pk, again.queue) == (first.session.pk, "resumed")
    assert next_session(labeler=b, now=now + timedelta(minutes=5)) is None

    later = now + timedelta(minutes=5) + LEASE + timedelta(seconds=1)
    taken = next_session(labeler=b, now=later)
    assert taken.session.solution == solution
    first.session.refresh_from_db()
    assert first.session.abandoned_at == later
    with pytest.raises(LabelingRefused):
        submit_session(
            session_id=first.session.pk, labeler=a, finish_reason="give_up", finish_reason_text="x"
        )


@pytest.mark.django_db
def test_repeated_and_out_of_order_ratings_never_duplicate(problem, make_labeler, make_solution):
    make_solution(problem, 1)
    labeler = make_labeler("a")
    session = next_session(labeler=labeler).session
    for _ in range(3):  # double click, retry after a timeout, a second tab
        rate_step(session_id=session.pk, labeler=labeler, step_index=0, rating=1)
    assert StepRating.objects.filter(step__session=session).count() == 1
    with pytest.raises(LabelingRefused, match="not reached"):
        rate_step(session_id=session.pk, labeler=labeler, step_index=2, rating=1)
    with pytest.raises(LabelingRefused, match="no step 10"):
        rate_step(session_id=session.pk, labeler=labeler, step_index=9, rating=1)
    with pytest.raises(LabelingRefused, match="-1, 0 or 1"):
        rate_step(session_id=session.pk, labeler=labeler, step_index=1, rating=2)


@pytest.mark.django_db
def test_another_labelers_session_is_refused(problem, make_labeler, make_solution):
    make_solution(problem, 1)
    owner, intruder = make_labeler("a"), make_labeler("b")
    session = next_session(labeler=owner).session
    with pytest.raises(NotYourSession):
        rate_step(session_id=session.pk, labeler=intruder, step_index=0, rating=1)
    with pytest.raises(NotYourSession):
        submit_session(
            session_id=session.pk,
            labeler=intruder,
            finish_reason="give_up",
            finish_reason_text="mine now",
        )


@pytest.mark.django_db
def test_changing_a_minus_one_reopens_the_following_steps(problem, make_labeler, make_solution):
    make_solution(problem, 1)
    labeler = make_labeler("a")
    sid = next_session(labeler=labeler).session.pk
    for i, r in enumerate([1, 0, 1]):
        rate_step(session_id=sid, labeler=labeler, step_index=i, rating=r)
    rate_step(session_id=sid, labeler=labeler, step_index=1, rating=-1)
    # Labels stop at the first error: step 2's rating is gone, and step 2 is unreachable.
    assert StepRating.objects.filter(step__session_id=sid).count() == 2
    with pytest.raises(LabelingRefused, match="not reached"):
        rate_step(session_id=sid, labeler=labeler, step_index=2, rating=1)
    with pytest.raises(LabelingRefused, match="Rate every step"):
        submit_session(session_id=sid, labeler=labeler, finish_reason="solution")
    rate_step(session_id=sid, labeler=labeler, step_index=1, rating=0)
    for i in (2, 3):
        rate_step(session_id=sid, labeler=labeler, step_index=i, rating=1)
    session = submit_session(session_id=sid, labeler=labeler, finish_reason="solution")
    assert session.finish_reason == "solution"
    # Submitting twice is harmless; a different outcome afterwards is refused.
    submit_session(session_id=sid, labeler=labeler, finish_reason="solution")
    with pytest.raises(LabelingRefused):
        submit_session(
            session_id=sid, labeler=labeler, finish_reason="give_up", finish_reason_text="x"
        )


@pytest.mark.django_db
def test_bad_problem_needs_a_reason_and_files_a_report(problem, make_labeler, make_solution):
    make_solution(problem, 1)
    labeler = make_labeler("a")
    sid = next_session(labeler=labeler).session.pk
    with pytest.raises(LabelingRefused, match="reason"):
        submit_session(session_id=sid, labeler=labeler, finish_reason="bad_problem")
    submit_session(
        session_id=sid,
        labeler=labeler,
        finish_reason="bad_problem",
        finish_reason_text="The answer key is wrong.",
    )
    # A report, not a verdict: the problem is marked bad only when an admin confirms it.
    problem.refresh_from_db()
    assert not problem.is_bad
    report = problem.reports.get()
    assert (report.labeler, report.session_id, report.reason) == (
        labeler,
        sid,
        "The answer key is wrong.",
    )


@pytest.mark.django_db
def test_time_on_task_excludes_idle_gaps_and_export_is_prm800k(
    problem, make_labeler, make_solution
):
    make_solution(problem, 1)
    labeler = make_labeler("a")
    t0 = timezone.now()
    sid = next_session(labeler=labeler, now=t0).session.pk
    rate_step(
        session_id=sid, labeler=labeler, step_index=0, rating=1, now=t0 + timedelta(seconds=20)
    )
    rate_step(
        session_id=sid,
        labeler=labeler,
        step_index=1,
        rating=0,
        flagged=True,
        now=t0 + timedelta(seconds=50),
    )
    # A long coffee break counts as at most the idle cap.
    rate_step(session_id=sid, labeler=labeler, step_index=2, rating=-1, now=t0 + timedelta(hours=1))
    session = submit_session(
        session_id=sid,
        labeler=labeler,
        finish_reason="found_error",
        now=t0 + timedelta(hours=1, seconds=10),
    )
    assert session.total_time == 20_000 + 30_000 + 180_000 + 10_000

    out = io.StringIO()
    call_command("export_prm800k", "--out", "-", stdout=out, stderr=io.StringIO())
    (record,) = [json.loads(line) for line in out.getvalue().splitlines()]
    assert record["labeler"] == str(labeler.uuid)
    assert record["label"]["finish_reason"] == "found_error"
    assert record["label"]["total_time"] == session.total_time
    steps = record["label"]["steps"]
    assert [s["completions"][0]["rating"] for s in steps] == [1, 0, -1]
    assert [s["completions"][0]["flagged"] for s in steps] == [False, True, False]
    assert [s["chosen_completion"] for s in steps] == [0, 0, None]
    assert record["question"]["pre_generated_steps"] == Solution.objects.get().steps


@pytest.mark.django_db(transaction=True)
def test_twenty_labelers_at_once_never_share_a_solution(problem, make_labeler, make_solution):
    for n in range(30):
        make_solution(problem, n)
    labelers = [make_labeler(f"l{i}") for i in range(20)]
    barrier = threading.Barrier(len(labelers))
    got, errors = {}, []

    def work(labeler):
        try:
            barrier.wait()
            next_one = next_session(labeler=labeler)
            got[labeler.pk] = next_one.session.solution_id
            # Two tabs submit the same rating at the same moment.
            for _ in range(2):
                rate_step(session_id=next_one.session.pk, labeler=labeler, step_index=0, rating=1)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(repr(exc))
        finally:
            connection.close()

    threads = [threading.Thread(target=work, args=(lab,)) for lab in labelers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    assert len(got) == 20
    assert len(set(got.values())) == 20, "two labelers were given the same solution"
    assert StepRating.objects.count() == 20
    assert LabelingSession.objects.count() == 20


@pytest.mark.django_db
def test_an_open_page_renews_the_lease_over_http(client, problem, make_solution, make_user):
    make_solution(problem, 1)
    user, other = make_user("ann"), make_user("bob")
    client.force_login(user)
    response = client.get("/label/")
    session = LabelingSession.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/label/{session.pk}/"
    before = session.lease_expires_at
    assert client.post(f"/label/{session.pk}/renew/").status_code == 204
    session.refresh_from_db()
    assert session.lease_expires_at > before
    # Another labeler can neither renew, rate, submit nor view it, and is told what a missing
    # session tells: nothing says which session ids exist.
    client.force_login(other)
    assert client.post(f"/label/{session.pk}/renew/").status_code == 404
    rating = {"step_index": 0, "rating": 1}
    theirs = client.post(f"/label/{session.pk}/rate/", rating)
    missing = client.post(f"/label/{session.pk + 1000}/rate/", rating)
    assert theirs.status_code == missing.status_code == 404
    assert f"You have no session {session.pk}." in theirs.content.decode()
    assert f"You have no session {session.pk + 1000}." in missing.content.decode()
    assert (
        client.post(
            f"/label/{session.pk}/submit/", {"finish_reason": "give_up", "reason": "x"}
        ).status_code
        == 404
    )
    assert client.get(f"/label/{session.pk}/").status_code == 404
    assert StepRating.objects.count() == 0
