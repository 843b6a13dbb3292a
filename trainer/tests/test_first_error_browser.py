"""The quality page's "First error" section on a phone: at 390 px, in light and dark, its table
fits the window with every figure in it, rather than scrolling inside its own box."""

import pytest

from trainer.tests.test_first_error_sources import case  # noqa: F401 (the fixture)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("theme", ["light", "dark"])
def test_first_error_section_fits_a_phone(browser, live_server, make_user, case, theme):  # noqa: F811
    make_user("rita", "researcher")
    page = browser.new_page(viewport={"width": 390, "height": 844})
    page.emulate_media(color_scheme=theme)
    page.goto(f"{live_server.url}/accounts/login/?next=/quality/")
    page.get_by_label("Username").fill("rita")
    page.get_by_label("Password").fill("rita-pass-123")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{live_server.url}/quality/")

    section = page.get_by_role("heading", name="First error")
    section.scroll_into_view_if_needed()
    table = page.locator("table.first-error")
    row = table.locator('tr[data-first-error="human-rollout"]')
    assert row.get_by_role("rowheader").inner_text() == "Human vs rollouts (hard)"
    assert row.locator('[data-figure="within-one"]').inner_text() == "75%"
    assert row.locator('[data-figure="alpha-ordinal"]').inner_text() == "0.557"
    sizes = table.evaluate("t => [t.scrollWidth, t.clientWidth, t.getBoundingClientRect().right]")
    scroll_width, client_width, right = sizes
    assert scroll_width <= client_width, f"the table scrolls inside its box: {sizes}"
    assert right <= 390, f"the table reaches past the window: {sizes}"
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
