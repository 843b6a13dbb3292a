"""Prefetch: submitting a solution returns the next one, served once, with a normal lease."""

from datetime import timedelta

import pytest
from django.urls import reverse

from labeling.models import LabelingSession, Problem, Solution
from labeling.services.labelers import get_or_create_labeler
from labeling.services.workbench import next_session

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def problems():
    out = []
    for n in (1, 2):
        problem = Problem.objects.create(text=f"Problem number {n}: what is {n}+{n}?", answer="4")
        Solution.objects.create(
            problem=problem, steps=["Step one.", "# Answer\n\n4"], answer="4", is_correct=True
        )
        out.append(problem)
    return out


def label_to_the_end(client, session_id: int):
    for index in (0, 1):
        response = client.post(
            reverse("label-rate", args=[session_id]), {"step_index": index, "rating": 1}
        )
        assert response.status_code == 200
    return client.post(
        reverse("label-submit", args=[session_id]), {"finish_reason": "solution"}, **HTMX
    )


def test_submitting_returns_the_next_session_already_served(client, problems, make_user):
    user = make_user("ann")
    client.force_login(user)
    first = client.get(reverse("label-next"))
    first_id = int(first["Location"].rstrip("/").rsplit("/", 1)[1])

    response = label_to_the_end(client, first_id)
    assert response.status_code == 200
    page = response.content.decode()
    upcoming = LabelingSession.objects.get(labeler__user=user, submitted_at__isnull=True)
    assert upcoming.pk != first_id
    assert upcoming.solution.problem.text in page
    assert reverse("label-rate", args=[upcoming.pk]) in page
    assert 'id="workbench"' in page and "<html" not in page  # a fragment, swapped in place
    assert response["HX-Push-Url"] == reverse("label-session", args=[upcoming.pk])

    # Opening the labeling page (a reload, a second tab) resumes it: nothing is served twice.
    again = client.get(reverse("label-next"))
    assert again["Location"] == reverse("label-session", args=[upcoming.pk])
    assert LabelingSession.objects.filter(labeler__user=user).count() == 2

    # The last solution's submission says there is nothing left, still without a page load.
    response = label_to_the_end(client, upcoming.pk)
    assert "Nothing to label right now" in response.content.decode()
    assert response["HX-Push-Url"] == reverse("label-next")


def test_a_prefetched_solution_never_opened_goes_back_to_the_queue_when_its_lease_ends(
    client, problems, make_user
):
    ann, bob = make_user("ann"), make_user("bob")
    client.force_login(ann)
    first_id = int(client.get(reverse("label-next"))["Location"].rstrip("/").rsplit("/", 1)[1])
    label_to_the_end(client, first_id)
    prefetched = LabelingSession.objects.get(labeler__user=ann, submitted_at__isnull=True)

    # Held while the lease runs: another labeler is not given the same solution.
    bob_labeler = get_or_create_labeler(user=bob)
    assert next_session(labeler=bob_labeler) is None

    # The labeler walked away; once the lease has run out, the solution goes to someone else.
    later = prefetched.lease_expires_at + timedelta(seconds=1)
    next_one = next_session(labeler=bob_labeler, now=later)
    assert next_one.session.solution_id == prefetched.solution_id
    prefetched.refresh_from_db()
    assert prefetched.abandoned_at == later


def test_submitting_without_htmx_still_redirects_to_the_next_task(client, problems, make_user):
    client.force_login(make_user("ann"))
    first_id = int(client.get(reverse("label-next"))["Location"].rstrip("/").rsplit("/", 1)[1])
    client.post(reverse("label-rate", args=[first_id]), {"step_index": 0, "rating": -1})
    response = client.post(
        reverse("label-submit", args=[first_id]), {"finish_reason": "found_error"}
    )
    assert response.status_code == 302 and response["Location"] == reverse("label-next")
