"""Labeled demo data for the run tests: submitted sessions that rate each step as gold does."""

from datetime import timedelta

from django.utils import timezone

from conftest import create_user
from labeling.demo.seed import seed_demo
from labeling.models import LabelingSession, Solution, StepLabel, StepRating
from labeling.services import labelers


def label_demo_solutions(*, problems: int, username: str = "gold-labeler") -> int:
    """Seed the demo and submit one session per solution of the first `problems` problems.

    Returns the number of sessions submitted.
    """
    seed_demo()
    labeler = labelers.get_or_create_labeler(user=create_user(username, "annotator"))
    problem_ids = sorted(set(Solution.objects.values_list("problem_id", flat=True)))[:problems]
    return submit_gold_sessions(
        labeler=labeler,
        solutions=Solution.objects.filter(problem_id__in=problem_ids).order_by("pk"),
    )


def submit_gold_sessions(*, labeler, solutions, submitted_at=None) -> int:
    submitted_at = submitted_at or timezone.now() - timedelta(minutes=1)
    count = 0
    for solution in solutions:
        ratings = getattr(solution, "gold_ratings", None) or solution.meta["gold_ratings"]
        session = LabelingSession.objects.create(
            labeler=labeler,
            solution=solution,
            started_at=submitted_at - timedelta(minutes=2),
            submitted_at=submitted_at,
            total_time=60_000,
            finish_reason="found_error" if -1 in ratings else "solution",
        )
        for index, rating in enumerate(ratings):
            step = StepLabel.objects.create(
                session=session, index=index, chosen_completion=None if rating == -1 else 0
            )
            StepRating.objects.create(
                step=step, completion_index=0, text=solution.steps[index], rating=rating
            )
        count += 1
    return count
