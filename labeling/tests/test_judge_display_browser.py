"""What the labeler sees of the judge, in a real browser: one generation per judge display,
labeled by keyboard; what the page shows when, and what the submitted ratings keep. The last
test closes the loop with the real SmolLM2 judge."""

import json

import pytest

from core import prm800k
from labeling.export import ExportFilters, iter_prm800k_lines
from labeling.models import Generation, JudgeDisplay, LabelingSession, StepRating
from labeling.tests.test_judge_display import generation, judge_run
from labeling.tests.test_workbench_browser import add_solution, wait_rated
from trainer.judging import services as judging
from trainer.judging.models import JudgeLabel
from trainer.tests.test_judge_live import judged, two_solutions

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


KEYS = {1: "3", 0: "2", -1: "1"}


# The server only (not also the local backend): the judge's labels reach the page the same way.
@pytest.mark.parametrize("generator_spec", ["openai"], indirect=True)
def test_confirm_suggests_what_the_real_judge_stored_and_keeps_it_out_of_prm800k(
    page, live_server, generator_spec, settings
):
    expect = pytest.importorskip("playwright.sync_api").expect
    settings.GENERATOR_CONCURRENCY = 1
    run = judged(generator=generator_spec, solutions=two_solutions())
    assert run.status == "succeeded", run.error
    labels = {}
    for label in JudgeLabel.objects.filter(run=run):
        labels.setdefault(label.solution, {})[label.index] = label
    # SmolLM2-135M reads one of the two (test_judge_live); that one is labeled under confirm.
    assert labels, "the judge read neither solution"
    solution, by_step = min(labels.items(), key=lambda item: item[0].pk)
    solution.generation = generation(1, JudgeDisplay.CONFIRM)
    solution.save(update_fields=["generation"])

    page.goto(f"{live_server.url}/label/")
    page.wait_for_selector("#steps li[data-active]")
    session = LabelingSession.objects.get(solution=solution)
    expect(page.locator("#workbench")).to_have_attribute("data-session", str(session.pk))
    assert page.locator("#steps button.chosen").count() == 0
    expected, confirmed = [], False
    for index in range(len(solution.steps)):
        step = page.locator(f"#steps li[data-step='{index}']")
        label = by_step.get(index)
        if label is None:
            expect(step.locator(".judge")).to_have_count(0)
            rating = 1
        else:
            # Before the step is rated: the judge's stored rating as the suggestion, on the
            # button too, and its reason (confirm shows it with the suggestion).
            suggestion = step.locator(":scope > .judge.suggestion")
            expect(suggestion).to_contain_text("Judge's suggestion")
            expect(suggestion).to_have_attribute("data-judge-rating", str(label.rating))
            if label.reason.strip():
                expect(suggestion.locator(".judge-reason")).to_have_text(label.reason.strip())
            expect(step.locator("button.suggested")).to_have_count(1)
            expect(step.locator(f"button.suggested[data-rating='{label.rating}']")).to_have_count(1)
            # Confirm the first suggestion that leaves the rest to rate (not -1), change the
            # others, never to -1: every step is rated.
            if not confirmed and label.rating >= 0:
                rating, confirmed = label.rating, True
            else:
                rating = 0 if label.rating == 1 else 1
        assert StepRating.objects.filter(step__session=session).count() == index
        page.keyboard.press(KEYS[rating])
        wait_rated(page, index + 1)
        if label is not None:
            expect(step.locator(":scope > .judge")).to_contain_text("Judge suggested")
        expected.append(
            (rating, "confirm", None, None)
            if label is None
            else (rating, "confirm", label.rating, run.pk)
        )
    page.keyboard.press("Enter")
    expect(page.locator(f"#workbench[data-session='{session.pk}']")).to_have_count(0)
    session.refresh_from_db()
    assert session.finish_reason == "solution" and session.submitted_at is not None
    assert (
        list(
            StepRating.objects.filter(step__session=session, completion_index=0)
            .order_by("step__index")
            .values_list("rating", "judge_display", "judge_rating", "judge_run_id")
        )
        == expected
    )

    # The PRM800K line has PRM800K's keys only, the labeler's ratings, nothing of the judge.
    (line,) = iter_prm800k_lines(
        filters=ExportFilters(), within=LabelingSession.objects.filter(pk=session.pk)
    )
    record = json.loads(line)
    assert tuple(record) == prm800k.RECORD_KEYS
    assert tuple(record["question"]) == prm800k.QUESTION_KEYS
    assert tuple(record["label"]) == prm800k.LABEL_KEYS
    for step, (rating, *_) in zip(record["label"]["steps"], expected, strict=True):
        assert tuple(step) == prm800k.STEP_KEYS
        assert [tuple(c) for c in step["completions"]] == [prm800k.COMPLETION_KEYS]
        assert step["completions"][0]["rating"] == rating
    assert "judge" not in line
    # The judge's labels are in its run's own export.
    lines = [json.loads(text) for text in judging.export_lines(run=run)]
    (mine,) = [entry for entry in lines if entry["solution_id"] == solution.pk]
    assert mine["provenance"]["judge_run"] == run.pk
    steps = range(len(solution.steps))
    assert mine["ratings"] == [by_step[i].rating if i in by_step else None for i in steps]
    assert mine["reasons"] == [by_step[i].reason if i in by_step else None for i in steps]
