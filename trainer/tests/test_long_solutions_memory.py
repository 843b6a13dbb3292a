"""SmolLM2 trained as a backbone on solutions of 2,000 tokens with the default memory settings
(token budget, gradient checkpointing, fused attention) stays within 8 GB of resident memory,
and the run records its peak and the estimate it was admitted on (the slow, real-model test: a
few optimizer steps only); the tiny model's estimate, on the same solutions, within 15%."""

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
    # Issue 46, item 6: the estimate was 4.2 GiB against 4.9-5.2 GiB measured. The docs give
    # the figure measured in a fresh process (within 15%); here, a generous bound.
    error = run.estimated_peak_bytes / run.peak_rss_bytes - 1
    print(
        f"SmolLM2, 2,000-token solutions: peak RSS {run.peak_rss_bytes / GB:.2f} GiB, "
        f"estimated {run.estimated_peak_bytes / GB:.2f} GiB ({error:+.0%})"
    )
    assert abs(error) <= 0.25


def test_the_tiny_models_memory_estimate_is_within_15_percent_of_its_peak(settings):
    long_pool(problems=5)
    run = runs.request_training_run(
        user=create_user("rita", "researcher"),
        params={"epochs": 2, "batch_size": 2},
        enqueue=False,
    )
    run = runs.execute_training_run(run_id=run.pk)

    assert run.status == TrainingRun.Status.SUCCEEDED, run.error + run.log_tail
    # The peak is this run's (reset at its start), not the test process's since it began.
    error = run.estimated_peak_bytes / run.peak_rss_bytes - 1
    print(f"tiny model: peak {run.peak_rss_bytes / GB:.2f} GiB, estimate {error:+.1%}")
    assert abs(error) <= 0.15
