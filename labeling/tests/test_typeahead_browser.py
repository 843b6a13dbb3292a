"""Typing ahead of the network: every key press lands on the item the labeler saw as active,
in order, nothing is dropped, and the page ends showing exactly what is stored."""

import pytest
from django.utils import timezone

from labeling.models import LabelingSession, Problem, StepRating

# Chromium's own network emulation: every request and response waits this long.
LATENCY_MS = 150
# Between key presses: faster than one round trip, as a labeler who knows the solution types.
KEY_GAP_MS = 100


@pytest.fixture
def solution(make_solution):
    problem = Problem.objects.create(text="What is $2+2$?", answer="4")
    return make_solution(
        problem, steps=["Two and two.", "Add them.", "That makes 4.", "# Answer\n\n4"]
    )


def slow_network(page) -> None:
    cdp = page.context.new_cdp_session(page)
    cdp.send("Network.enable")
    conditions = {"offline": False, "latency": LATENCY_MS}
    cdp.send(
        "Network.emulateNetworkConditions",
        {**conditions, "downloadThroughput": -1, "uploadThroughput": -1},
    )


def open_workbench(page, live_server) -> None:
    page.goto(f"{live_server.url}/label/")
    page.wait_for_selector("#steps li[data-active]")


def type_keys(page, keys: list[str]) -> None:
    for n, key in enumerate(keys):
        if n:
            page.wait_for_timeout(KEY_GAP_MS)
        page.keyboard.press(key)


def settled(page, *, chosen: int, active: str | None) -> None:
    """Wait until every rating on its way is answered and the page shows what came back."""
    expect = pytest.importorskip("playwright.sync_api").expect
    expect(page.locator("#steps")).to_have_attribute("data-waiting", "0")
    expect(page.locator("#steps button.chosen")).to_have_count(chosen)
    if active is not None:
        expect(page.locator("#steps li[data-active]")).to_have_attribute("data-item", active)


def shown(page) -> list[tuple[int, bool]]:
    """(rating, unsure) of each rated step as the page shows it."""
    out = []
    for li in page.locator("#steps li.step").all():
        chosen = li.locator(":scope > .rate button.chosen")
        if chosen.count():
            box = li.locator(":scope > .rate input[name=flagged]")
            out.append((int(chosen.get_attribute("data-rating")), box.is_checked()))
    return out


def stored() -> list[tuple[int, bool]]:
    rows = StepRating.objects.filter(completion_index=0).order_by("step__index")
    return list(rows.values_list("rating", "flagged"))


@pytest.mark.parametrize(
    "keys,ratings",
    [(["3", "2", "3"], [1, 0, 1]), (["3", "3", "3"], [1, 1, 1])],
    ids=["three-two-three", "one-key-three-times"],
)
def test_keys_typed_faster_than_the_network_rate_the_steps_in_order(
    page, live_server, solution, keys, ratings
):
    open_workbench(page, live_server)
    slow_network(page)
    type_keys(page, keys)
    settled(page, chosen=3, active="s3")
    expected = [(r, False) for r in ratings]
    assert stored() == expected
    assert shown(page) == expected
    # Each rating named its item and went in the order typed.
    assert page.locator("#steps").get_attribute("data-seq") == "3"


def test_ahead_of_the_network_unsure_goes_with_the_rating_it_precedes(page, live_server, solution):
    open_workbench(page, live_server)
    slow_network(page)
    type_keys(page, ["3", "u", "2", "3"])
    settled(page, chosen=3, active="s3")
    assert stored() == [(1, False), (0, True), (1, False)]
    assert shown(page) == stored()


def test_unsure_after_backspace_on_a_rated_step_is_stored(page, live_server, solution):
    open_workbench(page, live_server)
    type_keys(page, ["3", "3"])
    settled(page, chosen=2, active="s2")
    page.keyboard.press("Backspace")
    page.keyboard.press("u")
    settled(page, chosen=2, active="s1")
    assert stored() == [(1, False), (1, True)]
    assert shown(page) == stored()
    # Unsure again takes it back, and the box's click does the same as the key.
    page.keyboard.press("u")
    settled(page, chosen=2, active="s1")
    assert stored() == [(1, False), (1, False)]
    page.locator("#steps li[data-step='0'] input[name=flagged]").click()
    settled(page, chosen=2, active=None)
    assert stored() == [(1, True), (1, False)]
    assert shown(page) == stored()


def test_a_press_the_server_refuses_is_shown_and_the_rest_are_not_sent(page, live_server, solution):
    open_workbench(page, live_server)
    slow_network(page)
    messages = []
    page.on("dialog", lambda dialog: (messages.append(dialog.message), dialog.dismiss()))
    # The session ends elsewhere (another tab, a lapsed lease) while the keys are typed.
    LabelingSession.objects.update(finish_reason="give_up", submitted_at=timezone.now())
    type_keys(page, ["3", "2"])
    expect = pytest.importorskip("playwright.sync_api").expect
    expect(page.locator("#steps")).to_have_attribute("data-waiting", "0")
    status = page.locator("#rating-status")
    expect(status).to_contain_text("not saved")
    expect(status).to_contain_text("1 later key press")
    # The session itself is over: the page says so in place, with the way on (no alert()).
    expect(page.locator("#session-notice")).to_contain_text("This session is already finished.")
    expect(page.locator("#session-notice a")).to_be_visible()
    assert messages == []
    assert not StepRating.objects.exists()


def test_enter_typed_ahead_submits_once_the_ratings_are_stored(page, live_server, make_solution):
    problem = Problem.objects.create(text="What is $1+1$?", answer="2")
    make_solution(problem, steps=["One and one.", "# Answer\n\n2"])
    make_solution(problem, 1, steps=["Twice one.", "# Answer\n\n2"])
    open_workbench(page, live_server)
    first = page.locator("#workbench").get_attribute("data-session")
    slow_network(page)
    # The last 3 comes while the submission is on its way: the page says it waits for the
    # next solution, and rates neither the finished session nor the next, unseen one.
    type_keys(page, ["3", "3", "Enter", "3"])
    expect = pytest.importorskip("playwright.sync_api").expect
    expect(page.locator("#workbench")).not_to_have_attribute("data-session", first)
    settled(page, chosen=0, active="s0")
    done = LabelingSession.objects.get(pk=first)
    assert done.finish_reason == "solution"
    assert [r for r, _ in stored()] == [1, 1]  # the next session has no rating


def test_a_click_on_submit_waits_for_the_rating_clicked_just_before(page, live_server, solution):
    """Every step is rated, so the page shows "Submit"; a -1 is clicked on step 2 and Submit
    at once. The submission goes with the -1 (the label ends there), not with the form the
    page showed before the -1 was answered."""
    open_workbench(page, live_server)
    first = page.locator("#workbench").get_attribute("data-session")
    type_keys(page, ["3", "3", "3", "3"])
    settled(page, chosen=4, active=None)
    slow_network(page)
    page.locator("#steps li[data-item='s1'] button[data-rating='-1']").click()
    page.locator("#submit-session").click()
    expect = pytest.importorskip("playwright.sync_api").expect
    expect(page.locator("body")).to_contain_text("Submitted: your label, ending at its -1 step")
    done = LabelingSession.objects.get(pk=first)
    assert done.finish_reason == "found_error"
    assert [r for r, _ in stored()] == [1, -1]


def test_typed_ahead_a_minus_one_leads_on_to_its_alternatives(page, live_server, make_solution):
    problem = Problem.objects.create(text="What is $8/2$?", answer="4")
    make_solution(
        problem,
        steps=["Eight halves.", "That is 5.", "# Answer\n\n5"],
        answer="5",
        is_correct=False,
        alternatives={"1": ["That is 4.", "Four."]},
    )
    open_workbench(page, live_server)
    slow_network(page)
    type_keys(page, ["3", "1", "u", "3", "2"])
    settled(page, chosen=4, active=None)
    rows = StepRating.objects.order_by("step__index", "completion_index")
    assert list(rows.values_list("step__index", "completion_index", "rating", "flagged")) == [
        (0, 0, 1, False),
        (1, 0, -1, False),
        (1, 1, 1, True),
        (1, 2, 0, False),
    ]
    assert page.get_by_role("button", name="Submit and next (Enter)").count() == 1
