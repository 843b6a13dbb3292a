"""Issue 43, point 2: a bad base model on /runs/ reloaded the page at its top with a plain
bullet about 2,000 px down, naming a server path; success messages were unstyled text. Now the
errors are in a box at the top of the form, announced and focused (so in view), each beside its
field too, without the server's paths; a message is a box of its own, announced."""

import pytest
from django.conf import settings
from django.urls import reverse

from core.tests.test_accessibility_browser import install, pages, signed_in  # noqa: F401
from trainer.models import TrainingRun


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("width", [1400, 390])
def test_a_refused_base_model_is_shown_in_view_beside_its_field(
    browser,
    live_server,
    pages,  # noqa: F811
    width,
):
    users = pages[0]
    # Enough runs that the form is far below the table, as on a team's page.
    TrainingRun.objects.bulk_create(
        TrainingRun(status="succeeded", params={}, metrics=[]) for _ in range(40)
    )
    context = signed_in(browser, live_server, users["researcher"])
    page = context.new_page()
    page.set_viewport_size({"width": width, "height": 844})
    page.goto(live_server.url + reverse("training-run-list"))
    page.get_by_label("Base model").fill("/somewhere/else/model")
    page.get_by_role("button", name="Start training run").click()
    page.wait_for_load_state()

    alert = page.get_by_role("alert")
    assert alert.count() == 1
    text = alert.inner_text()
    assert "Base model" in text and "checkpoint" in text, text
    # In view without scrolling, and focused: a screen reader and a keyboard start there.
    box = alert.bounding_box()
    assert box["y"] >= 0 and box["y"] + 40 <= 844, box
    assert page.evaluate("document.activeElement.getAttribute('role')") == "alert"
    # Beside its field too: the field's own error right under the field.
    field = page.get_by_label("Base model").bounding_box()
    error = page.locator(".field-error").first.bounding_box()
    assert 0 <= error["y"] - field["y"] <= 80, (field, error)
    # No path of the server's, in the box or anywhere on the page.
    assert str(settings.PRM_MODEL_DIR) not in page.content()
    assert TrainingRun.objects.count() == 43
    context.close()


@pytest.mark.django_db(transaction=True)
def test_a_success_message_is_a_box_that_is_announced(browser, live_server, pages):  # noqa: F811
    users = pages[0]
    context = signed_in(browser, live_server, users["admin"])
    page = context.new_page()
    page.goto(live_server.url + reverse("problem-reports"))
    page.get_by_role("button", name="Dismiss").first.click()
    status = page.get_by_role("status").filter(has_text="dismissed")
    assert status.count() == 1
    style = status.evaluate(
        "e => { const s = getComputedStyle(e); return [s.borderLeftWidth, s.borderLeftColor,"
        " s.paddingLeft] }"
    )
    assert float(style[0].removesuffix("px")) >= 4 and float(style[2].removesuffix("px")) >= 8
    context.close()
