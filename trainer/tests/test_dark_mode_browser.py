"""Issue 43, point 1: in dark mode the researcher's pages were unreadable: status badges
(Succeeded, Cancelled) about 1:1 on the runs, sampling and judging pages, the active row on
/models/ 1.14:1, the verdict badges of /inspect/*, the unreadable-reply badge, the highlighted
disagreement row and the help text under 3:1. axe's contrast rule, in dark mode, on each.

Screenshots of each page in dark mode go to var/test-artifacts/dark/ (docs/screenshots/ keeps
a few of them: docs/labeling.md).
"""

from pathlib import Path

import pytest
from django.urls import reverse

from core.tests.test_accessibility_browser import AXE, install, pages, signed_in  # noqa: F401

ARTIFACTS = Path(__file__).resolve().parents[2] / "var" / "test-artifacts" / "dark"
CONTRAST = """async () => (await axe.run(document, {runOnly: ['color-contrast']})).violations
    .flatMap(v => v.nodes.map(n => n.target.join(' ') + ': ' + n.any[0].message.slice(0, 90)))"""


@pytest.mark.django_db(transaction=True)
def test_researcher_pages_are_readable_in_dark_mode(browser, live_server, pages):  # noqa: F811
    users, _, ids, runs = pages
    context = signed_in(browser, live_server, users["researcher"])
    page = context.new_page()
    page.set_viewport_size({"width": 1200, "height": 900})
    page.emulate_media(color_scheme="dark")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    found = {}
    for name, path in {
        "runs": reverse("training-run-list"),
        "run": reverse("training-run-detail", args=[runs["run"]]),
        "sampling": reverse("sampling-list"),
        "judging": reverse("judge-list"),
        "judge-run": reverse("judge-detail", args=[runs["judge"]]),
        "models": reverse("model-version-list"),
        "disagreements": reverse("disagreement-list"),
        "inspect": reverse("solution-inspect", args=[ids["solution_id"]]),
        "generations": reverse("generation-list"),
    }.items():
        page.goto(live_server.url + path)
        page.add_script_tag(path=str(AXE))
        if violations := page.evaluate(CONTRAST):
            found[path] = violations
        page.screenshot(path=ARTIFACTS / f"{name}-dark.png", full_page=True)
    context.close()
    # The states the issue named are on these pages (a page without them would prove nothing).
    assert found == {}, found
