"""Rollout labels from the real generator (SmolLM2, through a server and on the worker):
stored per step with their provenance, the last step the solution's own correctness, and a
second pass over the same solution adds nothing."""

import pytest
from django.db import IntegrityError, transaction

from generators import SamplingSettings, open_generator
from labeling.models import Problem, Solution
from trainer.models import RolloutLabel, SamplingRun
from trainer.sampling.rollouts import roll_out_solution, rollout_labels_of

pytestmark = pytest.mark.django_db

K = 2
# Short budgets: the local backend draws one rollout at a time on a shared CPU.
SETTINGS = SamplingSettings(temperature=0.8, top_p=0.95, max_tokens=48, seed=7)


def short_solutions() -> list[Solution]:
    problem = Problem.objects.create(text="What is $2 + 3$?", answer="5", unique_id="t/add.json")
    right = Solution.objects.create(
        problem=problem,
        steps=["$2 + 3 = 5$.", "# Answer\n\n5"],
        answer="5",
        is_correct=True,
    )
    wrong = Solution.objects.create(
        problem=problem,
        steps=["We multiply $2$ and $3$.", "$2 \\cdot 3 = 6$.", "# Answer\n\n6"],
        answer="6",
        is_correct=False,
    )
    return [right, wrong]


def test_rollout_labels_of_real_rollouts_are_stored_with_provenance(generator_spec):
    solutions = short_solutions()
    run = SamplingRun.objects.create(
        purpose=SamplingRun.Purpose.ROLLOUTS,
        generator=generator_spec.to_dict(),
        sampling=SETTINGS.to_dict(),
        samples=K,
    )
    generator = open_generator(generator_spec)
    try:
        with transaction.atomic():
            stored = [
                roll_out_solution(run=run, solution=s, generator=generator, settings=SETTINGS)
                for s in solutions
            ]
        assert stored == [2, 3]
        labels = rollout_labels_of([s.pk for s in solutions], run=run)
        for solution in solutions:
            by_index = labels[solution.pk][run.pk]
            last_index = len(solution.steps) - 1
            assert sorted(by_index) == list(range(len(solution.steps)))
            for index in range(last_index):
                label = by_index[index]
                assert label.rollouts == K and len(label.answers) == K
                assert 0 <= label.reached <= K
                assert all(isinstance(answer, str) for answer in label.answers)
            last = by_index[last_index]
            assert (last.rollouts, last.reached) == (1, int(solution.is_correct))
            assert last.answers == [solution.answer]
        # Provenance: every label leads to the run, which names the generator and settings.
        run.refresh_from_db()
        assert run.generator == generator_spec.to_dict()
        assert run.sampling == SETTINGS.to_dict()
        assert RolloutLabel.objects.filter(sampling_run=run).count() == 5

        # Again (a resumed run): nothing is generated or stored twice.
        again = roll_out_solution(
            run=run, solution=solutions[0], generator=generator, settings=SETTINGS
        )
        assert again == 0
        assert RolloutLabel.objects.filter(sampling_run=run).count() == 5
    finally:
        generator.close()
    # The database refuses a second label of the same step by the same run.
    with pytest.raises(IntegrityError), transaction.atomic():
        RolloutLabel.objects.create(
            solution=solutions[0], index=0, sampling_run=run, rollouts=1, reached=0
        )
