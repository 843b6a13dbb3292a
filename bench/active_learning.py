"""Benchmark: active learning against uniform selection, same seed, same label budget.

    python bench/active_learning.py [--generations 4] [--labels-per-generation 500]
                                    [--strategies convincing_wrong_answer,uniform]

Runs the whole loop of `manage.py simulate --compare` (select → label through the real
services → retrain → score → select, on the synthetic domain) for each strategy from the same
seed: same pool, same first generation, same test set. It reports, per generation, held-out
step AUROC and best-of-N accuracy of the PRM against an outcome reward model trained on
final-answer correctness with the same number of labels and against majority voting; then
the labels each strategy needed to reach uniform selection's final AUROC, i.e. the data
efficiency of active learning against its peer in the same run (the paper reports about
2.6x). Writes the results as JSON and the plot as PNG (`--out`, default
`var/bench/active_learning.json` and `.png`).

The default size finishes in well under 30 minutes on a 2-core CPU. The figures are what
they are: the benchmark fails only if the loop itself fails or overruns `--max-total-minutes`.
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

from benchdb import throwaway_django

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

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
    parser.add_argument("--max-minutes", type=float, default=5.0, help="per training run")
    parser.add_argument(
        "--orm-final-only",
        action="store_true",
        help="train the ORM baseline at the final label count only, not at every generation",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=REPO / "var" / "bench" / "active_learning.json")
    parser.add_argument(
        "--max-total-minutes",
        type=float,
        default=30.0,
        help="fail if the comparison takes longer (the issue's budget on a 2-core CPU)",
    )
    args = parser.parse_args()
    strategies = tuple(s.strip() for s in args.strategies.split(",") if s.strip())
    if BASELINE not in strategies:
        parser.error(f"--strategies must include {BASELINE}, the baseline of the comparison")

    started = time.monotonic()
    with throwaway_django(BENCH_DB) as tmpdir:
        from django.conf import settings
        from django.core.management import call_command

        from trainer.simulation import loop

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
            seed=args.seed,
            orm_every_generation=not args.orm_final_only,
        )
        results = loop.compare(
            config, strategies=strategies, emit=lambda line: print(line, file=sys.stderr)
        )
        payload = loop.result_dict(results)
    minutes = (time.monotonic() - started) / 60

    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(payload, indent=2), encoding="utf-8")
    plot = loop.plot(results, args.out.with_suffix(".png"))

    budget = results[BASELINE].generations[-1]["labels"]
    print(
        f"\nstepwise active-learning benchmark: {', '.join(strategies)}; seed {args.seed}; "
        f"{args.generations} generations of {args.labels_per_generation} labels from a pool of "
        f"{args.pool_size:,}; {minutes:.1f} min on {os.cpu_count()} CPU(s)"
    )
    print(loop.table(results))
    print()
    print("\n".join(final_comparison(results, budget)))
    efficiency = payload["data_efficiency"]
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
    print(f"results: {args.out}" + (f", plot: {plot}" if plot else ""))
    in_time = minutes <= args.max_total_minutes
    print(
        f"[{'ok' if in_time else 'FAIL'}] finished in {minutes:.1f} min "
        f"(budget {args.max_total_minutes:.0f} min)"
    )
    return 0 if in_time else 1


if __name__ == "__main__":
    sys.exit(main())
