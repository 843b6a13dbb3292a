"""The workbench page acts on the server's next actions and applies no labeling rule itself."""

import pytest

from core import rules
from labeling.models import Problem, StepRating

HELD = "Held back by the server for this test."


@pytest.fixture
def solution(make_solution):
    problem = Problem.objects.create(text="What is $2+2$?", answer="4")
    return make_solution(problem, steps=["Two and two.", "Add them.", "# Answer\n\n4"])


@pytest.fixture
def step_two_held(monkeypatch):
    """The server says step 2 may not be rated, though every rule of today's would allow it."""
    real = rules.next_actions

    def held(progress):
        actions = real(progress)
        for item in actions["items"]:
            if item["key"] == "s1":
                item.update(open=False, reason=HELD)
        return actions

    monkeypatch.setattr(rules, "next_actions", held)


def test_a_key_does_not_rate_a_step_the_server_says_is_closed(
    page, live_server, solution, step_two_held
):
    expect = pytest.importorskip("playwright.sync_api").expect
    ratings_sent = []
    page.on("request", lambda r: ratings_sent.append(r) if "/rate" in r.url else None)
    page.goto(f"{live_server.url}/label/")
    page.wait_for_selector("#steps li[data-active]")
    page.keyboard.press("3")
    expect(page.locator("#steps button.chosen")).to_have_count(1)
    expect(page.locator("#steps")).to_have_attribute("data-waiting", "0")
    # Step 2 is where the keys go next, but the server's answer closed it: the key is refused
    # with the server's reason, and nothing is sent.
    page.keyboard.press("3")
    expect(page.locator("#rating-status")).to_contain_text(HELD)
    # A click on it is refused the same way.
    page.evaluate("document.getElementById('rating-status').textContent = ''")
    page.locator("#steps li[data-item='s1'] button[data-rating='0']").click()
    expect(page.locator("#rating-status")).to_contain_text(HELD)
    page.wait_for_timeout(300)  # a request sent after all would be seen by now
    assert len(ratings_sent) == 1
    assert list(StepRating.objects.values_list("step__index", "rating")) == [(0, 1)]


def test_a_key_typed_past_a_minus_one_does_not_overwrite_it(page, live_server, solution):
    expect = pytest.importorskip("playwright.sync_api").expect
    page.goto(f"{live_server.url}/label/")
    page.wait_for_selector("#steps li[data-active]")
    # A fast labeler: +1, then -1 on step 2 (which ends the label), then one more key typed
    # before the page said "ready to submit". The -1 must stay.
    page.keyboard.press("3")
    page.keyboard.press("1")
    page.keyboard.press("3")
    expect(page.locator("#steps")).to_have_attribute("data-waiting", "0")
    expect(page.locator("#rating-status")).to_contain_text("is rated -1")
    page.wait_for_timeout(300)  # a third rating sent after all would be stored by now
    stored = dict(StepRating.objects.values_list("step__index", "rating"))
    assert stored == {0: 1, 1: -1}
    expect(page.locator("#submit-session")).to_be_visible()
    # Changing the -1 is deliberate: Backspace goes back to it, then a key rates it.
    page.keyboard.press("Backspace")
    page.keyboard.press("3")
    expect(page.locator("#steps li[data-item='s1'] .rate")).to_have_attribute("data-rated", "1")
    assert dict(StepRating.objects.values_list("step__index", "rating")) == {0: 1, 1: 1}
