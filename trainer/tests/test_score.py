"""Scoring stored solutions: every given solution gets step scores, a score and the version."""

import pytest

from labeling.models import Problem, Solution
from trainer.models import ModelVersion
from trainer.scoring.store import score_and_store
from trainer.training.ml.prm import PRM, PRMSettings, solution_score

pytestmark = pytest.mark.django_db

STEPS = [
    ["We add $2$ and $3$.", "So the answer is $5$."],
    ["Multiply both sides by $2$, so $x = 14$."],
    ["Subtract $7$.", "Divide by $3$.", "Check: $3 \\cdot 6 - 7 = 11$.", "# Answer\n\n6"],
    ["A much longer step " * 20, "and a short one."],
]


@pytest.fixture(scope="module")
def prm() -> PRM:
    corpus = [text for steps in STEPS for text in steps] * 5
    return PRM.build(
        base_model=None, corpus=corpus, settings=PRMSettings(aggregation="min"), seed=1
    )


@pytest.fixture
def solutions(make_solution) -> list[Solution]:
    problem = Problem.objects.create(text="Solve it.", answer="5")
    return [
        make_solution(problem, i, steps=steps, answer=str(i), is_correct=i == 0)
        for i, steps in enumerate(STEPS)
    ]


def test_scores_steps_solution_and_model_version_of_every_given_solution(prm, solutions):
    untouched = solutions.pop()
    version = ModelVersion.objects.create(name="v1", checkpoint="/nowhere")

    count = score_and_store(
        prm=prm,
        solution_ids=(s.pk for s in solutions),
        model_version_id=version.pk,
        batch_size=2,
    )

    assert count == len(solutions)
    expected = prm.score(problems=["Solve it."] * len(solutions), steps=STEPS[:3])
    for solution, want in zip(solutions, expected, strict=True):
        solution.refresh_from_db()
        assert solution.prm_model_version_id == version.pk
        assert solution.prm_step_scores == pytest.approx(want, abs=1e-6)
        assert solution.prm_score == pytest.approx(solution_score(want, aggregation="min"))
    untouched.refresh_from_db()
    assert untouched.prm_score is None and untouched.prm_model_version_id is None


def test_rescoring_replaces_the_previous_model_versions_scores(prm, solutions):
    old = ModelVersion.objects.create(name="old", checkpoint="/old")
    Solution.objects.update(prm_score=0.123, prm_step_scores=[0.1], prm_model_version=old)

    score_and_store(prm=prm, solution_ids=[s.pk for s in solutions], model_version_id=None)

    for solution in Solution.objects.all():
        assert solution.prm_model_version_id is None
        assert len(solution.prm_step_scores) == len(solution.steps)
        assert solution.prm_score != 0.123


def test_a_solution_without_steps_gets_no_score(prm, make_solution):
    problem = Problem.objects.create(text="Empty.", answer="1")
    empty = make_solution(problem, steps=[], is_correct=False)
    version = ModelVersion.objects.create(name="v", checkpoint="/v")

    assert score_and_store(prm=prm, solution_ids=[empty.pk], model_version_id=version.pk) == 1

    empty.refresh_from_db()
    assert empty.prm_score is None and empty.prm_step_scores is None
    assert empty.prm_model_version_id == version.pk
