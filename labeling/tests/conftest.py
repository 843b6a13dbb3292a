"""Fixtures of the labeling tests; the suite-wide factories are in the root conftest."""

import pytest


@pytest.fixture
def annotator(make_user):
    return make_user("ann")


@pytest.fixture
def page(browser, live_server, annotator):
    """A browser page logged in as the annotator `ann`, sent on to /label/."""
    page = browser.new_page()
    page.goto(f"{live_server.url}/accounts/login/?next=/label/")
    page.get_by_label("Username").fill("ann")
    page.get_by_label("Password").fill("ann-pass-123")
    page.get_by_role("button", name="Log in").click()
    return page


@pytest.fixture
def eager_tasks(monkeypatch):
    """Tasks run where they are queued. On the Celery app's own config: the app read the
    settings once, so changing settings.CELERY_TASK_ALWAYS_EAGER in a test would not reach it."""
    from annotate.celery import app

    monkeypatch.setattr(app.conf, "task_always_eager", True)
