"""A training run with SmolLM2 as its backbone, named by its model record, and the model version
it made scoring new solutions of the pool (the slow, real-model test)."""

import time

import pytest

from conftest import create_user
from labeling.models import Problem, Solution
from trainer import pipeline
from trainer.models import ModelVersion, TrainingRun
from trainer.tests.test_inspection import rate
from trainer.training import runs

pytestmark = pytest.mark.django_db


def labeled_pool() -> list[Solution]:
    """8 short labeled solutions of 4 problems (a held-out split needs two problems at least)."""
    solutions = []
    for a in range(1, 5):
        problem = Problem.objects.create(
            text=f"What is ${a} + {a}$?", answer=str(2 * a), unique_id=f"t/double-{a}.json"
        )
        for answer in (2 * a, 2 * a + 1):
            solution = Solution.objects.create(
                problem=problem,
                steps=[
                    f"We add ${a}$ to itself.",
                    f"${a} + {a} = {answer}$.",
                    f"# Answer\n\n{answer}",
                ],
                answer=str(answer),
                is_correct=answer == 2 * a,
            )
            rate(solution, "ann", [1, 1, 1] if answer == 2 * a else [1, -1])
            solutions.append(solution)
    return solutions


def test_a_run_on_the_smollm2_backbone_trains_and_its_version_scores_the_pool(
    smollm2_model_dir,
):
    labeled_pool()
    researcher = create_user("rita", "researcher")
    started = time.monotonic()
    run = runs.request_training_run(
        user=researcher,
        params={
            "base_model": smollm2_model_dir.name,  # the record's name, not a path
            "epochs": 1,
            "batch_size": 4,
            "learning_rate": 1e-4,
            "eval_fraction": 0.25,
        },
        enqueue=False,
    )
    # The run stores the name, which the worker resolves to the model's files in the store.
    assert run.params["base_model"] == smollm2_model_dir.name
    run = runs.execute_training_run(run_id=run.pk)
    assert run.status == TrainingRun.Status.SUCCEEDED, run.error + run.log_tail
    assert run.dataset_size == 8
    version = ModelVersion.objects.get(training_run=run)
    trained = time.monotonic() - started

    problem = Problem.objects.create(text="What is $5 + 5$?", answer="10", unique_id="t/ten.json")
    new = [
        Solution.objects.create(
            problem=problem,
            steps=["We add $5$ to itself.", f"$5 + 5 = {answer}$.", f"# Answer\n\n{answer}"],
            answer=str(answer),
            is_correct=answer == 10,
        )
        for answer in (10, 11)
    ]
    written = pipeline.score_with_model_version(
        model_version_id=version.pk, solution_ids=[s.pk for s in new]
    )
    assert written == 2
    for solution in new:
        solution.refresh_from_db()
        assert solution.prm_model_version_id == version.pk
        assert len(solution.prm_step_scores) == 3
        assert all(0.0 <= score <= 1.0 for score in solution.prm_step_scores)
        assert 0.0 <= solution.prm_score <= 1.0
    print(f"SmolLM2 backbone: trained in {trained:.1f} s")
