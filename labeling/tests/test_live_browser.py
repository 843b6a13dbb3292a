"""Phase-1 live labeling in a real browser against a real OpenAI-compatible server (SmolLM2
through `transformers serve`): proposals, ratings, a choice, a written step, the export."""

import io
import json
from pathlib import Path

from django.core.management import call_command
from playwright.sync_api import expect

from generators import SamplingSettings
from labeling.models import LabelingSession, Problem, StepLabel, StepRating
from labeling.services import live

PHASE1_LINE = json.loads(
    (Path(__file__).parent / "fixtures" / "prm800k_phase1.jsonl").read_text().splitlines()[1]
)

FIRST_STEP = "Add the two numbers: $2 + 2 = 4$."


def shape(record: dict) -> dict:
    return {
        "top": sorted(record),
        "question": sorted(record["question"]),
        "label": sorted(record["label"]),
        "step": sorted(record["label"]["steps"][0]),
        "completion": sorted(record["label"]["steps"][0]["completions"][0]),
    }


def test_live_proposals_rated_chosen_and_written_in_the_browser(
    page, live_server, generator_spec, settings, eager_tasks
):
    # The proposals task runs in the request that queues it (no worker in this test): with the
    # local backend the model runs in the server's thread, with openai a real server answers.
    problem = Problem.objects.create(text="What is $2 + 2$?", answer="4")
    live.create_live_generation(
        user=None,
        problem_ids=[problem.pk],
        generator=generator_spec,
        settings=SamplingSettings(temperature=0.8, max_tokens=64, seed=1),
        proposals=2,
    )
    page.goto(f"{live_server.url}/label/")
    proposals = page.locator("#live-steps .proposals > li")
    expect(proposals.first).to_be_visible(timeout=120_000)
    count = proposals.count()
    assert count >= 1
    # The real model may propose the answer step at once, which would end the session here:
    # +1 goes to the first proposal that is not one, -1 to the rest.
    texts = list(
        StepRating.objects.filter(step__index=0)
        .order_by("completion_index")
        .values_list("text", flat=True)
    )
    pick = next((i for i, text in enumerate(texts) if "# Answer" not in text), None)
    # Step 1: keyboard, typed ahead of the answers (no wait between presses), then Enter,
    # which continues from the +1 once the ratings are stored; when every proposal is an
    # answer step, all are -1 and the labeler writes the first step.
    for i in range(count):
        page.keyboard.press("3" if i == pick else "1")
    if pick is None:
        page.locator("#human-completion").fill(FIRST_STEP)
        page.keyboard.press("Control+Enter")
    else:
        page.keyboard.press("Enter")
    # Step 2, typed ahead while its proposals are still being generated: -1 on each (at most
    # two come back; a press beyond the last proposal is refused on the page, not stored).
    page.keyboard.press("1")
    page.keyboard.press("1")
    expect(page.locator("#live-steps .path > li")).to_have_count(1, timeout=120_000)
    second = page.locator("#live-steps .proposals > li")
    expect(second.first).to_be_visible(timeout=120_000)
    expect(page.locator("#live-steps .proposals button.chosen")).to_have_count(second.count())
    expect(page.locator("#live-steps .proposals button.chosen.bad")).to_have_count(second.count())
    # Re-rated with the mouse (the same -1): nothing changes, and the write box is offered.
    second.first.get_by_role("button", name="-1 bad").click()
    page.locator("#human-completion").fill("# Answer\n\n4")
    page.keyboard.press("Control+Enter")
    expect(page.get_by_text("Nothing to label", exact=False)).to_be_visible(timeout=60_000)
    session = LabelingSession.objects.get()
    assert session.finish_reason == "solution" and session.solution.is_correct
    assert StepLabel.objects.filter(session=session).count() == 2
    out = io.StringIO()
    call_command("export_prm800k", "--out", "-", stdout=out)
    [line] = [json.loads(x) for x in out.getvalue().splitlines()]
    assert shape(line) == shape(PHASE1_LINE)
    steps = line["label"]["steps"]
    assert steps[0]["chosen_completion"] == pick
    ratings = [1 if i == pick else -1 for i in range(count)]
    assert [c["rating"] for c in steps[0]["completions"]] == ratings
    # The path continued from the proposal rated +1 (or the written step), and no step-2
    # proposal repeats it.
    first = FIRST_STEP if pick is None else steps[0]["completions"][pick]["text"]
    assert session.solution.steps[0] == first
    assert first not in [c["text"] for c in steps[1]["completions"]]
    assert steps[1]["chosen_completion"] is None
    assert steps[1]["human_completion"]["text"] == "# Answer\n\n4"
    assert {c["rating"] for c in steps[1]["completions"]} == {-1}
