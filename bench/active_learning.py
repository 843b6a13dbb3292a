"""Benchmark: active learning against uniform selection, same label budget, several seeds.

    python bench/active_learning.py [--seeds 0,1,2] [--generations 4]
                                    [--labels-per-generation 500]
                                    [--strategies convincing_wrong_answer,uniform]

Runs the whole loop of `manage.py simulate --compare` (select → label through the real
services → retrain → score → select, on the synthetic domain) for each strategy, once per
seed; within a seed every strategy has the same pool, first generation and test set. Per seed
it reports held-out step AUROC and best-of-N accuracy of the PRM against an outcome reward
model trained on final-answer correctness with the same number of labels and against
majority voting, and the data efficiency of active learning against uniform selection
(`loop.mean_efficiency`, averaged over AUROC levels, and the one-point figure at uniform's
final AUROC). Then the same figures as mean ± sd over the seeds
(`trainer.evaluation.simulation.seeds`):
one seed's efficiency is one draw, and draws of it have ranged from 1.2x to 2.5x. Writes the
per-seed and aggregate results as JSON and the mean curves with a ±1 sd band as PNG (`--out`,
default `var/bench/active_learning.json` and `.png`).

A full-size seed (4 generations of 500 labels from a pool of 8,000) takes about 10 minutes on
a 2-core CPU with one torch thread (OMP_NUM_THREADS=1; two threads beside other work are
several times slower). The figures are what they are: the benchmark fails only if the loop itself
fails or overruns `--max-total-minutes` (default 30 per seed).
The database is never the developer's: with a PostgreSQL `DATABASE_URL` it creates (and
afterwards drops) `stepwise_active_learning_bench` on that server; otherwise a SQLite file in
a temporary directory. Model checkpoints go to that temporary directory too.
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.benchdb import throwaway_django  # noqa: E402

BENCH_DB = "stepwise_active_learning_bench"
ACTIVE, BASELINE = "convincing_wrong_answer", "uniform"


def final_comparison(results: dict, budget: int) -> list[str]:
    """At the last generation (the same label budget for every strategy): PRM best-of-N of
    each strategy against the ORM and majority voting."""
    lines = []
    first = next(iter(results.values()))
    sizes = [str(n) for n in first.config["best_of"]]
    header = f"{'verifier (' + str(budget) + ' labels)':<44}" + "".join(
        f"{'best-of-' + n:>12}" for n in sizes
    )
    lines.append(header)

    def row(name: str, figures: dict) -> str:
        cells = "".join(
            f"{figures[n]['mean']:>7.3f}±{figures[n]['std']:.2f}".rjust(12) for n in sizes
        )
        return f"{name:<44}{cells}"

    for strategy, result in results.items():
        lines.append(row(f"PRM, {strategy}", result.generations[-1]["best_of_n"]["prm"]))
    last = first.generations[-1]["best_of_n"]
    if "orm" in last:
        lines.append(row("ORM (final-answer labels, same count)", last["orm"]))
    lines.append(row("majority voting (no labels)", last["majority"]))
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--strategies", default=f"{ACTIVE},{BASELINE}")
    parser.add_argument("--generations", type=int, default=4)
    parser.add_argument("--labels-per-generation", type=int, default=500)
    parser.add_argument("--pool-size", type=int, default=8000)
    parser.add_argument("--test-problems", type=int, default=100)
    parser.add_argument("--test-samples", type=int, default=128)
    parser.add_argument("--best-of", default="1,4,16,64", help="comma-separated N")
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument(
        "--max-minutes",
        type=float,
        default=None,
        help="per training run; none by default, so the figures do not depend on machine load",
    )
    parser.add_argument(
        "--orm-final-only",
        action="store_true",
        help="train the ORM baseline at the final label count only, not at every generation",
    )
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated seeds")
    parser.add_argument(
        "--from-scratch",
        action="store_true",
        help="train every generation's PRM from fresh weights, not from the previous one's",
    )
    parser.add_argument("--out", type=Path, default=REPO / "var" / "bench" / "active_learning.json")
    parser.add_argument(
        "--max-total-minutes",
        type=float,
        default=None,
        help="fail if the comparison takes longer (default 30 minutes per seed)",
    )
    args = parser.parse_args()
    strategies = tuple(s.strip() for s in args.strategies.split(",") if s.strip())
    if BASELINE not in strategies:
        parser.error(f"--strategies must include {BASELINE}, the baseline of the comparison")
    try:
        # Django is not set up yet, so not trainer.evaluation.simulation.seeds.parse_seeds.
        seed_list = tuple(dict.fromkeys(int(s) for s in args.seeds.split(",") if s.strip()))
    except ValueError:
        seed_list = ()
    if not seed_list or min(seed_list) < 0:
        parser.error("--seeds takes comma-separated non-negative integers, e.g. 0,1,2")
    budget_minutes = args.max_total_minutes or 30.0 * len(seed_list)

    started = time.monotonic()
    with throwaway_django(BENCH_DB) as tmpdir:
        from django.conf import settings
        from django.core.management import call_command

        from trainer.evaluation.simulation import loop, seeds

        settings.PRM_MODEL_DIR = str(tmpdir / "models")
        call_command("migrate", verbosity=0, interactive=False)
        config = loop.SimulationConfig(
            generations=args.generations,
            labels_per_generation=args.labels_per_generation,
            pool_size=args.pool_size,
            test_problems=args.test_problems,
            test_samples=args.test_samples,
            best_of=tuple(int(n) for n in args.best_of.split(",")),
            trials=args.trials,
            max_minutes=args.max_minutes,
            orm_every_generation=not args.orm_final_only,
            warm_start=not args.from_scratch,
        )
        per_seed = seeds.compare_seeds(
            config,
            seeds=seed_list,
            strategies=strategies,
            emit=lambda line: print(line, file=sys.stderr),
        )
        payload = seeds.payload(per_seed)
    minutes = (time.monotonic() - started) / 60

    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(payload, indent=2), encoding="utf-8")
    plot = seeds.plot(payload["aggregate"], args.out.with_suffix(".png"))

    print(
        f"\nstepwise active-learning benchmark: {', '.join(strategies)}; seeds "
        f"{', '.join(map(str, seed_list))}; {args.generations} generations of "
        f"{args.labels_per_generation} labels from a pool of {args.pool_size:,}; "
        f"{minutes:.1f} min on {os.cpu_count()} CPU(s)"
    )
    for seed, results in per_seed.items():
        print(f"\n--- seed {seed} ---")
        print_seed(results, payload["per_seed"][str(seed)], strategies)
    print(f"\n--- over seeds {', '.join(map(str, seed_list))} ---")
    print(seeds.table(payload["aggregate"]))
    print(f"results: {args.out}" + (f", plot: {plot}" if plot else ""))
    in_time = minutes <= budget_minutes
    print(
        f"[{'ok' if in_time else 'FAIL'}] finished in {minutes:.1f} min "
        f"(budget {budget_minutes:.0f} min)"
    )
    return 0 if in_time else 1


def print_seed(results: dict, seed_payload: dict, strategies) -> None:
    """One seed's table, its final best-of-N comparison and its data efficiency."""
    from trainer.evaluation.simulation import loop

    budget = results[BASELINE].generations[-1]["labels"]
    print(loop.table(results))
    print()
    print("\n".join(final_comparison(results, budget)))
    efficiency = seed_payload["data_efficiency"]
    if efficiency:
        needed = efficiency["labels_needed"]
        ratios = efficiency[f"efficiency_vs_{BASELINE}"]
        target = efficiency["target_auroc"]
        print(f"\nlabels needed to reach {BASELINE}'s final step AUROC {target}:")
        for strategy in strategies:
            labels = needed.get(strategy)
            shown = f"{labels:,.0f}" if labels else "not reached"
            ratio = f"{ratios[strategy]:.2f}x" if ratios.get(strategy) else "-"
            print(f"  {strategy:<26}{shown:>12}   data efficiency vs {BASELINE}: {ratio}")
        if efficiency.get("auroc_levels"):
            levels = efficiency["auroc_levels"]
            mean = efficiency[f"mean_efficiency_vs_{BASELINE}"]
            print(
                f"averaged over {len(levels)} AUROC levels {levels[0]}-{levels[-1]} "
                "(less fragile than one point): "
                + ", ".join(f"{k} {v}x" for k, v in mean.items() if v is not None)
            )


if __name__ == "__main__":
    sys.exit(main())
