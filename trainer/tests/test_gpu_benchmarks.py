"""The GPU benchmarks run here at a tiny shape: the smoke test CI runs on its CPU.

On a GPU they run at full shape (docs/benchmarks.md); here they must at least train and score
through the same code, packed and padded, and print the figures they exist to print.
"""

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )


def test_training_benchmark_trains_packed_and_padded_at_a_tiny_shape():
    done = run_bench("bench/train_gpu.py", "--steps", "2", "--tokens-per-step", "1024")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    packed = next(line for line in lines if line.startswith("packed "))
    padded = next(line for line in lines if line.startswith("padded "))
    # The packed row has no padding; the padded batch of the same examples has some.
    assert packed.split()[5] == "0%"
    assert padded.split()[5] != "0%"
    assert "packed / padded tokens/s:" in done.stdout
    assert "[ok] losses finite" in done.stdout


def test_scoring_benchmark_scores_every_solution_batched_and_one_by_one(tmp_path):
    done = run_bench("bench/score.py", "--smoke", "--solutions", "64", "--per-call", "8")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[ok] every one of 64 solutions scored" in done.stdout
    assert "batched / one-by-one:" in done.stdout
