"""Issue 30, point 8: the researcher pages scrolled sideways at 390 px (/quality/ 1,140 px,
/generations/ 989 px, /runs/<id>/ 599 px), and their navigation was 13 links in a row. A wide
table scrolls inside its own box instead, and the links come in groups."""

import pytest
from django.utils import timezone

from labeling.models import Generation, LabelingSession, Problem, Solution
from trainer.models import ModelVersion, TrainingRun

PAGES = [
    "/quality/",
    "/generations/",
    "/training-runs/{run}/",
    "/model-versions/",
    "/sampling/",
    "/judging/",
    "/reports/",
]


@pytest.fixture
def researcher_page(browser, live_server, make_user):
    make_user("rita", "researcher")
    page = browser.new_page(viewport={"width": 390, "height": 844})
    page.goto(f"{live_server.url}/accounts/login/")
    page.get_by_label("Username").fill("rita")
    page.get_by_label("Password").fill("rita-pass-123")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{live_server.url}/**")
    return page


@pytest.fixture
def busy_install(make_labeler):
    """Enough on every page to fill its tables: labelers, a generation, a finished run."""
    problem = Problem.objects.create(text="What is $2+2$?", answer="4")
    generation = Generation.objects.create(number=1)
    now = timezone.now()
    for n in range(3):
        solution = Solution.objects.create(
            problem=problem,
            steps=[f"Step {n}.", "# Answer\n\n4"],
            answer="4",
            is_correct=True,
            content_hash=f"layout-{n}",
            generation=generation,
        )
        LabelingSession.objects.create(
            labeler=make_labeler(f"labeler-with-a-long-name-{n}"),
            solution=solution,
            generation=generation,
            started_at=now,
            submitted_at=now,
            total_time=60_000,
            finish_reason="solution",
        )
    run = TrainingRun.objects.create(
        status="succeeded",
        params={"epochs": 3, "learning_rate": 0.0003, "batch_size": 8},
        metrics=[{"epoch": e, "step_auroc": 0.6 + e / 10, "loss": 1 / (e + 1)} for e in range(3)],
        log_tail="\n".join(f"epoch {e}: " + "x" * 140 for e in range(3)),
    )
    ModelVersion.objects.create(
        name="run-1", checkpoint="/m/run-1", training_run=run, is_active=True
    )
    return run


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("theme", ["light", "dark"])
def test_no_researcher_page_scrolls_sideways_at_390_px(
    researcher_page, live_server, busy_install, theme
):
    page = researcher_page
    page.emulate_media(color_scheme=theme)
    wide = {}
    for path in PAGES:
        page.goto(live_server.url + path.format(run=busy_install.pk))
        width = page.evaluate("document.documentElement.scrollWidth")
        if width > 390:
            wide[path] = width
    assert wide == {}, f"pages wider than the 390 px window: {wide}"
    # The navigation comes in groups (it was 13 links in a row over two lines).
    nav = page.get_by_role("navigation", name="Main")
    for group in ("Labeling", "Data", "Training", "Account"):
        assert nav.get_by_role("group", name=group).count() == 1, group
    assert nav.get_by_role("group", name="Training").get_by_role("link").count() == 7
