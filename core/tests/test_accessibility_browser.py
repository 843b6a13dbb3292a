"""Issue 43: every page of every role (annotator, researcher, admin), at 1400 and 390 px, light
and dark, checked by an accessibility engine (axe-core, from npm: package.json) with no serious
or critical violation, colour contrast and 24 px touch targets included.

The pages come from the URL tree (`get_resolver()`), their path arguments filled from the
objects the fixture makes: a page added later is checked without anyone listing it, and one
whose argument cannot be filled fails here by name until it gets a filler or an entry, with a
reason, in SKIPPED.
"""

from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from annotate.tests import test_every_page_browser as every_page
from annotate.tests.test_every_page_browser import all_routes, install  # noqa: F401 (a fixture)
from generators.models import LocalModel
from labeling.models import LabelingSession, Solution, StepLabel, StepRating
from trainer.evaluation.models import Evaluation
from trainer.models import JudgeRun, JudgeRunItem, SamplingRun, TrainingRun

ARTIFACTS = Path(__file__).resolve().parents[2] / "var" / "test-artifacts" / "a11y"
AXE = Path(__file__).resolve().parents[2] / "node_modules" / "axe-core" / "axe.min.js"
ROLES = ("annotator", "researcher", "admin")
WIDTHS = (1400, 390)
THEMES = ("light", "dark")

# Routes not opened, by the start of their path, each with its reason.
SKIPPED = {
    "api/": "the API answers programs; DRF's browsable pages are its own Bootstrap templates, "
    "and /api/docs/ is Swagger UI's markup (buttons nested in buttons, 19 px path links), not "
    "ours: test_api_docs_and_admin_keep_the_csp checks its theme, language and CSP",
    "admin/": "Django's admin, one template per kind of page: its index, a list and a change "
    "form are checked (EXTRA), the other models' pages are the same templates",
    "accounts/logout/": "a POST that ends the session the other pages need",
    "label/preview/": "the workbench's math preview: a fragment it posts to",
}
# Pages outside the routes walked, by role.
EXTRA = {
    "annotator": lambda ids: [reverse("label-session", args=[ids["open_session_id"]])],
    "admin": lambda ids: [
        reverse("admin:index"),
        reverse("admin:labeling_problem_changelist"),
        reverse("admin:labeling_problem_change", args=[ids["problem_id"]]),
    ],
}

# The serious and critical violations of every rule axe runs, with the 24 px touch targets
# of WCAG 2.2 (off by default in axe): a short list of where each is, to fix from.
RUN_AXE = """async () => {
    const result = await axe.run(document, {
        rules: {'target-size': {enabled: true}}, resultTypes: ['violations'],
    });
    return result.violations
        .filter(v => v.impact === 'serious' || v.impact === 'critical')
        .map(v => `${v.id} (${v.impact}): ` + v.nodes.slice(0, 3)
            .map(n => n.target.join(' ') + ' ' + (n.any[0] || n.all[0] || {message: ''}).message)
            .join(' | '));
}"""


def routes():
    return all_routes()


def skipped(route: str) -> bool:
    return route.startswith(tuple(SKIPPED))


@pytest.fixture
def pages(install):  # noqa: F811 (the fixture imported above)
    """The every-page fixture's objects, and the states issue 43 found unreadable in dark mode:
    a cancelled and a failed run, an unreadable judge reply, a step where the PRM and a human
    disagree, a recorded model, an unsure rating."""
    users, sessions, ids, runs = install
    now = timezone.now()
    TrainingRun.objects.create(status="cancelled", params={}, metrics=[])
    TrainingRun.objects.create(status="failed", params={}, metrics=[], error="Out of memory.")
    SamplingRun.objects.create(
        purpose="solutions", generator={"model": "m"}, sampling={}, samples=1, status="cancelled"
    )
    solution = Solution.objects.get(pk=ids["solution_id"])
    solution.prm_step_scores = [0.95, 0.9, 0.9]
    solution.prm_model_version_id = ids["model_version_id"]
    solution.save(update_fields=["prm_step_scores", "prm_model_version"])
    step = StepLabel.objects.create(session=sessions["admin"], index=0)
    StepRating.objects.create(step=step, text=solution.steps[0], rating=-1, flagged=True)
    judge = JudgeRun.objects.get(pk=runs["judge"])
    JudgeRunItem.objects.create(
        run=judge,
        position=1,
        solution=sessions["researcher"].solution,
        done_at=now,
        unreadable=True,
        reply="Hmm.",
    )
    LocalModel.objects.create(name="smollm2-135m", kind=LocalModel.Kind.CHECKPOINT, path="smol")
    # The annotator's workbench, with a step rated and the next one to rate.
    open_solution = Solution.objects.create(
        problem=solution.problem,
        steps=[f"Not labeled yet: {solution.steps[0]}", *solution.steps[1:]],
        answer=solution.answer,
        is_correct=False,
        content_hash="a11y-open",
    )
    open_session = LabelingSession.objects.create(
        labeler=sessions["annotator"].labeler,
        solution=open_solution,
        started_at=now,
        lease_expires_at=now + timedelta(hours=1),
    )
    rated = StepLabel.objects.create(session=open_session, index=0)
    StepRating.objects.create(step=rated, text=open_solution.steps[0], rating=1)
    ids["open_session_id"] = open_session.pk
    ids["evaluation_set_id"] = Evaluation.objects.get(pk=ids["evaluation_id"]).evaluation_set_id
    return users, sessions, ids, runs


def url_of(route: str, name: str, converters: list[str], *, role: str, data) -> str:
    try:
        return every_page.url_of(route, name, converters, role=role, install=data)
    except AssertionError as exc:
        raise AssertionError(
            f"{exc}: make one in the fixture, or say in SKIPPED why the page is not checked"
        ) from None


def signed_in(browser, live_server, user):
    """A browser context with `user`'s session; the CSP is bypassed for axe's injected script
    alone (test_api_docs_and_admin_keep_the_csp checks the pages keep it)."""
    client = Client()
    client.force_login(user)
    context = browser.new_context(bypass_csp=True)
    context.add_cookies(
        [
            {
                "name": settings.SESSION_COOKIE_NAME,
                "value": client.cookies[settings.SESSION_COOKIE_NAME].value,
                "url": live_server.url,
            }
        ]
    )
    return context


@pytest.mark.django_db(transaction=True)
def test_every_page_has_no_serious_accessibility_violation(browser, live_server, pages):
    assert AXE.exists(), "axe-core is missing: run `make setup` (npm ci)"
    axe_source = AXE.read_text()
    for start in SKIPPED:
        assert any(route.startswith(start) for route, _, _ in routes()), (
            f"SKIPPED names {start!r}, which starts no route any more"
        )
    users, _, ids, _ = pages
    problems, seen = {}, {}
    for role in ROLES:
        context = signed_in(browser, live_server, users[role])
        page = context.new_page()
        paths = [
            url_of(route, name, converters, role=role, data=pages)
            for route, name, converters in routes()
            if not skipped(route)
        ]
        paths += EXTRA.get(role, lambda ids: [])(ids)
        seen[role] = []
        for path in dict.fromkeys(paths):
            # Asked first without a browser: only a whole page this role may read is opened
            # (not a 403, a POST-only action's 405, a redirect, or a fragment a page polls).
            answer = context.request.get(live_server.url + path, max_redirects=0)
            if answer.status >= 500:
                problems[f"{role} {path}"] = [f"answered {answer.status}"]
                continue
            html = answer.headers.get("content-type", "").startswith("text/html")
            if answer.status != 200 or not html or "<html" not in answer.text()[:500].lower():
                continue
            page.set_viewport_size({"width": WIDTHS[0], "height": 900})
            page.goto(live_server.url + path)
            page.wait_for_function(
                "!document.querySelector('.math[data-display]:not([data-rendered])')"
            )
            page.add_script_tag(content=axe_source)
            for width in WIDTHS:
                page.set_viewport_size({"width": width, "height": 900})
                for theme in THEMES:
                    page.emulate_media(color_scheme=theme)
                    if found := page.evaluate(RUN_AXE):
                        problems[f"{role} {path} at {width} px, {theme}"] = found
            seen[role].append(path)
        context.close()
    assert problems == {}, "\n".join(f"{where}: {found}" for where, found in problems.items())
    # Each role has pages of its own: a session that silently failed would check none.
    for role, least in {"annotator": 4, "researcher": 12, "admin": 16}.items():
        assert len(seen[role]) >= least, (role, seen[role])


@pytest.mark.django_db(transaction=True)
def test_api_docs_and_admin_keep_the_csp(browser, live_server, pages):  # noqa: F811
    """Issue 43, point 12: /api/docs/ broke the CSP with an inline style and stayed light in
    dark mode, and the admin asked for a /favicon.ico that is not served. With the CSP in force
    (no bypass here), in dark mode."""
    users = pages[0]
    client = Client()
    client.force_login(users["admin"])
    context = browser.new_context(color_scheme="dark")
    context.add_cookies(
        [
            {
                "name": settings.SESSION_COOKIE_NAME,
                "value": client.cookies[settings.SESSION_COOKIE_NAME].value,
                "url": live_server.url,
            }
        ]
    )
    page = context.new_page()
    refused, asked = [], []
    page.on("console", lambda m: "Content Security Policy" in m.text and refused.append(m.text))
    page.on("request", lambda r: asked.append(r.url))
    page.goto(live_server.url + reverse("api-docs"))
    page.locator(".swagger-ui .info").wait_for()
    assert page.evaluate("document.documentElement.lang") == "en"
    # Dark: the page is drawn inverted, so its white is dark on the screen.
    assert "invert" in page.evaluate("getComputedStyle(document.body).filter")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=ARTIFACTS / "api-docs-dark.png")
    page.goto(live_server.url + reverse("admin:index"))
    page.goto(live_server.url + reverse("admin:labeling_problem_changelist"))
    assert page.locator("head link[rel=icon]").count() == 1
    assert refused == []
    assert [url for url in asked if url.endswith("/favicon.ico")] == []
    context.close()
