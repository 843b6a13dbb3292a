"""The answer-review page in a real Chromium (issue 40): the keys e, n and s decide or skip, the
decisions are stored, the empty state follows, and the page never scrolls sideways at 390 px,
light or dark; the problem's math is drawn by KaTeX."""

from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from labeling.models import AnswerReview, Problem, Solution

ARTIFACTS = Path(__file__).resolve().parents[2] / "var" / "test-artifacts"

pytestmark = pytest.mark.django_db(transaction=True)


def _waiting(problem: Problem, answer: str, minutes_ago: int) -> Solution:
    solution = Solution.objects.create(
        problem=problem, steps=["Work.", f"# Answer\n\n{answer}"], answer=answer
    )
    Solution.objects.filter(pk=solution.pk).update(
        created_at=timezone.now() - timedelta(minutes=minutes_ago)
    )
    return solution


@pytest.fixture
def researcher_page(browser, live_server, make_user):
    make_user("rita", "researcher")
    page = browser.new_page(viewport={"width": 390, "height": 844})
    page.goto(f"{live_server.url}/accounts/login/?next=/answers/review/")
    page.get_by_label("Username").fill("rita")
    page.get_by_label("Password").fill("rita-pass-123")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{live_server.url}/answers/review/")
    return page


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_keys_decide_and_skip_and_the_page_fits_390_px(researcher_page, live_server, theme):
    problem = Problem.objects.create(
        text="Simplify $\\dfrac{\\sqrt{72}}{\\sqrt{2}} + \\left(\\frac{1}{2}\\right)^{-1}$, "
        "and give the answer over a very long line " + "without_any_break_in_it_at_all_" * 4 + ".",
        answer="\\frac{16}{2}\\text{ units, i.e. eight units of length in the given scale}",
        unique_id="test/review/browser.json",
    )
    skipped = _waiting(problem, "8 units", 30)
    equal = _waiting(problem, "eight units", 20)
    not_equal = _waiting(problem, "8 \\text{ square units}", 10)
    page = researcher_page
    page.emulate_media(color_scheme=theme)
    page.reload()

    card = page.locator(".answer-review")
    assert card.get_attribute("data-solution") == str(skipped.pk)
    assert page.locator(".problem-text .katex .mfrac").first.bounding_box()["height"] > 0
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"answer-review-{theme}.png"), full_page=True)

    page.keyboard.press("s")
    page.wait_for_selector(f'.answer-review[data-solution="{equal.pk}"]')
    page.keyboard.press("e")
    page.wait_for_selector(f'.answer-review[data-solution="{not_equal.pk}"]')
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page.keyboard.press("n")
    page.wait_for_selector(".answer-review-empty")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390

    verdicts = dict(AnswerReview.objects.values_list("solution_id", "verdict"))
    assert verdicts == {equal.pk: "equal", not_equal.pk: "not_equal"}
    correct = dict(Solution.objects.values_list("pk", "is_correct"))
    assert correct == {skipped.pk: None, equal.pk: True, not_equal.pk: False}

    # The skipped one waits for the next visit.
    page.get_by_role("link", name="start again with the skipped ones").click()
    page.wait_for_selector(f'.answer-review[data-solution="{skipped.pk}"]')
