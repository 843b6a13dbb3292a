"""Issue 30, point 15 in a real browser: a researcher filters the solutions, shares the URL,
and exports exactly what is shown, previewed first; at 390 px nothing scrolls sideways."""

from pathlib import Path

import pytest

from labeling.tests.data_fixtures import make_data
from labeling.tests.test_quality_browser import log_in

ARTIFACTS = Path(__file__).resolve().parents[2] / "var" / "test-artifacts"

pytestmark = pytest.mark.slow


def no_sideways_scroll(page) -> bool:
    return page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def test_filter_the_solutions_then_preview_and_download_their_labels(
    browser, live_server, make_user, tmp_path
):
    data = make_data(make_user)
    make_user("ada", role="admin")
    page = log_in(browser, live_server, "ada")
    page.set_viewport_size({"width": 390, "height": 844})

    page.get_by_role("navigation", name="Main").get_by_role("link", name="Solutions").click()
    page.wait_for_url("**/solutions/")
    assert page.locator("table.grid tbody tr").count() == 3
    page.get_by_label("Source model").fill("gpt-4")
    page.get_by_label("Graded").select_option("ungraded")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url("**/solutions/?*correct=ungraded*")
    rows = page.locator("table.grid tbody tr")
    assert rows.count() == 1
    assert rows.first.locator("a").first.inner_text() == str(data["ungraded"].pk)
    assert "\\sqrt" not in page.locator("main").inner_text()
    assert no_sideways_scroll(page)
    page.screenshot(path=str(ARTIFACTS / "solutions-filtered-390.png"), full_page=True)

    # The URL is the view: opened afresh, it shows the same rows.
    shared = page.url
    other = log_in(browser, live_server, "ada")
    other.goto(shared)
    assert other.locator("table.grid tbody tr").count() == 1
    assert other.get_by_label("Graded").input_value() == "ungraded"

    page.get_by_role("link", name="Export these").click()
    page.wait_for_url("**/labels/export/?*")
    assert page.get_by_label("Graded").input_value() == "ungraded"
    page.get_by_role("button", name="Preview").click()
    page.wait_for_selector('[data-testid="export-count"]')
    assert page.locator('[data-testid="export-count"]').inner_text() == "1"
    assert "\\sqrt" not in page.locator("main").inner_text()
    assert no_sideways_scroll(page)
    page.screenshot(path=str(ARTIFACTS / "export-preview-390.png"), full_page=True)

    with page.expect_download() as info:
        page.get_by_role("button", name="Download").click()
    saved = tmp_path / "export.jsonl"
    info.value.save_as(saved)
    lines = saved.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 1 and data["triangle"].text in lines[0].replace("\\\\", "\\")

    # The TRL export takes the same filters along.
    page.get_by_role("link", name="TRL export").click()
    page.wait_for_url("**/labels/export/trl/?*")
    assert page.get_by_label("Graded").input_value() == "ungraded"
    # Only the filters come along: the TRL page's own boxes start as they always do.
    assert "preview" not in page.url and page.get_by_label("Include quality-control").is_checked()
    page.get_by_role("button", name="Preview").click()
    page.wait_for_selector('[data-testid="export-count"]')
    assert no_sideways_scroll(page)
