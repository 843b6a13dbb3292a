"""Quality control: gold labels, agreement and throughput, the labeler and admin pages,
deactivating labelers, and the guidelines page."""

import io
import json
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from labeling import quality
from labeling.mathtext import render_markdown
from labeling.models import Guideline, Labeler, LabelingSession, Problem, Solution
from labeling.services.labelers import get_or_create_labeler
from labeling.services.workbench import LabelingRefused, next_session, rate_step, submit_session

pytestmark = pytest.mark.django_db

STEPS = ["Step one.", "Step two.", "Step three.", "# Answer\n\n4"]


@pytest.fixture
def problem():
    return Problem.objects.create(text="What is 2+2?", answer="4")


@pytest.fixture
def make_solution(make_solution):
    """The root factory, with this file's step texts and `gold` ratings."""

    def make(problem, n, gold=None, **fields):
        steps = [f"{s} (solution {n})" for s in STEPS]
        return make_solution(problem, n, steps=steps, gold_ratings=gold, **fields)

    return make


def label(labeler, solution, ratings, *, finish_reason=None, total_time=60_000, when=None):
    """A submitted label, made through the same services the workbench calls."""
    when = when or timezone.now()
    session = LabelingSession.objects.create(
        labeler=labeler,
        solution=solution,
        started_at=when,
        last_activity_at=when,
        lease_expires_at=when + timedelta(minutes=30),
        total_time=0,
    )
    for index, rating in enumerate(ratings):
        rate_step(session_id=session.pk, labeler=labeler, step_index=index, rating=rating, now=when)
    if finish_reason is None:
        finish_reason = "found_error" if -1 in ratings else "solution"
    submit_session(
        session_id=session.pk,
        labeler=labeler,
        finish_reason=finish_reason,
        finish_reason_text="too hard" if finish_reason == "give_up" else "",
        now=when,
    )
    LabelingSession.objects.filter(pk=session.pk).update(total_time=total_time)
    return session


# --- agreement and throughput ----------------------------------------------------------------


@pytest.fixture
def crafted(problem, make_labeler, make_solution):
    """Three gold solutions, one without gold, and labelers who agree to different degrees."""
    gold_ok = make_solution(problem, 1, gold=[1, 1, 1, 1], is_quality_control=True)
    gold_err = make_solution(problem, 2, gold=[1, 0, -1], is_quality_control=True)
    gold_early = make_solution(problem, 3, gold=[-1], is_screening=True)
    no_gold = make_solution(problem, 4)

    ann = make_labeler("ann")  # agrees everywhere
    label(ann, gold_ok, [1, 1, 1, 1])
    label(ann, gold_err, [1, 0, -1])
    label(ann, gold_early, [-1])
    label(ann, no_gold, [-1])  # no gold: never counted

    bob = make_labeler("bob")
    label(bob, gold_ok, [1, 0, -1])  # error where gold has none: exact no; steps 1/3 differ
    label(bob, gold_err, [0, 0, -1])  # same first error; step 0 differs
    label(bob, gold_early, [1, 1], finish_reason="give_up")  # per step only: 0/1 agree

    cy = make_labeler("cy")  # labeled, but nothing with gold
    label(cy, no_gold, [1, 1, 1, 1])
    return {"ann": ann, "bob": bob, "cy": cy}


def test_agreement_with_gold_exact_and_per_step(crafted):
    agreement = quality.gold_agreement_by_labeler()

    ann = agreement[crafted["ann"].pk]
    assert (ann.sessions, ann.exact_agreed, ann.exact_total) == (3, 3, 3)
    assert (ann.steps_agreed, ann.steps_total) == (8, 8)
    assert ann.exact == 1.0 and ann.per_step == 1.0

    bob = agreement[crafted["bob"].pk]
    # The given-up label has no first error to compare; its one comparable step counts.
    assert (bob.sessions, bob.exact_agreed, bob.exact_total) == (3, 1, 2)
    # gold_ok: only step 0 agrees (1/3); gold_err: steps 1 and 2 agree (2/3); gold_early:
    # step 0 is 1 against gold's -1 and step 1 lies beyond gold (0/1).
    assert (bob.steps_agreed, bob.steps_total) == (3, 7)
    assert bob.exact == pytest.approx(0.5)
    assert bob.per_step == pytest.approx(3 / 7)

    # A labeler with no gold overlap has no agreement figure at all, not a zero.
    assert crafted["cy"].pk not in agreement
    figures = {f.username: f for f in quality.labeler_figures()}
    assert figures["cy"].agreement.exact is None
    assert figures["cy"].agreement.per_step is None
    assert figures["cy"].solutions == 1


def test_first_error_of_ratings_and_gold():
    assert quality.first_error([1, 0, -1]) == 2
    assert quality.first_error([1, 1]) is None
    assert quality.first_error({3: -1, 1: -1, 0: 1}) == 1


def test_throughput_per_hour_of_time_on_task_and_per_active_day(
    problem, make_labeler, make_solution
):
    ann = make_labeler("ann")
    now = timezone.now()
    label(ann, make_solution(problem, 1), [1, 1, 1, 1], total_time=30 * 60_000, when=now)
    label(ann, make_solution(problem, 2), [1, -1], total_time=15 * 60_000, when=now)
    label(
        ann,
        make_solution(problem, 3),
        [-1],
        total_time=15 * 60_000,
        when=now - timedelta(days=2),
    )
    (figures,) = quality.labeler_figures(labeler_ids=[ann.pk])
    assert (figures.solutions, figures.steps, figures.time_ms) == (3, 7, 3_600_000)
    assert figures.solutions_per_hour == pytest.approx(3.0)
    assert figures.steps_per_hour == pytest.approx(7.0)
    assert figures.days_active == 2
    assert figures.solutions_per_day == pytest.approx(1.5)
    assert figures.last_active == now

    # Three quick solutions in the first 11 s are no rate (they were 982 an hour).
    quick = make_labeler("quick")
    for n in range(3):
        label(quick, make_solution(problem, 10 + n), [-1], total_time=11_000 // 3, when=now)
    (early,) = quality.labeler_figures(labeler_ids=[quick.pk])
    assert early.solutions == 3 and early.solutions_per_hour is None
    assert early.steps_per_hour is None

    idle = make_labeler("idle")
    (none,) = quality.labeler_figures(labeler_ids=[idle.pk])
    assert none.solutions == 0
    assert none.solutions_per_hour is None and none.solutions_per_day is None
    assert none.last_active is None


# --- the landing page ------------------------------------------------------------------------


def test_landing_page_shows_my_progress_today_totals_and_agreement(
    client, problem, make_labeler, make_solution
):
    ann = make_labeler("ann")
    gold = make_solution(problem, 1, gold=[1, 1, -1], is_quality_control=True)
    now = timezone.now()
    # Agreement with gold is as of midnight: today's gold label (rated otherwise than gold)
    # does not move it, so it cannot tell the labeler which of today's labels was gold.
    label(ann, gold, [1, -1], total_time=120_000, when=now)
    earlier = make_solution(problem, 6, gold=[1, 1, -1], is_quality_control=True)
    label(ann, earlier, [1, 1, -1], total_time=0, when=now - timedelta(days=2))
    label(ann, make_solution(problem, 2), [1, 1, 1, 1], total_time=180_000, when=now)
    # Yesterday's work counts in the totals, not today.
    label(ann, make_solution(problem, 3), [-1], total_time=60_000, when=now - timedelta(days=1))
    make_solution(problem, 4)
    # An open session touched today: its time counts for today, its ratings apart.
    open_session = next_session(labeler=ann).session
    rate_step(session_id=open_session.pk, labeler=ann, step_index=0, rating=1)
    LabelingSession.objects.filter(pk=open_session.pk).update(total_time=60_000)
    # Another labeler's work is not mine.
    label(make_labeler("bob"), make_solution(problem, 5), [-1])

    client.force_login(ann.user)
    response = client.get(reverse("home"))
    assert response.status_code == 200
    today = response.context["today"]
    # Issue 43, item 11: "Today: 15 steps rated" stood beside "All my labels: 13 steps", the
    # open label's ratings in one and not the other. Today counts as the totals do, and says
    # the open label's apart.
    assert (today.solutions, today.steps, today.open_steps, today.time_ms) == (2, 6, 1, 360_000)
    page = response.content.decode()
    assert '<strong data-figure="today-solutions">2</strong>' in page
    assert '<strong data-figure="today-steps">6</strong>' in page
    assert '<small data-figure="today-open-steps">(and 1 in the label you have open)' in page
    assert response.context["me"].steps >= today.steps
    assert '<strong data-figure="today-time">6 min</strong>' in page
    assert '<strong data-figure="total-solutions">4</strong>' in page
    assert '<strong data-figure="exact-agreement">100%</strong>' in page
    assert response.context["me"].agreement.exact_total == 1
    assert f'href="{reverse("label-next")}"' in page and "Start labeling" in page
    # Annotators see labeling pages only: no link to the quality page.
    assert reverse("quality") not in page


def test_landing_page_links_researchers_to_the_quality_page(client, make_user):
    client.force_login(make_user("rita", role="researcher"))
    page = client.get(reverse("home")).content.decode()
    assert f'href="{reverse("quality")}"' in page
    assert "No quality-control solutions among your labels before today" in page


# --- the quality page and deactivation -------------------------------------------------------


def test_quality_page_is_for_researchers_and_admins(client, crafted, make_user):
    url = reverse("quality")
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))

    client.force_login(crafted["ann"].user)
    assert client.get(url).status_code == 403

    client.force_login(make_user("rita", role="researcher"))
    page = client.get(url).content.decode()
    assert str(crafted["bob"].uuid) in page
    # Researchers see labelers as UUIDs only, and cannot deactivate anyone.
    assert "bob" not in page.replace(str(crafted["bob"].uuid), "")
    assert "Deactivate" not in page

    client.force_login(make_user("ada", role="admin"))
    page = client.get(url).content.decode()
    row = page[page.index(f'data-labeler="{crafted["bob"].uuid}"') :]
    row = row[: row.index("</tr>")]
    assert "bob" in row
    assert "50%" in row and "(1/2)" in row  # exact
    assert "43%" in row and "(3/7)" in row  # per step
    assert "Deactivate" in row


def test_admin_deactivates_a_labeler_who_then_gets_no_tasks(
    client, problem, make_labeler, make_solution, make_user
):
    solution = make_solution(problem, 1)
    ann = make_labeler("ann")
    held = next_session(labeler=ann).session
    bob = make_labeler("bob")
    assert next_session(labeler=bob) is None  # ann holds the only solution

    url = reverse("labeler-active", args=[ann.uuid])
    client.force_login(bob.user)
    assert client.post(url, {"active": "0"}).status_code == 403
    assert client.get(url).status_code == 405  # a state change is POST only

    admin = make_user("ada", role="admin")
    client.force_login(admin)
    response = client.post(url, {"active": "0"}, follow=True)
    assert "deactivated" in response.content.decode()
    ann.refresh_from_db()
    ann.user.refresh_from_db()
    assert not ann.user.is_active
    with pytest.raises(LabelingRefused):
        next_session(labeler=ann)
    # Their open session ended, so the solution went straight back to the queue.
    held.refresh_from_db()
    assert held.abandoned_at is not None
    assert next_session(labeler=bob).session.solution == solution
    row = client.get(reverse("quality")).content.decode()
    row = row[row.index(f'data-labeler="{ann.uuid}"') :]
    assert "inactive" in row[: row.index("</tr>")]

    client.post(url, {"active": "1"})
    ann.user.refresh_from_db()
    assert ann.user.is_active


def test_admin_cannot_deactivate_themselves(client, make_user):
    admin = make_user("ada", role="admin")
    me = get_or_create_labeler(user=admin)
    client.force_login(admin)
    response = client.post(reverse("labeler-active", args=[me.uuid]), {"active": "0"}, follow=True)
    assert "cannot deactivate yourself" in response.content.decode()
    admin.refresh_from_db()
    assert admin.is_active


def test_deactivate_needs_the_csrf_token(make_labeler, make_user):
    from django.test import Client

    admin = make_user("ada", role="admin")
    ann = make_labeler("ann")
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin)
    assert (
        client.post(reverse("labeler-active", args=[ann.uuid]), {"active": "0"}).status_code == 403
    )
    ann.user.refresh_from_db()
    assert ann.user.is_active


# --- gold labels in the admin ----------------------------------------------------------------


def changelist_action(client, action, solutions):
    return client.post(
        reverse("admin:labeling_solution_changelist"),
        {"action": action, "_selected_action": [s.pk for s in solutions]},
        follow=True,
    )


def test_admin_actions_mark_unmark_and_copy_my_ratings_as_gold(
    client, problem, make_solution, make_user
):
    admin = make_user("ada", role="admin", is_staff=True)
    mine, given_up, unlabeled = (make_solution(problem, n) for n in (1, 2, 3))
    me = get_or_create_labeler(user=admin)
    label(me, mine, [1, 0, -1])
    label(me, given_up, [1], finish_reason="give_up")
    client.force_login(admin)

    changelist_action(client, "mark_quality_control", [mine, given_up])
    assert set(Solution.objects.filter(is_quality_control=True)) == {mine, given_up}
    changelist_action(client, "mark_screening", [given_up])
    given_up.refresh_from_db()
    assert given_up.is_screening and not given_up.is_quality_control
    changelist_action(client, "unmark", [given_up])
    given_up.refresh_from_db()
    assert not given_up.is_screening and not given_up.is_quality_control

    page = changelist_action(
        client, "use_my_ratings_as_gold", [mine, given_up, unlabeled]
    ).content.decode()
    assert "Gold set on 1 solutions" in page
    assert "not a complete label" in page and "have not submitted a label" in page
    for s in (mine, given_up, unlabeled):
        s.refresh_from_db()
    assert mine.gold_ratings == [1, 0, -1]
    assert given_up.gold_ratings is None and unlabeled.gold_ratings is None


def test_researchers_cannot_run_the_gold_actions(client, problem, make_solution, make_user):
    researcher = make_user("rita", role="researcher", is_staff=True)
    solution = make_solution(problem, 1)
    client.force_login(researcher)
    changelist_action(client, "mark_quality_control", [solution])
    solution.refresh_from_db()
    assert not solution.is_quality_control


@pytest.mark.parametrize(
    ("gold", "accepted"),
    [
        ("[1, 0, -1]", True),
        ("[1, 1, 1, 1]", True),
        ("[1, -1, 1]", False),  # nothing after the first -1
        ("[1, 1]", False),  # without a -1, every step is rated
        ("[1, 2]", False),
        ("[1, 1, 1, 1, 1]", False),  # more ratings than steps
    ],
)
def test_gold_ratings_are_validated_in_the_admin_form(
    client, problem, gold, accepted, make_solution, make_user
):
    admin = make_user("ada", role="admin", is_staff=True)
    solution = make_solution(problem, 1)
    client.force_login(admin)
    url = reverse("admin:labeling_solution_change", args=[solution.pk])
    form = client.get(url).context["adminform"].form
    data = {}
    for name in form.fields:
        value = form[name].value()
        if value is not None and value is not False:
            data[name] = value
    data["gold_ratings"] = gold
    response = client.post(url, data)
    solution.refresh_from_db()
    if accepted:
        assert response.status_code == 302, response.context["adminform"].form.errors
        assert solution.gold_ratings == json.loads(gold)
        assert solution.steps == [f"{s} (solution 1)" for s in STEPS]
    else:
        assert response.status_code == 200
        assert solution.gold_ratings is None


def test_seed_demo_serves_screening_then_qc_with_gold(client):
    call_command("seed_demo", stdout=io.StringIO())
    screening = Solution.objects.filter(is_screening=True)
    qc = Solution.objects.filter(is_quality_control=True)
    assert screening.count() == 2 and qc.count() == 4
    for solution in [*screening, *qc]:
        assert solution.gold_ratings == solution.meta["gold_ratings"]
    assert {s.meta["kind"] for s in qc} == {"correct", "wrong_answer", "wrong_step_right_answer"}

    before = list(Solution.objects.filter(gold_ratings__isnull=False).values_list("pk"))
    call_command("seed_demo", stdout=io.StringIO())
    assert list(Solution.objects.filter(gold_ratings__isnull=False).values_list("pk")) == before

    annotator = Labeler.objects.get(user__username="annotator")
    served = next_session(labeler=annotator)
    assert served.queue == "screening" and served.session.solution in screening


# --- guidelines ------------------------------------------------------------------------------


def test_guideline_markdown_renders_math_and_strips_script():
    html = render_markdown(
        "## Ratings\n\nA step like $x_1 + x_2 = \\frac{1}{2}$ is **+1** when right.\n\n"
        "<script>alert('x')</script>\n\n$$a_{n} * b_{n}$$\n\n"
        '<a href="javascript:alert(1)" onclick="x()">link</a>'
    )
    assert "<h2>Ratings</h2>" in html and "<strong>+1</strong>" in html
    assert '<span class="math" data-display="0">x_1 + x_2 = \\frac{1}{2}</span>' in html
    # TeX's _ and * are not read as Markdown emphasis.
    assert "<em>" not in html and '<span class="math" data-display="1">a_{n} * b_{n}</span>' in html
    assert "<script" not in html and "alert('x')" not in html
    assert "javascript:" not in html and "onclick" not in html


def test_guidelines_page_shows_the_newest_guideline(client, make_user):
    client.force_login(make_user("ann"))
    # The migration ships a default text with the rating definitions.
    page = client.get(reverse("guidelines")).content.decode()
    assert "first -1 ends the solution" in page.lower()
    assert "\\frac" in page and 'class="math"' in page

    Guideline.objects.create(title="Version two", body="Rate $1+1=2$ as **+1**.")
    page = client.get(reverse("guidelines")).content.decode()
    assert "<h1>Version two</h1>" in page and 'data-display="0">1+1=2</span>' in page
    assert "first -1 ends the solution" not in page.lower()
    # Every page links to the guidelines.
    assert f'href="{reverse("guidelines")}"' in client.get(reverse("home")).content.decode()


def test_guidelines_need_login(client):
    response = client.get(reverse("guidelines"))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))
