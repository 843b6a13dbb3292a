"""The GPU check's dry run: what a lent GPU machine will run, proven here at tiny shapes.

`make gpu-carry` prepares the wheels and weights the machine lacks; `gpu_check.py --dry` installs
them with pip --no-index for CPython 3.12 and runs every step in an environment that has only
the machine image's packages beside them, so a wheel missing from the carried folder, or a step
that no longer runs, fails here rather than on the 15 minutes of a GPU session.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow  # downloads wheels and runs four benchmarks


def run(*args: str, timeout: int) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "OUT"}}
    return subprocess.run(
        [sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=timeout, env=env
    )


def test_the_dry_run_installs_the_carried_files_and_runs_every_step(tmp_path):
    carried = run("bench/gpu_carry.py", timeout=300)
    assert carried.returncode == 0, carried.stdout + carried.stderr
    assert "check call (var/gpu-carry)" in carried.stdout

    done = run("bench/gpu_check.py", "--dry", "--out", str(tmp_path), timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads((tmp_path / "summary.json").read_text())
    steps = {step["name"]: step for step in summary["steps"]}
    assert list(steps) == ["gpu-tests", "train-gpu", "score", "smollm2-prm"]
    assert all(step["status"].startswith("ok") for step in steps.values()), steps
    # On a CPU every GPU test is collected and skipped with its reason, none errors.
    assert steps["gpu-tests"]["figures"]["result"].startswith("5 skipped")
    assert steps["train-gpu"]["figures"]["packed"]["tokens_per_s"]
    assert steps["score"]["figures"]["ratio"]
    assert steps["smollm2-prm"]["figures"]["training"]
    table = (tmp_path / "summary.md").read_text()
    assert "| step | status | seconds | figures |" in table
    assert table in done.stdout  # the table is what the run prints last
    # What comes back from the machine: at most 8 files, none in a folder.
    assert len(list(tmp_path.iterdir())) <= 8
    assert all(path.is_file() for path in tmp_path.iterdir())
