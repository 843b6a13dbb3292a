"""What the labeler sees of the judge, in a real browser: one generation per judge display,
labeled by keyboard; what the page shows when, and what the submitted ratings keep."""

import pytest

from labeling.models import Generation, JudgeDisplay, LabelingSession, StepRating
from labeling.tests.test_judge_display import judge_run
from labeling.tests.test_workbench_browser import add_solution, wait_rated

REASONS = ["Halving 8 gives 4.", "Four is not five.", "The answer follows."]


def in_generation(display: str):
    """A solution of a generation with `display`, judged twice (the newer run counts)."""
    solution = add_solution(["Half of 8 is 4.", "So it is 5.", "# Answer\n\n4"])
    solution.generation = Generation.objects.create(number=1, judge_display=display)
    solution.save(update_fields=["generation"])
    judge_run(solution=solution, ratings=[-1, -1, -1], reasons=["An older run."] * 3)
    return judge_run(solution=solution, ratings=[1, -1, 1], reasons=REASONS)


def submitted(page):
    page.keyboard.press("Enter")
    page.wait_for_selector("text=Nothing to label right now")
    session = LabelingSession.objects.get()
    assert session.finish_reason == "solution"
    return list(
        StepRating.objects.filter(step__session=session)
        .order_by("step__index")
        .values_list("rating", "judge_display", "judge_rating", "judge_run_id")
    )


def test_hidden_shows_nothing_of_the_judge_not_even_in_the_source(page, live_server):
    in_generation(JudgeDisplay.HIDDEN)
    page.goto(f"{live_server.url}/label/")
    page.wait_for_selector("#steps li[data-active]")
    for count in (1, 2, 3):
        page.keyboard.press("3")
        wait_rated(page, count)
        html = page.content()
        assert page.locator("#steps .judge").count() == 0
        assert not any(reason in html for reason in [*REASONS, "An older run."])
        assert "suggested" not in html
    assert submitted(page) == [(1, "hidden", None, None)] * 3


def test_revealed_shows_the_judges_rating_and_reason_once_the_step_is_rated(page, live_server):
    expect = pytest.importorskip("playwright.sync_api").expect
    run = in_generation(JudgeDisplay.REVEALED)
    page.goto(f"{live_server.url}/label/")
    page.wait_for_selector("#steps li[data-active]")
    assert page.locator("#steps .judge").count() == 0
    assert REASONS[0] not in page.content()
    page.keyboard.press("3")
    wait_rated(page, 1)
    first = page.locator("#steps li[data-step='0'] > .judge")
    expect(first).to_contain_text("Judge rated")
    expect(first).to_contain_text("+1")
    expect(first).to_contain_text(REASONS[0])
    # The step to rate now shows nothing of the judge before it is rated.
    assert page.locator("#steps li[data-step='1'] > .judge").count() == 0
    assert REASONS[1] not in page.content()
    page.keyboard.press("2")
    wait_rated(page, 2)
    expect(page.locator("#steps li[data-step='1'] > .judge")).to_contain_text(REASONS[1])
    page.keyboard.press("3")
    wait_rated(page, 3)
    assert submitted(page) == [
        (1, "revealed", 1, run.pk),
        (0, "revealed", -1, run.pk),
        (1, "revealed", 1, run.pk),
    ]


def test_confirm_suggests_first_and_the_labeler_confirms_one_step_and_changes_another(
    page, live_server
):
    expect = pytest.importorskip("playwright.sync_api").expect
    run = in_generation(JudgeDisplay.CONFIRM)
    page.goto(f"{live_server.url}/label/")
    page.wait_for_selector("#steps li[data-active]")
    suggestion = page.locator("#steps li[data-step='0'] > .judge.suggestion")
    expect(suggestion).to_contain_text("Judge's suggestion")
    expect(suggestion).to_contain_text(REASONS[0])
    # Marked on its button, never chosen for the labeler: nothing is stored until they rate.
    expect(
        page.locator("#steps li[data-step='0'] button.suggested[data-rating='1']")
    ).to_have_count(1)
    assert page.locator("#steps button.chosen").count() == 0
    assert not StepRating.objects.exists()
    page.keyboard.press("3")  # confirms the judge's +1
    wait_rated(page, 1)
    expect(page.locator("#steps li[data-step='1'] > .judge.suggestion")).to_contain_text(REASONS[1])
    expect(
        page.locator("#steps li[data-step='1'] button.suggested[data-rating='-1']")
    ).to_have_count(1)
    page.keyboard.press("3")  # changes the judge's -1 to +1
    wait_rated(page, 2)
    expect(page.locator("#steps li[data-step='1'] > .judge")).to_contain_text("Judge suggested")
    page.keyboard.press("3")
    wait_rated(page, 3)
    assert submitted(page) == [
        (1, "confirm", 1, run.pk),
        (1, "confirm", -1, run.pk),
        (1, "confirm", 1, run.pk),
    ]
