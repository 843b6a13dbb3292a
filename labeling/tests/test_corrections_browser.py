"""A labeler corrects a submitted label from "My labels" in the browser (issue 30, point 5),
and is told why once it is used."""

import pytest
from django.utils import timezone

from labeling.models import LabelingSession, Problem, StepRating


@pytest.fixture
def solution(make_solution):
    problem = Problem.objects.create(text="What is $40\\%$ of $65$?", answer="26")
    return make_solution(
        problem,
        steps=["$40\\%$ is $\\frac{2}{5}$.", "$\\frac{2}{5} \\cdot 65 = 24$.", "# Answer\n\n24"],
    )


def ratings() -> dict[int, int]:
    return dict(StepRating.objects.filter(completion_index=0).values_list("step__index", "rating"))


def test_a_label_is_corrected_from_my_labels_and_refused_once_used(page, live_server, solution):
    expect = pytest.importorskip("playwright.sync_api").expect
    page.goto(f"{live_server.url}/label/")
    page.wait_for_selector("#steps li[data-active]")
    for _ in range(3):
        page.keyboard.press("3")
    expect(page.locator("#submit-session")).to_be_visible()
    page.keyboard.press("Enter")
    expect(page.locator("body")).to_contain_text("Submitted")
    session = LabelingSession.objects.get(submitted_at__isnull=False)
    assert ratings() == {0: 1, 1: 1, 2: 1}

    # From the list, reopen it in the workbench; step 2 was wrong after all.
    page.goto(f"{live_server.url}/labels/mine/")
    page.get_by_role("button", name="Correct").click()
    expect(page.locator("#correcting")).to_contain_text("Correcting your label")
    page.locator("#steps li[data-item='s1'] button[data-rating='-1']").click()
    expect(page.locator("#submit-session")).to_have_text("Save correction (Enter)")
    page.locator("#submit-session").click()
    expect(page.locator("body")).to_contain_text("corrected label replaces")
    assert page.url.endswith(f"/labels/mine/{session.pk}/")
    expect(page.locator(".rated-steps .badge.bad")).to_have_count(1)
    session.refresh_from_db()
    assert ratings() == {0: 1, 1: -1}
    assert session.finish_reason == "found_error" and session.edited_at is not None

    # A model is trained on it while its page is open: the server refuses, and says why.
    page.goto(f"{live_server.url}/labels/mine/")
    LabelingSession.objects.filter(pk=session.pk).update(used_at=timezone.now())
    page.get_by_role("button", name="Correct").click()
    expect(page.locator("body")).to_contain_text("Not reopened: A model was trained on this label")
    page.goto(f"{live_server.url}/labels/mine/")
    expect(page.locator(".my-labels")).to_contain_text("A model was trained on this label")
    expect(page.get_by_role("button", name="Correct")).to_have_count(0)
    assert ratings() == {0: 1, 1: -1}
