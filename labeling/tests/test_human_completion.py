"""The labeler's own correct step in place of a -1 one (PRM800K phase 1's human_completion)."""

import io
import json

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from labeling.models import Labeler, LabelingSession, Problem, Solution, StepLabel
from labeling.services.workbench import next_session, rate_step, submit_session
from trainer.training.dataset import build_examples

pytestmark = pytest.mark.django_db
STEPS = ["Two plus two.", "That is five.", "So the answer is five.", "# Answer\n\n5"]
ALTERNATIVES = {"1": ["That is four."]}
WRITTEN = "That is $2 + 2 = 4$."


def human(text: str) -> dict:
    return {
        "text": text,
        "rating": None,
        "source": "human",
        "flagged": False,
        "corrected_rating": None,
    }


def expected_step(text: str) -> dict:
    # Phase 1's shape: the rated completions unchanged, the written step, nothing chosen.
    return {
        "completions": [
            {"text": "That is five.", "rating": -1, "flagged": False},
            {"text": "That is four.", "rating": 1, "flagged": False},
        ],
        "human_completion": human(text),
        "chosen_completion": None,
    }


@pytest.fixture
def labeler(annotator) -> Labeler:
    # The user the `page` fixture logs in.
    return Labeler.objects.get_or_create(user=annotator)[0]


def add_solution(alternatives=ALTERNATIVES) -> Solution:
    problem, _ = Problem.objects.get_or_create(text="What is 2+2?", defaults={"answer": "4"})
    return Solution.objects.create(
        problem=problem, steps=STEPS, answer="5", is_correct=False, alternatives=alternatives
    )


@pytest.fixture
def session(labeler):
    add_solution()
    return next_session(labeler=labeler).session


@pytest.fixture
def api(labeler) -> APIClient:
    client = APIClient()
    client.force_authenticate(labeler.user)
    return client


def export() -> list[dict]:
    out = io.StringIO()
    call_command("export_prm800k", "--out", "-", stdout=out, stderr=io.StringIO())
    return [json.loads(line) for line in out.getvalue().splitlines()]


def rate(session, labeler, step, rating, completion=0):
    rate_step(
        session_id=session.pk,
        labeler=labeler,
        step_index=step,
        rating=rating,
        completion_index=completion,
    )


def write(api, session, step, text):
    return api.post(
        f"/api/sessions/{session.pk}/human-completion/", {"step": step, "text": text}, format="json"
    )


def test_api_writes_replaces_removes_exports_and_trains(api, session, labeler):
    rate(session, labeler, 0, 1)
    rate(session, labeler, 1, -1)
    # Not before every alternative of the -1 step is rated.
    assert write(api, session, 1, WRITTEN).status_code == 409
    rate(session, labeler, 1, 1, completion=1)
    # Only in place of the -1 step.
    assert write(api, session, 0, WRITTEN).status_code == 409
    assert write(api, session, 7, WRITTEN).status_code == 409
    assert write(api, session, 1, "x" * 5001).status_code == 400
    assert write(api, session, -1, WRITTEN).status_code == 400

    response = write(api, session, 1, "Wrong draft.")
    assert response.status_code == 200
    state = response.json()["state"]
    assert state["human_completion"] == "Wrong draft."
    assert state["can_write_human_completion"] is True
    assert state["outcome"] == "found_error"
    # Replaced, then removed, then written again.
    assert write(api, session, 1, "  " + WRITTEN + "\n").json()["state"]["human_completion"] == (
        WRITTEN
    )
    assert write(api, session, 1, "").json()["state"]["human_completion"] is None
    assert StepLabel.objects.get(session=session, index=1).human_completion is None
    write(api, session, 1, WRITTEN)

    submitted = api.post(f"/api/sessions/{session.pk}/submit/", {"finish_reason": "found_error"})
    assert submitted.status_code == 200
    # A finished session is closed to it.
    assert write(api, session, 1, "Later.").status_code == 409

    (record,) = export()
    assert record["label"]["steps"][1] == expected_step(WRITTEN)
    assert record["label"]["steps"][0]["chosen_completion"] == 0

    examples = [(e.steps, e.labels) for e in build_examples()]
    assert (["Two plus two.", WRITTEN], [1, 1]) in examples
    assert (["Two plus two.", "That is five."], [1, -1]) in examples
    assert (["Two plus two.", "That is four."], [1, 1]) in examples


def test_another_labelers_session_is_refused(session, make_labeler):
    other = APIClient()
    other.force_authenticate(make_labeler("bob").user)
    assert write(other, session, 1, WRITTEN).status_code == 404


def test_without_alternatives_it_is_written_right_after_the_minus_one(labeler, api):
    add_solution(alternatives={})
    session = next_session(labeler=labeler).session
    rate(session, labeler, 0, -1)
    assert write(api, session, 0, WRITTEN).status_code == 200
    # Re-rating the step away from -1 drops what was written in its place.
    rate(session, labeler, 0, 1)
    assert StepLabel.objects.get(session=session, index=0).human_completion is None
    rate(session, labeler, 0, -1)
    assert write(api, session, 0, WRITTEN).status_code == 200
    submit_session(session_id=session.pk, labeler=labeler, finish_reason="found_error")
    (record,) = export()
    assert record["label"]["steps"] == [
        {
            "completions": [{"text": "Two plus two.", "rating": -1, "flagged": False}],
            "human_completion": human(WRITTEN),
            "chosen_completion": None,
        }
    ]
    assert [(e.steps, e.labels) for e in build_examples()] == [
        (["Two plus two."], [-1]),
        ([WRITTEN], [1]),
    ]


def test_the_page_refuses_an_empty_save(client, session, labeler):
    client.force_login(labeler.user)
    rate(session, labeler, 0, 1)
    rate(session, labeler, 1, -1)
    rate(session, labeler, 1, 1, completion=1)
    url = f"/label/{session.pk}/human-completion/"
    assert client.post(url, {"step_index": 1, "text": "  "}).status_code == 400
    page = client.post(url, {"step_index": 1, "text": WRITTEN}).content.decode()
    assert 'id="human-completion-preview"' in page and 'class="math"' in page
    client.post(url, {"step_index": 1, "remove": "1"})
    assert StepLabel.objects.get(session=session, index=1).human_completion is None


def test_the_preview_renders_math_as_the_step_will_show_and_refuses_an_unsavable_length(
    client, labeler
):
    client.force_login(labeler.user)
    preview = client.post("/label/preview/", {"text": "So $x = \\frac{1}{2}$ <b>bold</b>"})
    assert preview.status_code == 200
    html = preview.content.decode()
    # Math marked for KaTeX, markup escaped.
    assert '<span class="math" data-display="0">x = \\frac{1}{2}</span>' in html
    assert "<b>" not in html and "&lt;b&gt;bold&lt;/b&gt;" in html
    assert client.post("/label/preview/", {"text": "x" * 5001}).status_code == 400
    client.logout()
    assert client.post("/label/preview/", {"text": "1"}).status_code == 302  # to the login


@pytest.mark.django_db(transaction=True)
def test_browser_keyboard_writes_the_step_and_it_exports(page, live_server, labeler):
    from playwright.sync_api import expect

    add_solution()
    page.goto(f"{live_server.url}/label/")  # waits for the page's scripts
    page.wait_for_selector("#steps li[data-active]")
    page.keyboard.press("3")
    expect(page.locator("#steps button.chosen")).to_have_count(1)
    page.keyboard.press("1")
    expect(page.locator("#steps button.chosen")).to_have_count(2)
    # No box before the alternative is rated.
    expect(page.locator("#human-completion")).to_have_count(0)
    page.keyboard.press("3")
    expect(page.locator("#human-completion")).to_have_count(1)
    page.keyboard.press("w")
    expect(page.locator("#human-completion")).to_be_focused()
    page.keyboard.type("Draft with 1 and 3 typed.")  # rating keys typed as text, not ratings
    page.keyboard.press("Control+Enter")
    expect(page.locator("#human-completion-preview")).to_contain_text("Draft with 1 and 3")
    page.keyboard.press("w")
    page.keyboard.press("Control+a")
    page.keyboard.type(WRITTEN)
    # The math is previewed while typing, before anything is saved, and the box keeps focus.
    expect(page.locator("#human-completion-live .math .katex")).to_have_count(1)
    expect(page.locator("#human-completion")).to_be_focused()
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    expect(page.locator("#human-completion-preview .math .katex")).to_have_count(1)
    expect(page.locator(".htmx-request, .htmx-swapping, .htmx-settling")).to_have_count(0)
    page.keyboard.press("w")
    page.keyboard.press("Escape")  # leave the box: Enter submits the session again
    page.keyboard.press("Enter")
    page.wait_for_selector("text=Nothing to label right now")

    (record,) = export()
    assert record["label"]["finish_reason"] == "found_error"
    assert record["label"]["steps"][1] == expected_step(WRITTEN)


@pytest.mark.django_db(transaction=True)
def test_enter_after_saving_ones_own_step_submits_and_unsaved_text_is_never_dropped(
    page, live_server, labeler
):
    # Issue 30, point 4: after Ctrl+Enter the focus stayed in the box (Enter typed a new line),
    # unsaved text was dropped at submit without a word, Enter with steps unrated said
    # nothing, and the box was about 170x45 px.
    from playwright.sync_api import expect

    add_solution()
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.goto(f"{live_server.url}/label/")
    page.wait_for_selector("#steps li[data-active]")
    page.keyboard.press("Enter")
    expect(page.locator("#rating-status")).to_contain_text("Not submitted: Rate every step")
    for key in ("3", "1", "3"):  # step 1 +1, step 2 -1, its alternative +1
        page.keyboard.press(key)
    expect(page.locator("#human-completion")).to_have_count(1)
    box = page.locator("#human-completion").bounding_box()
    steps = page.locator("#steps").bounding_box()
    assert box["width"] > 0.6 * steps["width"] and box["height"] >= 80, (box, steps)

    # Typed, not saved: neither Enter nor the button submits it away.
    page.keyboard.press("w")
    page.keyboard.type("Two and two make four.")
    page.keyboard.press("Escape")
    page.keyboard.press("Enter")
    expect(page.locator("#rating-status")).to_contain_text("your own step is not saved")
    page.locator("#submit-session").click()
    expect(page.locator("#rating-status")).to_contain_text("your own step is not saved")
    assert not LabelingSession.objects.filter(submitted_at__isnull=False).exists()

    # Saved with Ctrl+Enter: the box lets go of the focus, and Enter submits.
    page.keyboard.press("w")
    page.keyboard.press("Control+Enter")
    expect(page.locator("#human-completion-preview")).to_contain_text("Two and two make four.")
    expect(page.locator("#human-completion")).not_to_be_focused()
    page.keyboard.press("Enter")
    page.wait_for_selector("text=Nothing to label right now")
    (record,) = export()
    assert record["label"]["steps"][1] == expected_step("Two and two make four.")
