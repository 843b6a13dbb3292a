"""Live labeling keeps the labeler busy (issue 30, point 2): the next step's proposals are
prepared while the labeler rates this step's, the wait shows its time, and the labeler can
stop waiting."""

import pytest
from django.urls import reverse

from labeling.models import StepLabel
from labeling.services import live
from labeling.tests.test_live import FakeGenerator as fake
from labeling.tests.test_live import fake as scripted  # noqa: F401  (a fixture)
from labeling.tests.test_live import make_generation, serve, step_texts

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("scripted")]


def rate(session, labeler, step, completion, rating, capture):
    with capture(execute=True):
        live.rate_proposal(
            session_id=session.pk,
            labeler=labeler,
            step_index=step,
            completion_index=completion,
            rating=rating,
        )


def test_a_plus_one_prefetches_what_follows_it_and_choosing_it_needs_no_generator_call(
    make_labeler, django_capture_on_commit_callbacks
):
    capture = django_capture_on_commit_callbacks
    make_generation(k=3)
    labeler = make_labeler()
    session = serve(labeler, capture)
    calls = fake.calls
    fake.replies = ["Then $x = 5$.", "So $x + 1 = 6$.", "Hence $2x = 10$."]
    rate(session, labeler, 0, 0, 0, capture)  # a 0 is no continuation worth the generator
    assert fake.calls == calls
    rate(session, labeler, 0, 1, 1, capture)  # the first +1 is: its next step is asked for
    assert fake.calls == calls + 1
    rate(session, labeler, 0, 2, 1, capture)  # one per step: the generator is not flooded
    assert fake.calls == calls + 1
    with capture(execute=True):
        live.choose_proposal(
            session_id=session.pk, labeler=labeler, step_index=0, completion_index=1
        )
    # The next step is ready the moment it is shown, with what the prefetch proposed.
    assert fake.calls == calls + 1
    step = StepLabel.objects.get(session=session, index=1)
    assert step.extra["live"]["status"] == live.READY and step.extra["live"]["prefetched"]
    assert step_texts(session, 1) == fake.replies


def test_choosing_another_proposal_than_the_prefetched_one_asks_as_before(
    make_labeler, django_capture_on_commit_callbacks
):
    capture = django_capture_on_commit_callbacks
    make_generation(k=2)
    labeler = make_labeler()
    session = serve(labeler, capture)
    rate(session, labeler, 0, 0, 1, capture)
    rate(session, labeler, 0, 1, 0, capture)
    calls = fake.calls
    with capture(execute=True):
        live.choose_proposal(
            session_id=session.pk, labeler=labeler, step_index=0, completion_index=1
        )
    assert fake.calls > calls  # asked when chosen, as without the prefetch
    assert not StepLabel.objects.get(session=session, index=1).extra["live"]["prefetched"]


def test_chosen_while_the_prefetch_runs_the_waiting_step_takes_its_proposals_once(
    make_labeler, django_capture_on_commit_callbacks
):
    capture = django_capture_on_commit_callbacks
    make_generation(k=2)
    labeler = make_labeler()
    session = serve(labeler, capture)
    # Rated, but the prefetch task has not run yet (its callback is not executed here).
    live.rate_proposal(
        session_id=session.pk, labeler=labeler, step_index=0, completion_index=0, rating=1
    )
    live.rate_proposal(
        session_id=session.pk, labeler=labeler, step_index=0, completion_index=1, rating=-1
    )
    live.choose_proposal(session_id=session.pk, labeler=labeler, step_index=0, completion_index=0)
    assert StepLabel.objects.get(session=session, index=1).extra["live"]["status"] == live.PENDING
    fake.replies = ["From the prefetch: $y = 2$.", "Also from it: $z = 3$."]
    assert live.prefetch_next_step(session_id=session.pk, step_index=0, completion_index=0) == (
        live.READY
    )
    assert step_texts(session, 1) == fake.replies
    # The step's own task comes after: it finds the step filled and stores nothing twice.
    fake.replies = ["Late: $w = 9$."]
    assert live.propose_steps(session_id=session.pk, step_index=1) == live.READY
    assert step_texts(session, 1) == ["From the prefetch: $y = 2$.", "Also from it: $z = 3$."]


def test_the_wait_shows_its_time_and_the_labeler_can_stop_it(
    make_labeler, client, django_capture_on_commit_callbacks
):
    make_generation(k=2)
    labeler = make_labeler("ann")
    # Served, but the proposals' task not run: the step is waiting.
    session = live.next_live_session(labeler=labeler, now=live.timezone.now())
    client.force_login(labeler.user)
    page = client.get(reverse("label-session", args=[session.pk])).content.decode()
    assert "The generator is proposing next steps" in page
    assert 'id="live-waited"' in page and 'id="live-stop"' in page
    stopped = client.post(reverse("live-stop", args=[session.pk]), {"step_index": 0})
    assert stopped.status_code == 200
    text = stopped.content.decode()
    assert "You stopped waiting for the generator" in text and "Try again" in text
    # Proposals that arrive afterwards are dropped; trying again asks anew.
    assert live.propose_steps(session_id=session.pk, step_index=0) == live.FAILED
    assert step_texts(session, 0) == []
    with django_capture_on_commit_callbacks(execute=True):
        retried = client.post(reverse("live-retry", args=[session.pk]), {"step_index": 0})
    assert retried.status_code == 200
    assert step_texts(session, 0) == fake.replies[:2]
    # The API has the same action.
    from rest_framework.test import APIClient

    api = APIClient()
    api.force_authenticate(labeler.user)
    answer = api.post(f"/api/live/sessions/{session.pk}/stop/", {"step_index": 0}, format="json")
    assert answer.status_code == 200 and answer.json()["current"]["status"] == live.READY
