"""The training memory estimate against the measured peak (docs/benchmarks.md, "Training
memory"): trains a PRM for two optimizer steps on micro-batches of about STEPS x 1,000 tokens in
this fresh process and prints the estimate the run was admitted on beside its peak (VmHWM).

    .venv/bin/python bench/train_memory.py --base-model var/models/smollm2-135m-instruct --steps 3
"""

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "annotate.settings")

GB = 1024**3
# About 500 SmolLM2 tokens (the sentence of trainer/tests/test_long_solutions_memory.py).
STEP = " ".join(f"Then we add {n} to the running total and check the sum again." for n in range(32))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-model", default=None, help="a checkpoint directory (default: tiny)")
    parser.add_argument("--steps", type=int, default=4, help="steps of ~500 tokens per solution")
    args = parser.parse_args()

    import django

    django.setup()
    from trainer.training.dataset import Example
    from trainer.training.ml.train import train_prm
    from trainer.training.params import TrainingParams

    examples = [
        Example(
            problem_id=i,
            solution_id=i,
            problem=f"Sum the numbers up to {i + 40}.",
            steps=[f"{STEP} Part {k}." for k in range(args.steps)],
            labels=[1] * (args.steps - 1) + [-1 if i % 2 else 1],
        )
        for i in range(5)
    ]
    seen: dict = {}

    def record(event: dict) -> None:
        seen.update({k: v for k, v in event.items() if k.endswith("_bytes") and v is not None})

    out = Path(tempfile.mkdtemp()) / "prm"
    try:
        train_prm(
            params=TrainingParams.from_dict({"epochs": 1, "batch_size": 2}),
            train=examples[:4],
            eval=examples[4:],
            base_model=args.base_model,
            out_dir=out,
            on_progress=record,
        )
    finally:
        shutil.rmtree(out.parent, ignore_errors=True)
    estimate, peak = seen["estimated_peak_bytes"], seen["peak_rss_bytes"]
    print(
        f"{args.base_model or 'tiny'}, {args.steps} steps per solution: peak {peak / GB:.2f} GiB, "
        f"estimate {estimate / GB:.2f} GiB ({estimate / peak - 1:+.0%})"
    )


if __name__ == "__main__":
    main()
