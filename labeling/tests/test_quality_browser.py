"""Quality control in a real browser: the landing page, the guidelines, deactivating a labeler."""

from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from labeling.models import Guideline, LabelingSession, Problem, Solution
from labeling.services.labelers import get_or_create_labeler
from labeling.tests.test_quality import label

ARTIFACTS = Path(__file__).resolve().parents[2] / "var" / "test-artifacts"


@pytest.fixture
def users(make_user):
    return {"ann": make_user("ann"), "ada": make_user("ada", role="admin")}


def log_in(browser, live_server, name):
    page = browser.new_page()
    page.goto(f"{live_server.url}/accounts/login/")
    page.get_by_label("Username").fill(name)
    page.get_by_label("Password").fill(f"{name}-pass-123")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{live_server.url}/")
    return page


def test_annotator_sees_progress_and_rendered_guidelines(browser, live_server, users):
    problem = Problem.objects.create(text="What is 2+2?", answer="4")
    gold = Solution.objects.create(
        problem=problem,
        steps=["Two and two.", "# Answer\n\n4"],
        answer="4",
        is_correct=True,
        is_quality_control=True,
        gold_ratings=[1, 1],
    )
    label(get_or_create_labeler(user=users["ann"]), gold, [1, 0])
    # Submitted yesterday: a labeler's agreement with gold counts labels before today.
    LabelingSession.objects.update(submitted_at=timezone.now() - timedelta(days=1))

    page = log_in(browser, live_server, "ann")
    assert page.locator('[data-figure="today-solutions"]').inner_text() == "0"
    assert page.locator('[data-figure="step-agreement"]').inner_text() == "50%"
    assert page.get_by_role("link", name="Start labeling").is_visible()
    assert page.get_by_role("link", name="Quality").count() == 0
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "home.png"), full_page=True)

    # Live-server tests empty the database between tests, migration data included.
    Guideline.objects.create(title="Rules", body="Half is $\\frac{1}{2}$; **-1** ends it.")
    page.get_by_role("link", name="Guidelines", exact=True).click()
    page.wait_for_url(f"{live_server.url}/guidelines/")
    # TeX is drawn by KaTeX with a visible size, not shown as raw text.
    fraction = page.locator(".guideline-body .katex .mfrac").first
    assert fraction.bounding_box()["height"] > 0
    assert "\\frac" not in page.locator(".guideline-body").inner_text()
    page.screenshot(path=str(ARTIFACTS / "guidelines.png"), full_page=True)


def test_admin_deactivates_and_reactivates_a_labeler(browser, live_server, users):
    ann = get_or_create_labeler(user=users["ann"])
    page = log_in(browser, live_server, "ada")
    page.get_by_role("link", name="Quality").first.click()
    status = page.locator(f'tr[data-labeler="{ann.uuid}"] .labeler-status')
    assert status.inner_text().strip() == "active"
    row = page.locator(f'tr[data-labeler="{ann.uuid}"]')

    row.get_by_role("button", name="Deactivate ann").click()
    page.wait_for_selector(".messages [role=status]")
    assert status.inner_text().strip() == "inactive"
    users["ann"].refresh_from_db()
    assert not users["ann"].is_active
    page.screenshot(path=str(ARTIFACTS / "quality.png"), full_page=True)

    page.locator(f'tr[data-labeler="{ann.uuid}"]').get_by_role(
        "button", name="Reactivate ann"
    ).click()
    page.wait_for_selector(".messages [role=status]:has-text('reactivated')")
    assert status.inner_text().strip() == "active"
    users["ann"].refresh_from_db()
    assert users["ann"].is_active
