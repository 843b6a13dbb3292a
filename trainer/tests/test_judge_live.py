"""A judge run with the real SmolLM2 (through a server and on the worker): it judges a couple
of solutions and stores what it could read with its provenance. SmolLM2-135M is no good judge;
this asserts what is stored and recorded, not that the judgements are right."""

import pytest

from generators import SamplingSettings
from labeling.models import Problem, Solution
from trainer.judging import services as judging
from trainer.judging.models import JudgeLabel, JudgeRun, JudgeRunItem
from trainer.judging.prompts import JUDGE_PROMPT_VERSION
from trainer.judging.services import JudgeParams

# Short: SmolLM2 on a shared CPU writes a few dozen tokens a second.
SETTINGS = SamplingSettings(temperature=0.2, top_p=0.95, max_tokens=64, seed=5)


def two_solutions() -> list[Solution]:
    """A right and a wrong solution of one problem: SmolLM2-135M reads one of them (a rating
    per step) and leaves the other unreadable."""
    problem = Problem.objects.create(text="What is $2 + 3$?", answer="5", unique_id="t/add.json")
    return [
        Solution.objects.create(
            problem=problem, steps=["$2 + 3 = 5$.", "# Answer\n\n5"], answer="5", is_correct=True
        ),
        Solution.objects.create(
            problem=problem,
            steps=["We multiply $2$ and $3$.", "$2 \\cdot 3 = 6$.", "# Answer\n\n6"],
            answer="6",
            is_correct=False,
        ),
    ]


def judged(*, generator, solutions, format: str = "per_step") -> JudgeRun:
    """A judge run of `solutions` by `generator`, executed here (no worker)."""
    run = judging.request_judge_run(
        user=None,
        generator=generator,
        settings=SETTINGS,
        params=JudgeParams(format=format),
        solution_ids=[s.pk for s in solutions],
        enqueue=False,
    )
    return judging.execute_judge_run(run_id=run.pk, worker_hostname="test")


# One format: the critic's (first_error) with SmolLM2's real replies, which never give an
# index, is read in test_judge_prompts; a run of it here would only add minutes.
@pytest.mark.django_db
def test_the_real_judge_labels_solutions_with_provenance(generator_spec, settings):
    format = "per_step"
    settings.GENERATOR_CONCURRENCY = 1
    solutions = two_solutions()
    run = judged(generator=generator_spec, solutions=solutions, format=format)
    assert run.status == "succeeded", run.error
    assert judging.progress(run) == {"done": 2, "total": 2, "percent": 100}
    # Provenance: the judge, its settings, the prompt version and the format.
    assert run.generator == generator_spec.to_dict()
    assert run.sampling == SETTINGS.to_dict()
    assert (run.prompt_version, run.format) == (JUDGE_PROMPT_VERSION, format)

    items = list(JudgeRunItem.objects.filter(run=run).order_by("position"))
    assert all(item.done_at and item.reply.strip() for item in items)
    for item, solution in zip(items, solutions, strict=True):
        labels = list(JudgeLabel.objects.filter(run=run, solution=solution).order_by("index"))
        # Each solution is either read (at least one label) or recorded unreadable (none).
        assert item.unreadable == (not labels) and item.stored == len(labels)
        assert all(0 <= label.index < len(solution.steps) for label in labels)
        assert all(label.rating in (-1, 0, 1) for label in labels)
    assert run.stored == JudgeLabel.objects.filter(run=run).count()
    assert run.unreadable == sum(item.unreadable for item in items)
    lines = list(judging.export_lines(run=run))
    assert len(lines) == 2 - run.unreadable
