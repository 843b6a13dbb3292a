"""Three solutions of two problems that differ in every data filter (labeling/filters.py)."""

from datetime import timedelta

from django.utils import timezone

from labeling.models import Generation, LabelingSession, Problem, Solution, StepLabel, StepRating
from labeling.services.labelers import get_or_create_labeler

APPLES = r"Apples cost $\frac{1}{2}$ each: what do $x^2$ apples cost when $x = 3$?"
TRIANGLE = r"A triangle has sides $3$, $4$ and $5$: what is its area, $\sqrt{s}$?"


def rate(solution: Solution, user, ratings: list[int], *, generation=None) -> LabelingSession:
    """A submitted label of the solution's own steps, rated in order."""
    now = timezone.now()
    session = LabelingSession.objects.create(
        labeler=get_or_create_labeler(user=user),
        solution=solution,
        generation=generation,
        started_at=now - timedelta(minutes=2),
        submitted_at=now,
        total_time=60_000,
        finish_reason="found_error" if -1 in ratings else "solution",
    )
    for index, rating in enumerate(ratings):
        step = StepLabel.objects.create(session=session, index=index)
        StepRating.objects.create(
            step=step, completion_index=0, text=solution.steps[index], rating=rating
        )
    return session


def make_data(make_user) -> dict:
    """Solutions `right` (apples, gen 1, gpt-4, correct, PRM 0.9, labeled), `wrong` (apples,
    gen 2, llama, wrong, PRM 0.2, not labeled) and `ungraded` (triangle, gen 2, gpt-4,
    ungraded, no PRM score, labeled)."""
    apples = Problem.objects.create(
        text=APPLES, answer="4.5", subject="Algebra", level=2, split="train"
    )
    triangle = Problem.objects.create(
        text=TRIANGLE, answer="6", subject="Geometry", level=5, split="test"
    )
    one, two = Generation.objects.create(number=1), Generation.objects.create(number=2)
    steps = ["We square $x$.", "That is $9$.", "# Answer\n\n4.5"]
    right = Solution.objects.create(
        problem=apples,
        steps=steps,
        answer="4.5",
        is_correct=True,
        source="gpt-4",
        generation=one,
        prm_score=0.9,
    )
    wrong = Solution.objects.create(
        problem=apples,
        steps=["We add.", "# Answer\n\n5"],
        answer="5",
        is_correct=False,
        source="llama",
        generation=two,
        prm_score=0.2,
    )
    ungraded = Solution.objects.create(
        problem=triangle,
        steps=["Heron.", "# Answer\n\n6"],
        answer="6",
        is_correct=None,
        source="gpt-4",
        generation=two,
    )
    labeler = make_user("ann")
    return {
        "apples": apples,
        "triangle": triangle,
        "right": right,
        "wrong": wrong,
        "ungraded": ungraded,
        "right_label": rate(right, labeler, [1, 1, 1], generation=one),
        "ungraded_label": rate(ungraded, labeler, [1, -1], generation=two),
    }
