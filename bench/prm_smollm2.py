"""Benchmark: SmolLM2-135M trained as a PRM backbone on the demo labels, then scoring the pool.

    python bench/prm_smollm2.py [--gguf PATH] [--epochs 2] [--batch-size 8] [--problems N]

The real-model run of the GPU check (bench/gpu_check.py): on a throwaway SQLite database it
loads the demo problems, solutions and labels (`seed_demo`), converts the SmolLM2-135M GGUF file
into a checkpoint and records it (`generators.local_models.convert_gguf`), trains a run on that
backbone through the worker's own path (`trainer.training.runs.execute_training_run`: bf16 on
CUDA) for a fixed number of epochs at a fixed batch size, then scores every solution of the pool
with the version it made (`trainer.pipeline.score_with_model_version`). Prints the time of each
phase and exits non-zero when the run fails or a solution goes unscored.
"""

import argparse
import io
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.benchdb import throwaway_django  # noqa: E402

BENCH_DB = "stepwise_smollm2_bench"


def run(args, tmpdir: Path) -> bool:
    import torch
    from django.core.management import call_command
    from django.test import override_settings

    from conftest import create_user
    from generators import local_models
    from labeling.models import Problem, Solution
    from trainer import pipeline
    from trainer.models import ModelVersion, TrainingRun
    from trainer.training import runs

    times = {}
    start = time.perf_counter()
    call_command("migrate", verbosity=0, interactive=False)
    call_command("seed_demo", verbosity=0, stdout=io.StringIO())  # it lists the demo logins
    if args.problems:
        # A smaller pool (the dry run's, on a CPU): the demo problems past the first N go.
        keep = Problem.objects.order_by("pk").values_list("pk", flat=True)[: args.problems]
        Problem.objects.exclude(pk__in=list(keep)).delete()
    times["database and demo labels"] = time.perf_counter() - start
    print(f"database and demo labels: {times['database and demo labels']:.1f} s", flush=True)
    gguf = Path(args.gguf) if args.gguf else local_models.smollm2_gguf()
    if args.tiny_backbone:
        gguf = None  # the dry run's: the same path on the built-in backbone
    elif gguf is None or not gguf.is_file():
        print("[FAIL] no SmolLM2 GGUF file (make gpu-carry, or --gguf PATH)")
        return False
    with override_settings(PRM_MODEL_DIR=tmpdir / "models"):
        start = time.perf_counter()
        record = gguf and local_models.convert_gguf(gguf_path=gguf, name=local_models.SMOLLM2_NAME)
        times["GGUF to checkpoint"] = time.perf_counter() - start
        print(f"GGUF to checkpoint: {times['GGUF to checkpoint']:.1f} s", flush=True)

        researcher = create_user("bench-researcher", "researcher")
        run = runs.request_training_run(
            user=researcher,
            params={
                "base_model": record.name if record else None,
                "epochs": args.epochs,
                "batch_size": args.batch_size,
                "learning_rate": 5e-5,
                "eval_fraction": 0.1,
                "seed": 0,
            },
            enqueue=False,
        )
        start = time.perf_counter()
        run = runs.execute_training_run(run_id=run.pk)
        times["training"] = time.perf_counter() - start
        print(f"training: {times['training']:.1f} s", flush=True)
        if run.status != TrainingRun.Status.SUCCEEDED:
            print(f"[FAIL] training run {run.status}: {run.error}\n{run.log_tail}")
            return False
        version = ModelVersion.objects.get(training_run=run)
        ids = list(Solution.objects.order_by("pk").values_list("pk", flat=True))
        start = time.perf_counter()
        written = pipeline.score_with_model_version(model_version_id=version.pk, solution_ids=ids)
        times["scoring the pool"] = time.perf_counter() - start
        print(f"scoring the pool: {times['scoring the pool']:.1f} s", flush=True)

    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    backbone = "the built-in tiny" if args.tiny_backbone else "SmolLM2-135M"
    print(f"\nstepwise real-model run: {backbone} PRM backbone, {device}")
    print(
        f"training run: {run.dataset_size} examples, {args.epochs} epochs of batch "
        f"{args.batch_size} ({run.total_steps} steps), final loss {run.loss}; "
        f"held-out metrics {version.metrics}"
    )
    rate = written / times["scoring the pool"]
    print(f"pool scored: {written} of {len(ids)} solutions, {rate:.1f} solutions/s")
    checks = [
        ("training run succeeded", run.status == TrainingRun.Status.SUCCEEDED),
        (f"every one of {len(ids)} solutions scored", written == len(ids) > 0),
    ]
    for name, ok in checks:
        print(f"[{'ok' if ok else 'FAIL'}] {name}")
    return all(ok for _, ok in checks)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gguf", default=os.environ.get("STEPWISE_SMOLLM2_GGUF"))
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument(
        "--tiny-backbone", action="store_true", help="the built-in backbone (a CPU dry run)"
    )
    parser.add_argument("--problems", type=int, default=None, help="only the first N demo problems")
    args = parser.parse_args()
    with throwaway_django(BENCH_DB) as tmpdir:
        ok = run(args, tmpdir)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
