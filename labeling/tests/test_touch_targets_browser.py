"""Issue 43, point 8, on a phone (390 px): touch targets under 24 px (the rating buttons 20 px,
the unsure checkbox 13 px), tables that scroll sideways with no cue, a navigation of six lines
and filters 800 px high before any data."""

from pathlib import Path

import pytest
from django.urls import reverse

from core.tests.test_accessibility_browser import install, pages, signed_in  # noqa: F401
from labeling.models import Solution

ARTIFACTS = Path(__file__).resolve().parents[2] / "var" / "test-artifacts" / "phone"
PHONE = {"width": 390, "height": 844}
# Every visible control of a kind, with its size.
SIZES = """selector => [...document.querySelectorAll(selector)]
    .filter(e => e.offsetParent !== null)
    .map(e => { const r = e.getBoundingClientRect();
                return [e.outerHTML.slice(0, 60), Math.round(r.width), Math.round(r.height)] })"""


@pytest.mark.django_db(transaction=True)
def test_rating_buttons_and_checkboxes_are_at_least_24_px(browser, live_server, pages):  # noqa: F811
    users, _, ids, _ = pages
    context = signed_in(browser, live_server, users["annotator"])
    page = context.new_page()
    page.set_viewport_size(PHONE)
    page.goto(live_server.url + reverse("label-session", args=[ids["open_session_id"]]))
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=ARTIFACTS / "workbench-390.png")
    buttons = page.evaluate(SIZES, ".rate button, .unsure input")
    assert len(buttons) >= 8, buttons
    assert [b for b in buttons if b[1] < 24 or b[2] < 24] == []
    context.close()
    # A form's checkboxes (the researcher's training form has several).
    context = signed_in(browser, live_server, users["researcher"])
    page = context.new_page()
    page.set_viewport_size(PHONE)
    page.goto(live_server.url + reverse("training-run-list"))
    boxes = page.evaluate(SIZES, "input[type=checkbox]")
    assert boxes and [b for b in boxes if b[1] < 24 or b[2] < 24] == [], boxes
    context.close()


@pytest.mark.django_db(transaction=True)
def test_on_a_phone_the_navigation_is_short_the_data_near_and_wide_tables_show_it(
    browser,
    live_server,
    pages,  # noqa: F811
):
    users, _, _, _ = pages
    problem = Solution.objects.first().problem
    for n in range(5):
        Solution.objects.create(
            problem=problem, steps=[f"A step {n}.", "# Answer\n\n1"], answer="1", is_correct=False
        )
    context = signed_in(browser, live_server, users["admin"])
    page = context.new_page()
    page.set_viewport_size(PHONE)
    page.goto(live_server.url + reverse("solution-list"))
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    # The header: the name and one row of links (it was six lines).
    header = page.locator("header.topbar").bounding_box()
    assert header["height"] <= 100, header
    nav = page.get_by_role("navigation", name="Main")
    assert nav.get_by_role("link", name="Solutions").is_visible()
    # The first row of data is in the first screen.
    first_row = page.locator("main table tbody tr").first.bounding_box()
    assert first_row["y"] < PHONE["height"], first_row
    # A table wider than the phone shows that it scrolls: a shadow at the edge with more.
    cue = page.evaluate(
        """() => [...document.querySelectorAll('main table, main .table-scroll, header nav')]
            .filter(e => e.scrollWidth > e.clientWidth + 1)
            .map(e => [e.tagName, getComputedStyle(e).backgroundImage.includes('gradient')])"""
    )
    assert cue and all(shows for _, shows in cue), cue
    page.screenshot(path=ARTIFACTS / "solutions-390.png")
    context.close()
