"""SmolLM2 trained as a backbone on solutions of 2,000 tokens with the default memory settings
(token budget, gradient checkpointing, fused attention) stays within 8 GB of resident memory,
and the run records its peak (the slow, real-model test: a few optimizer steps only)."""

from pathlib import Path

import pytest

from conftest import create_user
from labeling.models import Problem, Solution
from trainer.models import TrainingRun
from trainer.tests.test_inspection import rate
from trainer.training import runs
from trainer.training.params import TrainingParams

pytestmark = pytest.mark.django_db

GB = 1024**3
# About 500 SmolLM2 tokens: four of them and the problem make a 2,000-token solution.
STEP = " ".join(f"Then we add {n} to the running total and check the sum again." for n in range(32))


def long_pool(problems: int) -> None:
    for a in range(problems):
        problem = Problem.objects.create(
            text=f"Sum the numbers up to {a + 40}.", answer=str(a), unique_id=f"t/long-{a}.json"
        )
        solution = Solution.objects.create(
            problem=problem, steps=[f"{STEP} Part {i}." for i in range(4)], answer=str(a)
        )
        rate(solution, "ann", [1, 1, 1, -1] if a % 2 else [1, 1, 1, 1])


def test_smollm2_trains_on_2000_token_solutions_with_defaults_in_8_gb(smollm2_model_dir, settings):
    from transformers import AutoTokenizer

    tokens = len(
        AutoTokenizer.from_pretrained(Path(settings.PRM_MODEL_DIR) / smollm2_model_dir.path)(STEP)[
            "input_ids"
        ]
    )
    assert 450 <= tokens <= 540
    long_pool(problems=5)  # 4 train, 1 held out
    defaults = TrainingParams()
    assert defaults.max_tokens_per_micro_batch >= 4000 and defaults.gradient_checkpointing
    run = runs.request_training_run(
        user=create_user("rita", "researcher"),
        # Defaults but for the number of steps: two optimizer steps of two 2,000-token
        # examples, each one micro-batch of the default token budget.
        params={"base_model": smollm2_model_dir.name, "epochs": 1, "batch_size": 2},
        enqueue=False,
    )
    run = runs.execute_training_run(run_id=run.pk)

    assert run.status == TrainingRun.Status.SUCCEEDED, run.error + run.log_tail
    assert run.total_steps == 2
    assert "Estimated peak memory" in run.log_tail
    assert run.peak_rss_bytes is not None and run.peak_rss_bytes < 8 * GB
    print(f"SmolLM2, 2,000-token solutions: peak RSS {run.peak_rss_bytes / GB:.2f} GiB")
