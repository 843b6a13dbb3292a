"""The workbench's layout and accessibility in a real browser: density, focus, phones, dark."""

from pathlib import Path

import pytest

from labeling.models import LabelingSession, Problem, Solution, StepRating

ARTIFACTS = Path(__file__).resolve().parents[2] / "var" / "test-artifacts"

# A MATH-style solution of twelve steps, the length of a typical PRM800K one.
PROBLEM = (
    "The sum of two numbers is $22$. Their difference is $4$. What is the product of the "
    "two numbers, $xy$?"
)
STEPS = [
    "Let the two numbers be $x$ and $y$, with $x > y$.",
    "Then $x + y = 22$ and $x - y = 4$.",
    "Adding the two equations gives $2x = 26$, so $x = 13$.",
    "Subtracting the second equation from the first gives $2y = 18$.",
    "So $y = 9$.",
    "Check: $13 + 9 = 22$ and $13 - 9 = 4$, as required.",
    "The product is $xy = 13 \\cdot 9$.",
    "We can compute $13 \\cdot 9 = 13 \\cdot 10 - 13$.",
    "That is $130 - 13 = 117$.",
    "Alternatively, $xy = \\frac{(x+y)^2 - (x-y)^2}{4} = \\frac{484 - 16}{4}$.",
    "And $\\frac{468}{4} = 117$, which agrees.",
    "# Answer\n\n117",
]


@pytest.fixture
def twelve_steps(db):
    problem = Problem.objects.create(text=PROBLEM, answer="117")
    return Solution.objects.create(problem=problem, steps=STEPS, answer="117", is_correct=True)


def open_workbench(page, live_server, *, width: int, height: int, dark: bool = False) -> None:
    page.set_viewport_size({"width": width, "height": height})
    page.emulate_media(color_scheme="dark" if dark else "light")
    page.goto(f"{live_server.url}/label/")
    page.wait_for_selector("#steps li[data-active]")


def rate_all(page, count: int) -> None:
    expect = pytest.importorskip("playwright.sync_api").expect
    for _ in range(count):
        page.keyboard.press("3")
    expect(page.locator("#steps button.chosen")).to_have_count(count)
    expect(page.locator("#steps")).to_have_attribute("data-waiting", "0")


def page_size(page) -> dict:
    return page.evaluate(
        "({width: document.documentElement.scrollWidth, height: document.documentElement"
        ".scrollHeight, viewWidth: window.innerWidth, viewHeight: window.innerHeight})"
    )


def test_a_twelve_step_solution_fits_a_1400_by_1000_window(page, live_server, twelve_steps):
    open_workbench(page, live_server, width=1400, height=1000)
    rate_all(page, len(STEPS))
    submit = page.get_by_role("button", name="Submit and next (Enter)")
    size = page_size(page)
    # Every step, its buttons and the submit button without scrolling.
    assert size["height"] <= size["viewHeight"], size
    assert size["width"] <= size["viewWidth"], size
    assert submit.bounding_box()["y"] + submit.bounding_box()["height"] <= 1000
    # One line per step: the buttons sit at the left of the text, on the same line.
    first = page.locator("#steps li[data-step='0']")
    buttons = first.locator(".rate").bounding_box()
    text = first.locator(".step-text").bounding_box()
    assert buttons["x"] + buttons["width"] <= text["x"]
    assert abs(buttons["y"] - text["y"]) < buttons["height"]
    # The ground-truth answer is boxed, inline with the problem.
    expect = pytest.importorskip("playwright.sync_api").expect
    expect(page.locator(".problem .truth .answer.boxed")).to_contain_text("117")
    for theme in ("light", "dark"):
        page.emulate_media(color_scheme=theme)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"workbench-1400-{theme}.png"))


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_no_horizontal_scroll_at_390_px(page, live_server, twelve_steps, theme):
    open_workbench(page, live_server, width=390, height=844, dark=theme == "dark")
    rate_all(page, 6)
    size = page_size(page)
    assert size["width"] <= 390, size
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    # Dark mode follows the system setting.
    channels = [int(c) for c in background[background.index("(") + 1 : -1].split(",")[:3]]
    assert (sum(channels) / 3 < 80) == (theme == "dark"), background
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"workbench-390-{theme}.png"), full_page=True)


def focused(page) -> dict:
    return page.evaluate(
        "(() => { const e = document.activeElement; return {tag: e.tagName, "
        "inWorkbench: !!e.closest('#workbench'), item: e.dataset ? e.dataset.item || null : null,"
        " current: e.getAttribute('aria-current')}; })()"
    )


def test_focus_stays_on_the_active_step_and_only_changes_are_announced(
    page, live_server, twelve_steps
):
    expect = pytest.importorskip("playwright.sync_api").expect
    open_workbench(page, live_server, width=1400, height=1000)
    # Only the status line is a live region: the step list is not re-announced on each change.
    assert (
        page.locator("#steps[aria-live], #steps [aria-live]:not(#human-completion-live)").count()
        == 0
    )
    status = page.locator("#rating-status")
    assert status.get_attribute("role") == "status"
    for rated in range(1, 4):
        page.keyboard.press("3")
        expect(page.locator("#steps button.chosen")).to_have_count(rated)
        expect(page.locator("#steps")).to_have_attribute("data-waiting", "0")
        # Focus is on the step to rate next, which is marked as the current step.
        assert focused(page) == {
            "tag": "LI",
            "inWorkbench": True,
            "item": f"s{rated}",
            "current": "step",
        }
        assert page.locator("#steps [aria-current=step]").count() == 1
        expect(status).to_have_text(f"Step {rated} rated +1. Now step {rated + 1} of 12.")
    # A click on a rating button keeps focus in the workbench as well (on the next step).
    page.locator("#steps li[data-step='3'] button[data-rating='0']").click()
    expect(page.locator("#steps button.chosen")).to_have_count(4)
    expect(page.locator("#steps")).to_have_attribute("data-waiting", "0")
    assert focused(page)["item"] == "s4"
    # Tab from the active step reaches its first rating button at once.
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.dataset.rating") == "-1"
    assert page.evaluate("document.activeElement.closest('li').dataset.item") == "s4"
    assert StepRating.objects.count() == 4
    assert LabelingSession.objects.get().is_open
