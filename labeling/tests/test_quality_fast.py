"""The quality figures as now computed (each label's kept tally, labeling/tallies.py; the
labels-submitted count; every labeler's alpha in one pass) against a straightforward
computation over every rating, on a few hundred generated labels: at first, just after new
labels arrive, while a label is reopened for a correction, after it is saved or cancelled, and
after a label is deleted (issue 44)."""

import random
from collections import Counter, defaultdict
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from labeling import agreement, first_error, judge_display, quality
from labeling.models import (
    JudgeDisplay,
    LabelingSession,
    Problem,
    SessionTally,
    StepRating,
)
from labeling.services import corrections
from labeling.services.workbench import rate_step, submit_session

pytestmark = pytest.mark.django_db

STEPS = 4


# --- the straightforward figures ------------------------------------------------------------


def plain_ratings() -> list[tuple[int, int, str, int, int]]:
    """(session, labeler, display, step index, rating) of every counted rating."""
    return list(
        StepRating.objects.filter(
            completion_index=0, rating__isnull=False, step__session__submitted_at__isnull=False
        ).values_list(
            "step__session_id",
            "step__session__labeler_id",
            "judge_display",
            "step__index",
            "rating",
        )
    )


def plain_overlap() -> dict[int, list[int]]:
    """Solution id -> its submitted sessions (earliest first), where two labelers or more."""
    sessions, labelers = defaultdict(list), defaultdict(set)
    for pk, solution_id, labeler_id in (
        LabelingSession.objects.filter(submitted_at__isnull=False)
        .order_by("submitted_at", "pk")
        .values_list("pk", "solution_id", "labeler_id")
    ):
        sessions[solution_id].append(pk)
        labelers[solution_id].add(labeler_id)
    return {s: pks for s, pks in sessions.items() if len(labelers[s]) >= 2}


def check_figures() -> None:
    rows = plain_ratings()
    steps = Counter(labeler for _, labeler, _, _, _ in rows)
    figures = {f.labeler_id: f.steps for f in quality.labeler_figures()}
    assert {k: v for k, v in figures.items() if v} == dict(steps)

    displays = Counter(display for _, _, display, _, _ in rows)
    shown = {row.display: row.ratings for row in judge_display.agreement_by_display()}
    assert shown == {display: displays.get(display, 0) for display in JudgeDisplay.values}

    overlapping = agreement.overlapping_labels()
    expected = plain_overlap()
    assert {s: [label.session_id for label in labels] for s, labels in overlapping.items()} == (
        expected
    )
    for labels in overlapping.values():
        for label in labels:
            assert label.ratings == {
                index: rating
                for session, _, _, index, rating in rows
                if session == label.session_id
            }

    units = agreement._units(overlapping)
    peers = agreement.peer_agreement_by_labeler(overlapping)
    assert peers, "the generated labels overlap"
    for labeler_id, peer in peers.items():
        alpha = agreement.krippendorff_alpha(units, labeler_id=labeler_id)
        assert peer.alpha == pytest.approx(alpha)
        # The one-pass figures against `figures` over the labeler's own solutions.
        theirs = {
            s: labels
            for s, labels in overlapping.items()
            if any(label.labeler_id == labeler_id for label in labels)
        }
        plain = agreement.figures(theirs, labeler_id=labeler_id, units=[])
        assert (
            peer.solutions,
            peer.first_error_pairs,
            peer.first_error_agreed,
            peer.step_pairs,
            peer.steps_agreed,
        ) == (
            plain.solutions,
            plain.first_error_pairs,
            plain.first_error_agreed,
            plain.step_pairs,
            plain.steps_agreed,
        )
    # The page's shared units give what each figure reads on its own.
    shared = agreement.units_by_solution(overlapping)
    assert [
        (row.generation, vars(row.figures))
        for row in agreement.agreement_by_generation(overlapping, shared)
    ] == [(row.generation, vars(row.figures)) for row in agreement.agreement_by_generation()]
    assert {
        pk: vars(f) for pk, f in agreement.peer_agreement_by_labeler(overlapping, shared).items()
    } == {pk: vars(f) for pk, f in peers.items()}
    days = defaultdict(set)
    for labeler_id, submitted_at in LabelingSession.objects.filter(
        submitted_at__isnull=False
    ).values_list("labeler_id", "submitted_at"):
        days[labeler_id].add(timezone.localtime(submitted_at).date())
    assert {f.labeler_id: f.days_active for f in quality.labeler_figures() if f.days_active} == {
        labeler_id: len(dates) for labeler_id, dates in days.items()
    }
    comparisons = agreement.comparisons()
    assert sorted(s for s, _ in comparisons) == sorted(expected)
    assert first_error.report(overlapping).between_labelers == first_error.between_labelers(
        {
            s: agreement.labels_of(LabelingSession.objects.filter(pk__in=pks))[s]
            for s, pks in expected.items()
        }
    )


# --- generated labels ------------------------------------------------------------------------


def submit_label(rng, labeler, solution, when) -> LabelingSession:
    """A label made through the workbench's services: a prefix of steps rated, some of them
    with the judge's rating revealed, then submitted."""
    session = LabelingSession.objects.create(
        labeler=labeler,
        solution=solution,
        started_at=when,
        last_activity_at=when,
        lease_expires_at=when + timedelta(minutes=30),
        total_time=0,
    )
    ratings = [rng.choice((1, 1, 0, -1)) for _ in range(rng.randint(1, STEPS))]
    if -1 in ratings:
        ratings = ratings[: ratings.index(-1) + 1]
    for index, rating in enumerate(ratings):
        rate_step(session_id=session.pk, labeler=labeler, step_index=index, rating=rating, now=when)
    if rng.random() < 0.3:
        StepRating.objects.filter(step__session=session, step__index=0).update(
            judge_display=rng.choice((JudgeDisplay.REVEALED, JudgeDisplay.CONFIRM)),
            judge_rating=rng.choice((1, 0, -1)),
        )
    complete = "solution" if len(ratings) == STEPS else "give_up"
    reason = "found_error" if -1 in ratings else complete
    submit_session(
        session_id=session.pk,
        labeler=labeler,
        finish_reason=reason,
        finish_reason_text="too long" if reason == "give_up" else "",
        now=when,
    )
    return session


def label_some(rng, labelers, solutions, count: int) -> list[LabelingSession]:
    done = set(
        LabelingSession.objects.filter(submitted_at__isnull=False).values_list(
            "labeler_id", "solution_id"
        )
    )
    made = []
    while len(made) < count:
        labeler, solution = rng.choice(labelers), rng.choice(solutions)
        if (labeler.pk, solution.pk) in done:
            continue
        done.add((labeler.pk, solution.pk))
        when = timezone.now() - timedelta(minutes=rng.randint(1, 10_000))
        made.append(submit_label(rng, labeler, solution, when))
    return made


@pytest.fixture
def generated(make_labeler, make_solution):
    rng = random.Random(44)
    problem = Problem.objects.create(text="What is 2+2?", answer="4")
    labelers = [make_labeler(f"labeler{i}") for i in range(6)]
    solutions = [
        make_solution(problem, n, steps=[f"Step {i} of {n}." for i in range(STEPS)])
        for n in range(70)
    ]
    for solution in solutions:
        solution.labels_wanted = 3
    label_some(rng, labelers, solutions, 200)
    return rng, labelers, solutions


def test_the_fast_figures_equal_the_straightforward_ones_as_labels_arrive_and_change(generated):
    rng, labelers, solutions = generated
    check_figures()
    assert (
        SessionTally.objects.count()
        == LabelingSession.objects.filter(submitted_at__isnull=False).count()
    )

    # Just after new labels arrive: the kept tallies are added to, not read stale.
    label_some(rng, labelers, solutions, 60)
    check_figures()

    # A label reopened for a correction and re-rated: its ratings count as they are now.
    session = LabelingSession.objects.filter(submitted_at__isnull=False).order_by("pk").first()
    labeler = session.labeler
    corrections.reopen_label(session_id=session.pk, labeler=labeler)
    step_count = session.step_labels.count()
    rate_step(session_id=session.pk, labeler=labeler, step_index=step_count, rating=1)
    check_figures()
    # Cancelled: as it was submitted.
    corrections.cancel_correction(session_id=session.pk, labeler=labeler)
    check_figures()
    # Saved: counted again from its new ratings.
    corrections.reopen_label(session_id=session.pk, labeler=labeler)
    rate_step(session_id=session.pk, labeler=labeler, step_index=step_count, rating=0)
    submit_session(
        session_id=session.pk, labeler=labeler, finish_reason="give_up", finish_reason_text="x"
    )
    check_figures()

    # A deleted label takes its tally with it.
    LabelingSession.objects.filter(pk=session.pk).delete()
    check_figures()


def test_a_second_look_at_the_quality_page_counts_no_rating_again(generated, make_user, client):
    """The seconds of issue 44 were spent grouping every rating on every look: after the first
    look, nothing new means no count over the ratings at all."""
    client.force_login(make_user("lead", "researcher"))
    assert client.get(reverse("quality")).status_code == 200
    with CaptureQueriesContext(connection) as queries:
        response = client.get(reverse("quality"))
    assert response.status_code == 200
    grouped = [
        q["sql"] for q in queries if "labeling_steprating" in q["sql"] and "COUNT(" in q["sql"]
    ]
    assert grouped == []
    # The figures on the page are the straightforward ones, also with a label reopened and
    # re-rated (counted from its ratings as they are now).
    steps = Counter(labeler for _, labeler, _, _, _ in plain_ratings())
    for figures, _ in response.context["labelers"]:
        assert figures.steps == steps.get(figures.labeler_id, 0)
    # (A label of a solution no one else labeled: the page reads the others' from tallies.)
    alone = LabelingSession.objects.exclude(solution_id__in=plain_overlap()).filter(
        finish_reason="give_up"
    )
    session = next(s for s in alone if not s.step_labels.filter(ratings__rating=-1).exists())
    corrections.reopen_label(session_id=session.pk, labeler=session.labeler)
    rate_step(
        session_id=session.pk,
        labeler=session.labeler,
        step_index=session.step_labels.count(),
        rating=-1,
    )
    response = client.get(reverse("quality"))
    assert response.status_code == 200
    steps = Counter(labeler for _, labeler, _, _, _ in plain_ratings())
    for figures, _ in response.context["labelers"]:
        assert figures.steps == steps.get(figures.labeler_id, 0)
    check_figures()


def test_an_import_job_counts_its_labels_for_the_quality_figures(make_user, client, settings):
    """Counting 100,000 imported labels took the first look at the quality page 20 s: the
    import's worker counts them, and the page's first look counts no rating."""
    import io
    from pathlib import Path

    from labeling.services import import_jobs
    from labeling.tasks import run_import_job_task

    admin = make_user("boss", "admin")
    lines = (Path(__file__).parent / "fixtures" / "prm800k_phase2.jsonl").read_bytes()
    job = import_jobs.create_import_job(
        user=admin, kind="prm800k", upload=io.BytesIO(lines), file_name="phase2.jsonl"
    )
    assert run_import_job_task.apply(args=(job.pk,)).get() == "succeeded"
    submitted = LabelingSession.objects.filter(submitted_at__isnull=False).count()
    assert submitted and SessionTally.objects.count() == submitted

    client.force_login(admin)
    with CaptureQueriesContext(connection) as queries:
        assert client.get(reverse("quality")).status_code == 200
    assert not [q for q in queries if "labeling_steprating" in q["sql"] and "COUNT(" in q["sql"]]
