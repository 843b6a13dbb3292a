"""Races of the labeling side, each forced at the moment that used to break it.

Two requests at once must leave a state that the same two requests made one after the other
could have left. Each test places a `Meeting` inside the service between its read and its
write (labeling/tests/interleave.py): on the old code both requests got there and both wrote;
now the database makes the second one wait (a lock) or refuse (a constraint).
"""

import importlib
import threading
from datetime import timedelta

import pytest
import requests
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from labeling.models import LabelingSession, Problem
from labeling.services import overlap, workbench
from labeling.services.labelers import get_or_create_labeler
from labeling.services.sessions import LEASE
from labeling.tests.interleave import Meeting, require_postgresql, run_in_threads
from labeling.tokens import create_api_token


@pytest.fixture
def problem(transactional_db):
    return Problem.objects.create(text="What is 2+2?", answer="4")


def open_sessions(labeler):
    return LabelingSession.objects.filter(
        labeler=labeler, submitted_at__isnull=True, abandoned_at__isnull=True
    )


def test_two_next_session_requests_of_one_labeler_get_the_same_session(
    live_server, problem, make_user, make_solution, monkeypatch
):
    """Two tabs (or a retry) ask "my next session" at the same moment: both are answered
    with one session, as if the second had come later and resumed it."""
    require_postgresql()
    for n in range(3):
        make_solution(problem, n)
    user = make_user("ann")
    labeler = get_or_create_labeler(user=user)
    token = create_api_token(user=user).token
    # Both requests have looked for an open session of Ann's and found none; now they serve.
    meeting = Meeting(2)
    assign = workbench._assign_from_queues

    def assign_after_meeting(**kwargs):
        meeting.arrive()
        return assign(**kwargs)

    monkeypatch.setattr(workbench, "_assign_from_queues", assign_after_meeting)

    def ask():
        return requests.post(
            f"{live_server.url}/api/sessions/next/",
            headers={"Authorization": f"Token {token}"},
            timeout=60,
        )

    first, second = run_in_threads(ask, ask)

    assert [first.status_code, second.status_code] == [200, 200], (first.text, second.text)
    assert first.json()["session"]["id"] == second.json()["session"]["id"]
    assert open_sessions(labeler).count() == 1
    assert meeting.outcomes == ["blocked"], "the second request did not wait for the first"


def test_a_lapsed_session_being_given_away_is_not_resumed(problem, make_labeler, make_solution):
    """Ann's lease ran out; Bob is being given her place when Ann comes back. Ann is not
    handed the session that is ending: she waits for Bob's claim and gets a new one."""
    require_postgresql()
    shared = make_solution(problem, 1)
    other = make_solution(problem, 2)
    ann, bob = make_labeler("ann"), make_labeler("bob")
    t0 = timezone.now() - LEASE - timedelta(minutes=1)
    lapsed = workbench.next_session(labeler=ann, now=t0).session
    assert lapsed.solution_id == shared.pk
    later = timezone.now()

    ended = threading.Event()
    meeting = Meeting(2)
    free_slot = workbench._free_slot

    def free_slot_then_wait(solution):
        if solution.pk == shared.pk:
            # Bob's claim has ended Ann's session (not committed yet) and picks a place.
            ended.set()
            meeting.arrive()
        return free_slot(solution)

    def bob_claims():
        return workbench.next_session(labeler=bob, now=later)

    def ann_comes_back():
        assert ended.wait(timeout=60)
        return workbench.next_session(labeler=ann, now=later)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(workbench, "_free_slot", free_slot_then_wait)
        bobs, anns = run_in_threads(bob_claims, ann_comes_back)

    assert bobs.session.solution_id == shared.pk
    lapsed.refresh_from_db()
    assert lapsed.abandoned_at is not None
    # Ann's answer is a session she can label, not the one that went to Bob.
    assert anns.session.pk != lapsed.pk
    assert anns.session.solution_id == other.pk
    assert list(open_sessions(ann)) == [anns.session]
    assert meeting.outcomes == ["blocked"]


@pytest.mark.django_db
def test_the_database_refuses_a_second_open_session_for_a_labeler(
    problem, make_labeler, make_solution
):
    ann = make_labeler("ann")
    first, second = make_solution(problem, 1), make_solution(problem, 2)
    LabelingSession.objects.create(labeler=ann, solution=first)
    with pytest.raises(IntegrityError), transaction.atomic():
        LabelingSession.objects.create(labeler=ann, solution=second)
    # Once the first is finished (or abandoned), the next may open.
    LabelingSession.objects.filter(labeler=ann).update(abandoned_at=timezone.now())
    LabelingSession.objects.create(labeler=ann, solution=second)


def test_two_settlements_of_one_disagreement_at_once_the_later_wins(
    problem, make_labeler, make_user, make_solution
):
    """Two researchers settle the same disagreement on different labels at once: the one
    committed last is the label training uses, and neither request fails."""
    require_postgresql()
    solution = make_solution(problem, 1, labels_wanted=2)
    now = timezone.now()
    ann_label, bob_label = (
        LabelingSession.objects.create(
            labeler=make_labeler(name),
            solution=solution,
            slot=slot,
            started_at=now,
            submitted_at=now,
            finish_reason="solution",
            total_time=1000,
        )
        for slot, name in enumerate(["ann", "bob"])
    )
    rita, ray = make_user("rita", "researcher"), make_user("ray", "researcher")
    settled = threading.Event()
    meeting = Meeting(2)

    def rita_settles_on_ann():
        # Rita's request has written its choice and is about to commit it.
        with transaction.atomic():
            overlap.adjudicate(solution_id=solution.pk, session_id=ann_label.pk, by=rita)
            settled.set()
            meeting.arrive()

    def ray_settles_on_bob():
        assert settled.wait(timeout=60)
        overlap.adjudicate(solution_id=solution.pk, session_id=bob_label.pk, by=ray)

    run_in_threads(rita_settles_on_ann, ray_settles_on_bob)

    chosen = LabelingSession.objects.filter(solution=solution, adjudicated_at__isnull=False)
    assert list(chosen.values_list("pk", "adjudicated_by")) == [(bob_label.pk, ray.pk)]
    assert meeting.outcomes == ["blocked"]


def test_an_upgrade_keeps_each_labelers_latest_open_session_and_ends_the_others(
    transactional_db,
):
    """A database that holds two open sessions of one labeler (the race, before) migrates:
    the one worked on last stays open, the other ends as a lapsed lease ends."""
    migration = importlib.import_module("labeling.migrations.0017_one_open_session_per_labeler")
    before = migration.Migration.dependencies
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    try:
        apps = executor.loader.project_state(before).apps
        user_model = apps.get_model("auth", "User")
        labeler_model = apps.get_model("labeling", "Labeler")
        problem = apps.get_model("labeling", "Problem").objects.create(
            text="Q", text_hash="q", answer="1"
        )
        solutions = [
            apps.get_model("labeling", "Solution").objects.create(
                problem=problem, steps=["s"], content_hash=str(n), is_correct=True
            )
            for n in range(3)
        ]
        ann, bob = (
            labeler_model.objects.create(user=user_model.objects.create(username=name))
            for name in ("ann", "bob")
        )
        sessions = apps.get_model("labeling", "LabelingSession").objects
        now = timezone.now()
        older = sessions.create(labeler=ann, solution=solutions[0], last_activity_at=now)
        latest = sessions.create(
            labeler=ann, solution=solutions[1], last_activity_at=now + timedelta(minutes=1)
        )
        bobs = sessions.create(labeler=bob, solution=solutions[0])
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())

    ended = set(
        LabelingSession.objects.filter(abandoned_at__isnull=False).values_list("pk", flat=True)
    )
    assert ended == {older.pk}
    assert {latest.pk, bobs.pk} <= set(
        LabelingSession.objects.filter(abandoned_at__isnull=True).values_list("pk", flat=True)
    )
