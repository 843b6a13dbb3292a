"""A person decides a final answer the grader could not (issue 40, "unsure goes to a person").

A solution whose final answer the grader could not decide is stored ungraded (`is_correct`
None), neither right nor wrong. A researcher or an admin compares it with the problem's answer
and decides: `equal` makes the solution correct, `not_equal` wrong (and so a candidate for the
convincing wrong answers of the next selection). The decision is an `AnswerReview`, one per
solution, that keeps the two texts compared; grading leaves a decided solution alone. The queue
itself is read by `labeling.selectors.answer_review_queue`.
"""

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.utils import timezone

from core.errors import Conflict, Invalid, NotFound
from labeling.grading import gradable
from labeling.models import AnswerReview, Solution
from labeling.services.labelers import get_or_create_labeler

VERDICTS = tuple(AnswerReview.Verdict.values)


class AnswerAlreadyDecided(Conflict):
    """Someone decided this solution's answer already (or the grader did)."""


def decide_answer(*, solution_id: int, user: AbstractBaseUser, verdict: str) -> AnswerReview:
    """Record `user`'s verdict on the solution's final answer and set its correctness, in one
    transaction with the solution's row locked. Raises Invalid for an unknown verdict,
    NotFound for an unknown solution, AnswerAlreadyDecided when it was decided or graded."""
    if verdict not in VERDICTS:
        raise Invalid(f"verdict must be one of {', '.join(VERDICTS)}, not {verdict!r}.")
    # Exports name the decider by labeler UUID: the user has one from the first decision on.
    get_or_create_labeler(user=user)
    with transaction.atomic():
        solution = (
            Solution.objects.select_for_update(of=("self",))
            .select_related("problem")
            .only("id", "answer", "is_correct", "problem__answer")
            .filter(pk=solution_id)
            .first()
        )
        if solution is None:
            raise NotFound(f"No solution {solution_id}.")
        _refuse_if_decided(solution)
        now = timezone.now()
        try:
            with transaction.atomic():
                review = AnswerReview.objects.create(
                    solution=solution,
                    verdict=verdict,
                    decided_by=user,
                    decided_at=now,
                    answer=solution.answer,
                    ground_truth=solution.problem.answer,
                )
        except IntegrityError:
            # Decided at the same moment through a path that did not take the lock.
            _refuse_if_decided(solution)
            raise
        solution.is_correct = verdict == AnswerReview.Verdict.EQUAL
        solution.save(update_fields=["is_correct"])
    return review


def _refuse_if_decided(solution: Solution) -> None:
    earlier = (
        AnswerReview.objects.select_related("decided_by").filter(solution_id=solution.pk).first()
    )
    if earlier is not None:
        raise AnswerAlreadyDecided(
            f"Solution {solution.pk}'s answer was decided already: "
            f"{earlier.get_verdict_display().lower()}, by {earlier.decided_by.get_username()} "
            f"at {earlier.decided_at:%Y-%m-%d %H:%M} UTC."
        )
    if solution.is_correct is not None:
        graded = "correct" if solution.is_correct else "wrong"
        raise AnswerAlreadyDecided(
            f"Solution {solution.pk} is not ungraded: the grader called its answer {graded}."
        )
    if not gradable(solution.answer, solution.problem.answer):
        raise AnswerAlreadyDecided(
            f"Solution {solution.pk} has no final answer or its problem has no answer: "
            "there is nothing to compare."
        )
