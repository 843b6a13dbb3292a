"""Every page of every role, in a real browser, at 1400 and 390 px, light and dark (issue 30:
one layout system for every page): no page scrolls sideways, no button or link is narrower
than its own text, and no raw TeX (`\\frac`...) shows outside rendered math. A screenshot of
each goes to var/test-artifacts/pages/.

The pages are found from the URL configuration, not listed by hand: a page added later is
checked too, and one whose URL takes an argument this test cannot fill fails here by name.
"""

import re
from pathlib import Path

import pytest
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.utils import timezone

from labeling.models import Generation, LabelingSession, Problem, ProblemReport, Solution
from trainer.evaluation import figures
from trainer.evaluation.models import Evaluation, EvaluationSet
from trainer.models import (
    JudgeLabel,
    JudgeRun,
    JudgeRunItem,
    ModelVersion,
    SamplingRun,
    TrainingRun,
)

ARTIFACTS = Path(__file__).resolve().parents[2] / "var" / "test-artifacts" / "pages"
ROLES = ("annotator", "researcher", "admin")
# Not pages a person reads: the API, Django's admin, sign-out, and the parts a page polls
# or posts to (they answer a fragment or a redirect, and are checked inside their page).
SKIP_PREFIXES = ("api/", "admin/", "accounts/logout/", "label/preview/")
PROBLEM = r"Compute $\frac{2}{3} + \frac{1}{4}$, and give $\sqrt{x}$ for $x = \frac{121}{144}$."
STEPS = [
    r"Add the fractions: $\frac{2}{3} + \frac{1}{4} = \frac{8}{12} + \frac{3}{12}$.",
    r"So the sum is $\frac{11}{12}$, and $\sqrt{\frac{121}{144}} = \frac{11}{12}$.",
    "# Answer\n\n\\frac{11}{12}",
]
# What a reader would see as TeX outside rendered math (KaTeX's own output is left out, and
# so are text boxes and code, where TeX is what the person typed or the data is).
VISIBLE_TEXT = """() => {
    const copy = document.body.cloneNode(true);
    copy.querySelectorAll('.katex, script, style, textarea, input, pre, code, template')
        .forEach(e => e.remove());
    return copy.innerText;
}"""
# Buttons and links whose text does not fit them (crushed into a column, cut off).
CRUSHED = """() => [...document.querySelectorAll('main button, main a, nav a, nav button')]
    .filter(e => e.offsetParent !== null && e.scrollWidth > e.clientWidth + 1
                 && getComputedStyle(e).overflow !== 'hidden')
    .map(e => e.innerText.trim().slice(0, 40))"""
RAW_TEX = re.compile(r"\\[a-zA-Z]{2,}")


def all_routes() -> list[tuple[str, str, list[str]]]:
    """Every named route of the URL tree: (its pattern, its name, its path arguments)."""

    def walk(patterns, prefix=""):
        for p in patterns:
            if isinstance(p, URLResolver):
                yield from walk(p.url_patterns, prefix + str(p.pattern))
            elif isinstance(p, URLPattern) and p.name:
                yield prefix + str(p.pattern), p.name, list(p.pattern.converters)

    return list(walk(get_resolver().url_patterns))


def routes():
    return [r for r in all_routes() if not r[0].startswith(SKIP_PREFIXES)]


@pytest.fixture
def install(make_user, make_labeler):
    """A little of everything, with real MATH LaTeX, and one labeler per role."""
    problem = Problem.objects.create(text=PROBLEM, answer=r"\frac{11}{12}")
    generation = Generation.objects.create(number=1)
    now = timezone.now()
    users, sessions = {}, {}
    for role in ROLES:
        labeler = make_labeler(f"{role}-with-a-rather-long-name", role)
        users[role] = labeler.user
        done = Solution.objects.create(
            problem=problem,
            steps=[f"Labeled by the {role}: {STEPS[0]}", *STEPS[1:]],
            answer=r"\frac{11}{12}",
            is_correct=True,
            content_hash=f"pages-done-{role}",
            generation=generation,
        )
        sessions[role] = LabelingSession.objects.create(
            labeler=labeler,
            solution=done,
            generation=generation,
            started_at=now,
            submitted_at=now,
            total_time=60_000,
            # The annotator's label ends with a reason typed in TeX, as labelers write.
            finish_reason="give_up" if role == "annotator" else "solution",
            finish_reason_text=r"Stuck at $\sqrt{\frac{121}{144}}$." if role == "annotator" else "",
        )
    ProblemReport.objects.create(
        problem=problem,
        labeler=labeler,
        session=sessions["admin"],
        reason=r"Is $\frac{2}{3}$ right?",
        created_at=now,
    )
    run = TrainingRun.objects.create(
        status="succeeded",
        params={"epochs": 1},
        metrics=[{"epoch": 0, "step_auroc": 0.7, "loss": 0.5}],
        log_tail="epoch 0: " + "x" * 200,
    )
    version = ModelVersion.objects.create(
        name="run-1", checkpoint="/m/run-1", training_run=run, is_active=True
    )
    # The version's page with the figures of a finished evaluation, and one that failed.
    items = [figures.EvalItem(problem=f"p{i % 3}", steps=STEPS, label=i % 4 - 1) for i in range(12)]
    scores = [[0.9 - 0.1 * (i % 5), 0.7, 0.4 + 0.05 * i] for i in range(12)]
    evaluation = Evaluation.objects.create(
        model_version=version,
        evaluation_set=EvaluationSet.objects.create(name="ProcessBench MATH", kind="processbench"),
        status="succeeded",
        done=12,
        total=12,
        results=figures.evaluate(items, scores),
    )
    Evaluation.objects.create(
        model_version=version,
        evaluation_set=EvaluationSet.objects.create(name="Held-out problems", kind="held_out"),
        status="failed",
        error="The worker celery@gpu1 stopped during the run: evaluate it again.",
    )
    sampling = SamplingRun.objects.create(
        purpose="solutions", generator={"model": "m"}, sampling={}, samples=1
    )
    ids = {
        "problem_id": problem.pk,
        "solution_id": sessions["admin"].solution_id,
        "generation_id": generation.pk,
        "model_version_id": version.pk,
        "evaluation_id": evaluation.pk,
        "labeler_uuid": labeler.uuid,
    }
    judged = JudgeRun.objects.create(
        generator={"backend": "openai", "model": "judge", "base_url": "http://judge:8000/v1"},
        sampling={"temperature": 0.2, "max_tokens": 768},
        prompt_version="judge-v1",
        format="per_step",
        status="succeeded",
        stored=2,
    )
    JudgeRunItem.objects.create(run=judged, position=0, solution=sessions["admin"].solution)
    for index, rating in enumerate((1, -1)):
        JudgeLabel.objects.create(
            run=judged,
            solution=sessions["admin"].solution,
            index=index,
            rating=rating,
            reason=r"So $\frac{1}{4} + \frac{2}{3} = \frac{11}{12}$." if rating > 0 else "No.",
        )
    runs = {"run": run.pk, "sampling": sampling.pk, "judge": judged.pk}
    return users, sessions, ids, runs


def url_of(route: str, name: str, converters: list[str], *, role, install) -> str | None:
    _, sessions, ids, runs = install
    kwargs = {}
    for key in converters:
        if key == "session_id":
            kwargs[key] = sessions[role].pk
        elif key == "run_id":
            kind = name.split("-")[0]
            kwargs[key] = runs[kind if kind in ("sampling", "judge") else "run"]
        elif key in ids:
            kwargs[key] = ids[key]
        else:
            raise AssertionError(f"{route} ({name}): no test object for its argument {key!r}")
    return reverse(name, kwargs=kwargs)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("role", ROLES)
def test_every_page_at_both_widths_and_both_themes(browser, live_server, install, role):
    users = install[0]
    context = browser.new_context()
    page = context.new_page()
    page.goto(f"{live_server.url}/accounts/login/")
    page.get_by_label("Username").fill(users[role].username)
    page.get_by_label("Password").fill(f"{users[role].username}-pass-123")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{live_server.url}/**")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    problems, seen = {}, []
    for route, name, converters in routes():
        path = url_of(route, name, converters, role=role, install=install)
        # Asked first without a browser: only a page of this role's is opened (not a 403, a
        # POST-only action's 405, a redirect, or a fragment that a page polls).
        answer = context.request.get(live_server.url + path, max_redirects=0)
        if answer.status >= 500:
            problems[path] = [f"answered {answer.status}"]
            continue
        if answer.status != 200 or "<main" not in answer.text():
            continue
        for width in (1400, 390):
            page.set_viewport_size({"width": width, "height": 900})
            page.goto(live_server.url + path)
            # Math is drawn by math.js on load: wait until no math span is left undrawn.
            page.wait_for_function(
                "!document.querySelector('.math[data-display]:not([data-rendered])')"
            )
            for theme in ("light", "dark"):
                page.emulate_media(color_scheme=theme)
                found = []
                scroll = page.evaluate("document.documentElement.scrollWidth")
                if scroll > width:
                    found.append(f"{scroll} px wide")
                if crushed := page.evaluate(CRUSHED):
                    found.append(f"text wider than its control: {crushed[:3]}")
                if raw := RAW_TEX.findall(page.evaluate(VISIBLE_TEXT)):
                    found.append(f"raw TeX {sorted(set(raw))[:4]}")
                if found:
                    problems[f"{path} at {width} px, {theme}"] = found
                page.screenshot(path=ARTIFACTS / f"{role}-{name}-{width}-{theme}.png")
        seen.append(path)
    assert problems == {}, problems
    # Each role has pages of its own: a login that silently failed would check none.
    assert len(set(seen)) >= {"annotator": 4, "researcher": 10, "admin": 12}[role], seen
