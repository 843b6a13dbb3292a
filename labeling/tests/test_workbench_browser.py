"""The workbench in a real browser: keyboard-only labeling, math, escaping, every ending."""

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command
from django.utils import timezone
from rest_framework.test import APIClient

from labeling.models import Labeler, LabelingSession, Problem, Solution, StepRating
from labeling.services.workbench import LEASE_LAPSED

ARTIFACTS = Path(__file__).resolve().parents[2] / "var" / "test-artifacts"


def add_solution(steps, answer="4", problem_text="What is $\\frac{8}{2}$?"):
    problem, _ = Problem.objects.get_or_create(text=problem_text, defaults={"answer": "4"})
    return Solution.objects.create(problem=problem, steps=steps, answer=answer, is_correct=True)


def wait_rated(page, count):
    # Wait for the swap and for htmx to finish wiring up the new buttons. Locator waits, not
    # wait_for_function: the page's Content-Security-Policy forbids evaluating strings.
    expect = pytest.importorskip("playwright.sync_api").expect
    expect(page.locator("#steps button.chosen")).to_have_count(count)
    expect(page.locator(".htmx-request, .htmx-swapping, .htmx-settling")).to_have_count(0)


def test_keyboard_only_labeling_to_solution_renders_math_and_escapes(page, live_server):
    add_solution(
        [
            "Half of $8$ is $\\frac{8}{2}$.",
            "<script>window.pwned=1</script> So it is 4.",
            "# Answer\n\n4",
        ]
    )
    page.goto(f"{live_server.url}/label/")
    page.wait_for_selector("#steps li[data-active]")
    # Math is drawn by KaTeX, not shown as raw TeX.
    assert page.locator(".problem-text .katex .mfrac").count() == 1
    assert "\\frac" not in page.locator(".problem-text").inner_text()
    page.keyboard.press("3")
    wait_rated(page, 1)
    assert page.evaluate("window.pwned") is None
    assert "<script>window.pwned=1</script>" in page.locator("#steps").inner_text()
    page.keyboard.press("u")
    page.keyboard.press("2")
    wait_rated(page, 2)
    page.keyboard.press("3")
    wait_rated(page, 3)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "workbench.png"), full_page=True)
    page.keyboard.press("Enter")
    page.wait_for_selector("text=Nothing to label right now")

    session = LabelingSession.objects.get()
    assert session.finish_reason == "solution" and session.total_time >= 0
    ratings = list(StepRating.objects.order_by("step__index").values_list("rating", "flagged"))
    assert ratings == [(1, False), (0, True), (1, False)]


def test_minus_one_ends_with_found_error_and_earlier_rating_can_change(page, live_server):
    add_solution(["Step one.", "Step two.", "Step three.", "# Answer\n\n5"], answer="5")
    page.goto(f"{live_server.url}/label/")
    page.wait_for_selector("#steps li[data-active]")
    page.keyboard.press("3")
    wait_rated(page, 1)
    page.keyboard.press("-")  # -1 on step two
    wait_rated(page, 2)
    assert page.locator("#steps li.step").count() == 2
    # Go back one step and change the -1 to 0: the following step opens again.
    page.keyboard.press("k")
    page.keyboard.press("k")
    page.locator("#steps li[data-step='1'] button[data-rating='0']").click()
    page.wait_for_selector("#steps li[data-step='2']")
    page.keyboard.press("1")
    wait_rated(page, 3)
    page.get_by_role("button", name="Submit and next (Enter)").click()
    page.wait_for_selector("text=Nothing to label right now")
    session = LabelingSession.objects.get()
    assert session.finish_reason == "found_error"
    assert list(StepRating.objects.order_by("step__index").values_list("rating", flat=True)) == [
        1,
        0,
        -1,
    ]
    out = io.StringIO()
    call_command("export_prm800k", "--out", "-", stdout=out, stderr=io.StringIO())
    (record,) = [json.loads(x) for x in out.getvalue().splitlines()]
    assert record["label"]["finish_reason"] == "found_error"
    assert [s["completions"][0]["rating"] for s in record["label"]["steps"]] == [1, 0, -1]


@pytest.mark.parametrize(
    "ending,reason", [("Give up", "give_up"), ("Report bad problem", "bad_problem")]
)
def test_give_up_and_bad_problem_ask_for_a_reason(page, live_server, ending, reason):
    add_solution(["Step one.", "# Answer\n\n4"])
    page.goto(f"{live_server.url}/label/")
    page.get_by_text(ending, exact=True).first.click()  # the <summary>
    form = page.locator(f"form:has(input[value='{reason}'])")
    form.locator("input[name=reason]").fill("The statement is ambiguous.")
    form.get_by_role("button").click()
    page.wait_for_selector("text=Nothing to label right now")
    session = LabelingSession.objects.get()
    assert (session.finish_reason, session.finish_reason_text) == (
        reason,
        "The statement is ambiguous.",
    )
    assert Labeler.objects.get().sessions.count() == 1


def test_alternatives_of_a_wrong_step_are_rated_by_keyboard_before_found_error(page, live_server):
    solution = add_solution(["Eight halves.", "That is 5.", "# Answer\n\n5"], answer="5")
    solution.alternatives = {"1": ["That is $4$.", "That is $\\frac{8}{2} = 4$."]}
    solution.save()
    page.goto(f"{live_server.url}/label/")
    page.wait_for_selector("#steps li[data-active]")
    page.keyboard.press("3")
    wait_rated(page, 1)
    page.keyboard.press("1")  # -1 on step two: its first alternative becomes the active item
    wait_rated(page, 2)
    assert page.locator("#steps li[data-active]").get_attribute("data-item") == "s1c1"
    assert page.get_by_role("button", name="Submit and next (Enter)").count() == 0
    page.keyboard.press("u")
    page.keyboard.press("3")
    wait_rated(page, 3)
    assert page.locator("li[data-item='s1c2'] .katex .mfrac").count() == 1  # math in alternatives
    page.keyboard.press("2")
    wait_rated(page, 4)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "workbench-alternatives.png"), full_page=True)
    page.keyboard.press("Enter")
    page.wait_for_selector("text=Nothing to label right now")

    session = LabelingSession.objects.get()
    assert session.finish_reason == "found_error"
    rows = StepRating.objects.order_by("step__index", "completion_index")
    assert list(rows.values_list("step__index", "completion_index", "rating", "flagged")) == [
        (0, 0, 1, False),
        (1, 0, -1, False),
        (1, 1, 1, True),
        (1, 2, 0, False),
    ]


def test_changing_the_wrong_step_back_discards_its_alternatives(page, live_server):
    solution = add_solution(["Step one.", "Step two.", "# Answer\n\n4"])
    solution.alternatives = {"0": ["Another step one."]}
    solution.save()
    page.goto(f"{live_server.url}/label/")
    page.wait_for_selector("#steps li[data-active]")
    page.keyboard.press("-")
    wait_rated(page, 1)
    page.keyboard.press("3")  # the alternative
    wait_rated(page, 2)
    page.keyboard.press("k")  # back from the alternative to the step itself
    assert page.locator("#steps li[data-active]").get_attribute("data-item") == "s0"
    page.keyboard.press("3")
    page.wait_for_selector("#steps li[data-step='1'][data-active]")
    assert page.locator(".alternatives").count() == 0
    assert not StepRating.objects.filter(completion_index__gt=0).exists()


def test_enter_swaps_in_the_next_problem_without_a_page_load(page, live_server):
    add_solution(["Only step.", "# Answer\n\n4"])
    add_solution(["Next step.", "# Answer\n\n9"], answer="9", problem_text="What is $3^2$?")
    page.goto(f"{live_server.url}/label/")
    page.wait_for_selector("#steps li[data-active]")
    first = page.locator(".problem-text").inner_text()
    page.evaluate("() => { window.samePage = true; }")
    page.keyboard.press("3")
    wait_rated(page, 1)
    page.keyboard.press("3")
    wait_rated(page, 2)
    page.keyboard.press("Enter")
    page.wait_for_selector("#steps li[data-step='0'][data-active] >> text=step.")
    assert page.locator(".problem-text").inner_text() != first
    assert page.evaluate("() => window.samePage") is True  # swapped in, not reloaded
    upcoming = LabelingSession.objects.get(submitted_at__isnull=True)
    assert page.url.endswith(f"/label/{upcoming.pk}/")
    # The swapped-in session is labeled by keyboard like the first one.
    page.keyboard.press("3")
    wait_rated(page, 1)
    page.keyboard.press("3")
    wait_rated(page, 2)
    page.keyboard.press("Enter")
    page.wait_for_selector("text=Nothing to label right now")
    assert LabelingSession.objects.filter(finish_reason="solution").count() == 2


def test_question_mark_shows_the_key_map_with_a_link_to_the_guidelines(page, live_server):
    expect = pytest.importorskip("playwright.sync_api").expect
    add_solution(["Step one.", "# Answer\n\n4"])
    page.goto(f"{live_server.url}/label/")
    page.wait_for_selector("#steps li[data-active]")
    keymap = page.get_by_role("dialog", name="Keyboard shortcuts")
    expect(keymap).to_be_hidden()
    page.keyboard.press("?")
    expect(keymap).to_be_visible()
    link = keymap.get_by_role("link", name="labeling guidelines")
    assert link.get_attribute("href") == "/guidelines/"
    page.keyboard.press("?")
    expect(keymap).to_be_hidden()
    # The key map only shows: nothing was rated.
    assert not StepRating.objects.exists()


# The ratings both labelers give below, by (step index, completion index): a -1 at step two,
# then its two alternatives.
RATINGS = {(0, 0): (1, False), (1, 0): (-1, False), (1, 1): (1, True), (1, 2): (0, False)}


def label_through_the_api(client) -> None:
    """Label the served session by REST alone, led by the state each response returns."""
    served = client.post("/api/sessions/next/")
    assert served.status_code == 200, served.content
    session = served.json()["session"]
    assert served.json()["alternatives"] == {"1": ["That is $4$.", "That is $\\frac{8}{2} = 4$."]}
    while (item := session["state"]["current"]) is not None:
        rating, flagged = RATINGS[(item["index"], item["completion"])]
        body = {"step": item["index"], "rating": rating, "flagged": flagged}
        if item["completion"]:
            body["completion_index"] = item["completion"]
        response = client.post(f"/api/sessions/{session['id']}/rate/", body, format="json")
        assert response.status_code == 200, response.content
        session = response.json()
    assert session["state"]["outcome"] == "found_error"
    done = client.post(
        f"/api/sessions/{session['id']}/submit/",
        {"finish_reason": session["state"]["outcome"]},
        format="json",
    )
    assert done.status_code == 200, done.content


def test_the_api_and_the_workbench_make_the_same_prm800k_line(page, live_server, make_user):
    """A -1 with alternatives labeled by REST alone exports the line the browser makes."""
    solution = add_solution(["Eight halves.", "That is 5.", "# Answer\n\n5"], answer="5")
    solution.alternatives = {"1": ["That is $4$.", "That is $\\frac{8}{2} = 4$."]}
    # Quality control, so that both labelers are served the same solution.
    solution.is_quality_control = True
    solution.save()

    page.goto(f"{live_server.url}/label/")
    page.wait_for_selector("#steps li[data-active]")
    # The same ratings as RATINGS, by keyboard: 3 is +1, 1 is -1, 2 is 0, u flags as unsure.
    for rated, keys in enumerate([["3"], ["1"], ["u", "3"], ["2"]], start=1):
        for key in keys:
            page.keyboard.press(key)
        wait_rated(page, rated)
    page.keyboard.press("Enter")
    page.wait_for_selector("text=Nothing to label right now")

    client = APIClient()
    client.force_authenticate(make_user("script"))
    label_through_the_api(client)

    out = io.StringIO()
    call_command("export_prm800k", "--out", "-", stdout=out, stderr=io.StringIO())
    browser_line, api_line = sorted(
        (json.loads(line) for line in out.getvalue().splitlines()),
        key=lambda line: LabelingSession.objects.get(labeler__uuid=line["labeler"]).pk,
    )
    assert browser_line["label"]["finish_reason"] == "found_error"
    ratings = [
        [(c["rating"], c["flagged"]) for c in step["completions"]]
        for step in browser_line["label"]["steps"]
    ]
    assert ratings == [[(1, False)], [(-1, False), (1, True), (0, False)]]
    for line in (browser_line, api_line):
        del line["labeler"], line["timestamp"], line["label"]["total_time"]
    assert api_line == browser_line


def test_a_stale_tab_says_so_in_the_page_and_offers_the_next_solution(page, live_server):
    expect = pytest.importorskip("playwright.sync_api").expect
    add_solution(["Step one.", "# Answer\n\n4"])
    page.goto(f"{live_server.url}/label/")
    page.wait_for_selector("#steps li[data-active]")
    # The lease ran out meanwhile and the session went back to the queue.
    LabelingSession.objects.update(abandoned_at=timezone.now())
    alerts = []
    page.on("dialog", lambda dialog: (alerts.append(dialog.message), dialog.dismiss()))
    with page.expect_response(lambda response: "/rate/" in response.url) as refused:
        page.keyboard.press("3")
    # The refusal's status, and its sentence shown in the page, not in a bare alert().
    assert refused.value.status == 409
    notice = page.get_by_role("alert").filter(has_text=LEASE_LAPSED)
    expect(notice).to_be_visible()
    way_on = notice.get_by_role("link", name="Go to the next solution")
    expect(way_on).to_be_focused()
    assert alerts == []
    assert not StepRating.objects.exists()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "workbench-stale-tab.png"))
    # Keys no longer rate the dead session; the link leads on.
    page.keyboard.press("2")
    way_on.click()
    expect(page.locator("#workbench")).to_be_visible()
    assert not StepRating.objects.exists()
