"""Inspection pages: one solution's steps beside the PRM's scores, and the disagreement list."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from django.utils import timezone

from conftest import create_user
from labeling.models import LabelingSession, Problem, Solution, StepLabel, StepRating
from labeling.services.labelers import get_or_create_labeler
from trainer import inspection, views
from trainer.models import ModelVersion, TrainingRun
from trainer.training import selectors

pytestmark = pytest.mark.django_db


def rate(solution: Solution, username: str, ratings: list[int], *, submitted=True, flagged=()):
    """A labeling session by `username` rating the solution's own steps in order."""
    user = User.objects.filter(username=username).first() or create_user(username, "annotator")
    labeler = get_or_create_labeler(user=user)
    now = timezone.now()
    session = LabelingSession.objects.create(
        labeler=labeler,
        solution=solution,
        is_quality_control=True,  # lets several labelers hold the same solution
        started_at=now - timedelta(minutes=2),
        submitted_at=now if submitted else None,
        total_time=60_000 if submitted else None,
        finish_reason=("found_error" if -1 in ratings else "solution") if submitted else "",
    )
    for index, rating in enumerate(ratings):
        step = StepLabel.objects.create(session=session, index=index)
        StepRating.objects.create(
            step=step,
            completion_index=0,
            text=solution.steps[index],
            rating=rating,
            flagged=index in flagged,
        )
    return session


def scored(problem, version, name: str, scores: list[float], *, correct: bool) -> Solution:
    steps = [f"Step {i} of {name}: $x_{i} = {i}$" for i in range(len(scores) - 1)]
    steps.append("# Answer\n\n1" if correct else "# Answer\n\n2")
    product = 1.0
    for score in scores:
        product *= score
    return Solution.objects.create(
        problem=problem,
        steps=steps,
        answer="1" if correct else "2",
        is_correct=correct,
        source=name,
        prm_step_scores=scores,
        prm_score=product,
        prm_model_version=version,
    )


@pytest.fixture
def crafted():
    """Solutions whose disagreement with humans is known exactly.

    confident_miss: humans rate step 1 -1, the PRM gives it 0.95 (worst 0.95).
    long_miss:      every step +1, PRM 0.4, 0.4, 0.7 (worst 0.6, sum 1.5).
    mild:           +1 then 0, PRM 0.7, 0.4; neutral counts as ok (worst 0.6, sum 0.9).
    agree:          +1, +1 with PRM 0.9, 0.85 (worst 0.15); an unsubmitted -1 is ignored.
    Left out: a solution scored by an older version, and one nobody rated.
    """
    active = ModelVersion.objects.create(name="v-active", checkpoint="/a", is_active=True)
    old = ModelVersion.objects.create(name="v-old", checkpoint="/o")
    problem = Problem.objects.create(
        text="What is $\\frac{1}{2} + \\frac{1}{2}$?", answer="1", unique_id="test/half.json"
    )
    s = {
        "confident_miss": scored(problem, active, "confident_miss", [0.95, 0.9], correct=False),
        "long_miss": scored(problem, active, "long_miss", [0.4, 0.4, 0.7], correct=True),
        "mild": scored(problem, active, "mild", [0.7, 0.4], correct=True),
        "agree": scored(problem, active, "agree", [0.9, 0.85], correct=True),
        "old": scored(problem, old, "old", [0.99, 0.99], correct=False),
        "unrated": scored(problem, active, "unrated", [0.05, 0.05], correct=False),
    }
    rate(s["confident_miss"], "ann1", [-1])
    rate(s["confident_miss"], "ann2", [1, 1], flagged=(0,))
    rate(s["long_miss"], "ann1", [1, 1, 1])
    rate(s["mild"], "ann1", [1, 0])
    rate(s["agree"], "ann1", [1, 1])
    rate(s["agree"], "ann3", [-1], submitted=False)  # still open: not a label yet
    rate(s["old"], "ann1", [-1])
    return s


def step_rows(html: str) -> list[str]:
    return html.split('<tr class="step-row')[1:]


def test_the_inspection_page_shows_each_step_with_human_ratings_and_prm_scores(
    client, researcher, crafted
):
    solution = crafted["confident_miss"]
    response = client.get(reverse("solution-inspect", args=[solution.pk]))
    assert response.status_code == 200
    html = response.content.decode()
    first, second = step_rows(html)
    # Step 1: both labelers' ratings (one unsure) beside the PRM's 0.95, marked as a disagreement.
    assert ' disagree"' in first and 'data-step="0"' in first
    assert '<span class="score score-high">0.950</span>' in first
    assert '<span class="badge bad"' in first and ">-1</span>" in first
    assert '<span class="badge good"' in first and ">+1</span>" in first
    assert "unsure" in first
    # Step 2 (the answer): rated +1 by the one labeler who got there, and PRM 0.9 agrees.
    assert "disagree" not in second.split(">", 1)[0]
    assert '<span class="score score-high">0.900</span>' in second
    assert second.count('class="badge good"') == 1 and "badge bad" not in second
    # The solution: its score, the version that wrote it, and the wrong final answer.
    assert '<span class="score score-high">0.855</span>' in html
    assert "v-active (active)" in html
    assert '<span class="verdict wrong">wrong</span>' in html
    assert "Submitted sessions</dt><dd>2</dd>" in html
    assert "0.950" in html.split("Largest disagreement")[1].split("</dd>")[0]


def test_score_buckets_colour_low_middle_and_missing_scores(client, researcher, crafted):
    html = client.get(reverse("solution-inspect", args=[crafted["long_miss"].pk])).content.decode()
    rows = step_rows(html)
    assert '<span class="score score-mid">0.400</span>' in rows[0]
    assert '<span class="score score-fair">0.700</span>' in rows[2]
    assert '<span class="score score-bad">0.112</span>' in html  # 0.4 * 0.4 * 0.7
    assert '<span class="verdict correct">correct</span>' in html
    unrated = crafted["unrated"]
    html = client.get(reverse("solution-inspect", args=[unrated.pk])).content.decode()
    assert all("not rated" in row and "score-bad" in row for row in step_rows(html))
    assert "nothing to compare" in html
    # Scores from a version that is no longer active are shown, and said to be stale.
    html = client.get(reverse("solution-inspect", args=[crafted["old"].pk])).content.decode()
    assert "not the active version (v-active); rescoring is pending" in html
    unscored = Solution.objects.create(
        problem=unrated.problem, steps=["Maybe 3.", "# Answer\n\n3"], answer="3", is_correct=False
    )
    html = client.get(reverse("solution-inspect", args=[unscored.pk])).content.decode()
    assert "not scored yet" in html and html.count('<span class="score score-none">') == 2


def test_the_inspection_page_renders_math_as_the_workbench_does(client, researcher, crafted):
    html = client.get(
        reverse("solution-inspect", args=[crafted["confident_miss"].pk])
    ).content.decode()
    problem_text = html.split('class="problem-text">')[1].split("</div>")[0]
    assert 'class="math"' in problem_text and "\\frac" in problem_text and "$" not in problem_text
    truth = html.split("Ground-truth answer:</strong>")[1].split("</p>")[0]
    assert '<span class="math" data-display="0">1</span>' in truth
    first, second = step_rows(html)
    assert 'class="math"' in first and "x_0" in first and "$x_0" not in first
    assert "<strong>Answer:</strong>" in second and 'data-display="0">2</span>' in second


def test_disagreements_put_a_confident_miss_first(crafted):
    rows = list(inspection.disagreements(model_version=selectors.active_model_version()))
    order = [row["solution"] for row in rows]
    assert order == [crafted[k].pk for k in ("confident_miss", "long_miss", "mild", "agree")]
    worst = {row["solution"]: row for row in rows}
    miss = worst[crafted["confident_miss"].pk]
    # -1 vs 0.95, +1 vs 0.95, +1 vs 0.9: three ratings of two steps.
    assert miss["worst"] == pytest.approx(0.95) and miss["rated"] == 3
    assert miss["total"] == pytest.approx(0.95 + 0.05 + 0.1)
    assert worst[crafted["agree"].pk]["rated"] == 2  # the open session's -1 is not counted
    # The page shows the same number as the list.
    inspected = inspection.solution_inspection(solution_id=crafted["confident_miss"].pk)
    assert inspected.worst == pytest.approx(miss["worst"])


def test_a_version_trained_with_neutral_as_bad_reads_a_0_rating_as_not_ok(crafted):
    active = selectors.active_model_version()
    active.training_run = TrainingRun.objects.create(params={"neutral_as_positive": False})
    active.save()
    rows = {r["solution"]: r for r in inspection.disagreements(model_version=active)}
    # mild: +1 vs 0.7 (0.3) and 0 vs 0.4, now 0.4 instead of 0.6.
    assert rows[crafted["mild"].pk]["worst"] == pytest.approx(0.4)
    assert inspection.step_disagreement(prm_score=0.4, rating=0, neutral_as_positive=False) == 0.4
    assert inspection.step_disagreement(prm_score=0.4, rating=0, neutral_as_positive=True) == 0.6


def test_the_disagreement_page_lists_solutions_worst_first_with_links(client, researcher, crafted):
    response = client.get(reverse("disagreement-list"))
    assert response.status_code == 200
    html = response.content.decode()
    links = [reverse("solution-inspect", args=[crafted[k].pk]) for k in ("confident_miss", "mild")]
    assert html.index(links[0]) < html.index(links[1])
    assert reverse("solution-inspect", args=[crafted["old"].pk]) not in html
    assert reverse("solution-inspect", args=[crafted["unrated"].pk]) not in html
    assert '<td class="worst">0.950</td>' in html and "v-active" in html
    # Linked from the researcher nav and the model versions page.
    assert reverse("disagreement-list") in client.get(reverse("home")).content.decode()
    assert (
        reverse("disagreement-list") in client.get(reverse("model-version-list")).content.decode()
    )


def test_the_disagreement_page_is_paginated(client, researcher, crafted, monkeypatch):
    monkeypatch.setattr(views, "DISAGREEMENTS_PER_PAGE", 3)
    first = client.get(reverse("disagreement-list")).content.decode()
    second = client.get(reverse("disagreement-list"), {"page": 2}).content.decode()
    agree = reverse("solution-inspect", args=[crafted["agree"].pk])
    assert agree not in first and "Page 1 of 2" in first and "?page=2" in first
    assert agree in second and "Page 2 of 2" in second
    assert reverse("solution-inspect", args=[crafted["confident_miss"].pk]) not in second


def test_without_an_active_version_the_disagreement_page_says_so(client, researcher):
    html = client.get(reverse("disagreement-list")).content.decode()
    assert "No model version is active yet" in html


def test_an_unknown_solution_is_a_404(client, researcher):
    assert client.get(reverse("solution-inspect", args=[999_999])).status_code == 404


@pytest.mark.parametrize("name", ["solution-inspect", "disagreement-list"])
def test_annotators_get_403_and_anonymous_users_go_to_login(client, make_user, crafted, name):
    args = [crafted["confident_miss"].pk] if name == "solution-inspect" else []
    url = reverse(name, args=args)
    response = client.get(url)
    assert response.status_code == 302 and "login" in response["Location"]
    client.force_login(make_user("ann", "annotator"))
    assert client.get(url).status_code == 403
    assert reverse("disagreement-list") not in client.get(reverse("home")).content.decode()
