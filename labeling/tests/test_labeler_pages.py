"""What labelers of other tools expect: the queue count, a skip, my labels, confirmations,
and error pages with the site's navigation (never the admin's login)."""

import re

import pytest
from django.test import Client, RequestFactory
from django.urls import reverse
from django.views.defaults import server_error

from labeling import selectors
from labeling.models import LabelingSession, Problem
from labeling.services import workbench

pytestmark = pytest.mark.django_db


@pytest.fixture
def problem():
    return Problem.objects.create(text="What is $1+1$?", answer="2")


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def finish(session: LabelingSession) -> None:
    """Rate every step +1 and submit."""
    for index in range(len(session.solution.steps)):
        workbench.rate_step(
            session_id=session.pk, labeler=session.labeler, step_index=index, rating=1
        )
    workbench.submit_session(
        session_id=session.pk, labeler=session.labeler, finish_reason="solution"
    )


def test_queue_left_counts_what_the_labeler_can_still_get_in_one_query(
    problem, make_solution, make_labeler, django_assert_num_queries
):
    me, other = make_labeler("me"), make_labeler("other")
    for n in range(4):
        make_solution(problem, n)
    make_solution(problem, 9, is_quality_control=True)
    make_solution(Problem.objects.create(text="Broken.", answer="0", is_bad=True), 0)
    with django_assert_num_queries(1):
        assert selectors.queue_left(labeler=me) == 5
    finish(workbench.next_session(labeler=me).session)  # quality control comes first
    skipped = workbench.next_session(labeler=me).session
    workbench.skip_session(session_id=skipped.pk, labeler=me)  # skipped by me: gone for me
    finish(workbench.next_session(labeler=other).session)  # quality control, for everyone
    finish(workbench.next_session(labeler=other).session)  # the one I skipped
    finish(workbench.next_session(labeler=other).session)  # its one place taken: gone
    assert selectors.queue_left(labeler=me) == 2
    assert selectors.queue_left(labeler=other) == 2


def test_skip_needs_no_reason_frees_the_solution_for_others_and_not_for_me(
    problem, make_solution, make_labeler
):
    solution = make_solution(problem)
    me, other = make_labeler("me"), make_labeler("other")
    session = workbench.next_session(labeler=me).session
    client = signed_in(me.user)
    response = client.post(reverse("label-skip", args=[session.pk]), follow=True)
    assert "Skipped: the solution goes to other labelers." in response.content.decode()
    session.refresh_from_db()
    assert session.abandoned_at is not None and not session.is_submitted
    assert not session.step_labels.exists()
    # Not served to me again, though nobody labeled it; served to the next labeler.
    assert workbench.next_session(labeler=me) is None
    assert workbench.next_session(labeler=other).session.solution == solution
    # A skipped session is over: skipping or rating it again is refused.
    with pytest.raises(workbench.LabelingRefused):
        workbench.skip_session(session_id=session.pk, labeler=me)


def test_submit_by_htmx_confirms_and_shows_the_next_solution_and_queue_count(
    problem, make_solution, make_labeler
):
    for n in range(3):
        make_solution(problem, n)
    me = make_labeler("me")
    session = workbench.next_session(labeler=me).session
    for index in range(4):
        workbench.rate_step(session_id=session.pk, labeler=me, step_index=index, rating=1)
    response = signed_in(me.user).post(
        reverse("label-submit", args=[session.pk]),
        {"finish_reason": "solution"},
        HTTP_HX_REQUEST="true",
    )
    page = response.content.decode()
    assert response.status_code == 200
    assert "Submitted: your label is saved." in page
    # The next solution, and what is left after it.
    assert 'id="queue-left">1 more in your queue after this one' in page


def test_my_labels_lists_my_submitted_labels_with_links_and_nobody_elses(
    problem, make_solution, make_labeler
):
    make_solution(problem, 0)
    make_solution(problem, 1)
    me, other = make_labeler("me"), make_labeler("other")
    mine = workbench.next_session(labeler=me).session
    finish(mine)
    theirs = workbench.next_session(labeler=other).session
    finish(theirs)
    open_one = make_solution(problem, 2)
    assert workbench.next_session(labeler=me).session.solution == open_one  # not listed
    client = signed_in(me.user)
    listing = client.get(reverse("my-labels")).content.decode()
    assert reverse("my-label", args=[mine.pk]) in listing
    assert reverse("my-label", args=[theirs.pk]) not in listing
    assert len(re.findall(r'href="/labels/mine/\d+/"', listing)) == 1
    detail = client.get(reverse("my-label", args=[mine.pk]))
    assert detail.status_code == 200
    assert detail.content.decode().count('class="badge good"') == 4
    # Read-only but for the one way to change it: a correction (labeling.services.corrections).
    main = detail.content.decode().split("<main>")[1]
    assert main.count("<form") == 1 and reverse("my-label-correct", args=[mine.pk]) in main
    # The home page links here and says what is left (the solution of the open session).
    home = client.get(reverse("home")).content.decode()
    assert 'data-figure="queue-left">1</strong> solution left' in home
    # Another labeler's label is as missing as one that does not exist.
    assert client.get(reverse("my-label", args=[theirs.pk])).status_code == 404


NAVIGATION = 'href="/label/"'


def test_an_annotator_at_the_admin_gets_the_styled_403_not_the_admin_login(make_user):
    response = signed_in(make_user("ann")).get("/admin/", follow=True)
    page = response.content.decode()
    assert response.status_code == 403
    assert "Not allowed" in page and NAVIGATION in page
    assert 'id="login-form"' not in page and "Django administration" not in page
    # Someone signed out signs in on the site's own login page, not the admin's.
    response = Client().get("/admin/", follow=True)
    assert response.redirect_chain[-1][0].startswith("/accounts/login/")
    assert "Django administration" not in response.content.decode()


def test_staff_still_reach_the_admin(make_user):
    admin = make_user("boss", role="admin", is_staff=True, is_superuser=True)
    assert signed_in(admin).get("/admin/").status_code == 200


def test_403_and_404_pages_have_the_navigation_and_the_reason(make_user):
    client = signed_in(make_user("ann"))
    refused = client.get(reverse("quality"))
    assert refused.status_code == 403
    page = refused.content.decode()
    assert "The quality page is for researchers and admins." in page and NAVIGATION in page
    missing = client.get("/no/such/page/")
    assert missing.status_code == 404
    assert "There is no page at /no/such/page/" in missing.content.decode()
    assert NAVIGATION in missing.content.decode()


def test_the_500_page_is_styled_without_a_request_context():
    response = server_error(RequestFactory().get("/"))
    page = response.content.decode()
    assert response.status_code == 500
    assert "Something went wrong" in page and 'href="/"' in page and "stepwise.css" in page


@pytest.mark.parametrize(
    ("finish_reason", "said"),
    [
        ("give_up", "Given up: saved with your reason."),
        ("bad_problem", "Reported: you will not be served this problem again"),
    ],
)
def test_giving_up_and_reporting_are_confirmed_as_what_they_are(
    problem, make_solution, make_labeler, finish_reason, said
):
    for n in range(2):
        make_solution(problem, n)
    me = make_labeler("me")
    session = workbench.next_session(labeler=me).session
    page = (
        signed_in(me.user)
        .post(
            reverse("label-submit", args=[session.pk]),
            {"finish_reason": finish_reason, "reason": "The statement is ambiguous."},
            HTTP_HX_REQUEST="true",
        )
        .content.decode()
    )
    assert said in page
    assert "your label is saved" not in page
