"""Issue 40: an ungraded solution is never picked as a convincing wrong answer; once a person
decides its answer is not equal to the problem's, the next selection may pick it as one."""

import pytest

from labeling.models import Problem, SelectionReason, Solution
from labeling.services.answer_review import decide_answer
from trainer.selection import services as selection

pytestmark = pytest.mark.django_db


def _select():
    generation = selection.select_generation(
        model_version=None,
        strategy="convincing_wrong_answer",
        batch_size=4,
        per_problem_cap=1,
        wrong_share=1.0,
        quality_control_count=0,
    )
    return {s.pk: s.selection_reason for s in Solution.objects.filter(generation=generation)}


def test_ungraded_is_never_a_wrong_answer_until_a_person_says_so(make_user):
    unsure = Problem.objects.create(
        text="When does the $3$-hour shift from $9$ a.m. end?", answer="12 p.m."
    )
    ungraded = Solution.objects.create(
        problem=unsure, steps=["Three hours after nine.", "# Answer\n\nnoon"], answer="noon"
    )
    for n in range(3):
        right = Problem.objects.create(text=f"What is ${n} + 1$?", answer=str(n + 1))
        Solution.objects.create(
            problem=right, steps=[f"# Answer\n\n{n + 1}"], answer=str(n + 1), is_correct=True
        )

    first = _select()
    assert SelectionReason.WRONG_ANSWER_CONVINCING not in first.values()
    # Picked (the batch takes the whole pool), but not as a wrong answer.
    assert first[ungraded.pk] != SelectionReason.WRONG_ANSWER_CONVINCING

    decide_answer(
        solution_id=ungraded.pk, user=make_user("rita", "researcher"), verdict="not_equal"
    )

    second = _select()
    assert second[ungraded.pk] == SelectionReason.WRONG_ANSWER_CONVINCING
