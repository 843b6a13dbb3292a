import json
import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from core.params import add_arguments, given_options, names
from trainer.evaluation.simulation import (
    loop,
    recipe,
    rollouts_vs_humans,
    seeds,
    triage,
    triage_report,
)

# The modes' parameter sets, whose fields are the options: the loop's first, so a field they
# share shows the loop's default in the help (each mode still takes its own).
CONFIGS = (loop.SimulationConfig, rollouts_vs_humans.LabelSourcesConfig, triage.TriageConfig)
# The spellings from before the options were derived.
ALIASES = {
    "test_problems": ("--ls-test-problems",),
    "test_samples": ("--ls-test-samples",),
}


class Command(BaseCommand):
    help = (
        "Run active learning without humans on the synthetic domain: generations of select, "
        "label (simulated labelers through the real services), retrain, evaluate. Needs a "
        "database of its own (it refuses one with other data). --compare runs every strategy "
        "once per seed of --seeds and reports mean ± sd over them; --calibrate measures how "
        "fast the tiny PRM learns the domain; "
        "--label-sources compares PRMs trained on human, rollout and mixed labels at equal "
        "cost (no database writes); --triage compares selection strategies, label sources "
        "(rollouts, a simulated judge, consensus) and shown judge suggestions at equal human "
        "budget (no database writes). Every parameter of a mode is an option; one left out "
        "takes that mode's own default (the defaults shown are the loop's: --label-sources and "
        "--triage test on 60 problems x 64 samples, --triage selects with wrong share 0.75)."
    )

    def add_arguments(self, parser):
        # Every parameter of the three modes is an option derived from its set (core.params);
        # a name two sets share is one option, and left out it takes each set's own default.
        taken: list[str] = []
        for config in CONFIGS:
            only = [name for name in names(config) if name not in taken]
            add_arguments(parser, config, only=only, aliases=ALIASES)
            taken += only
        parser.add_argument(
            "--from-scratch",
            dest="warm_start",
            action="store_const",
            const=False,
            help="train every generation's PRM from fresh weights instead of from the previous "
            "generation's (the default, a warm start; the same as --no-warm-start)",
        )
        parser.add_argument("--out", type=Path, help="write the results as JSON here")
        parser.add_argument(
            "--compare",
            action="store_true",
            help="run every strategy once per seed of --seeds (within a seed: the same pool, "
            "first generation and test set) and report each seed and mean ± sd over seeds",
        )
        parser.add_argument(
            "--plot", type=Path, help="PNG of accuracy against labels (default with --compare)"
        )
        parser.add_argument(
            "--calibrate",
            metavar="LABELS",
            help="comma-separated label counts: train on that many perfectly labeled "
            "solutions and report held-out step AUROC per epoch (no database writes)",
        )
        parser.add_argument(
            "--train-seeds",
            metavar="SEEDS",
            help="with --calibrate: one training run per seed on the same data (--seed draws "
            "the data), and the run-to-run spread of the final AUROC over them",
        )
        parser.add_argument(
            "--label-sources",
            action="store_true",
            help="train PRMs on simulated human labels, rollout labels and both, bought with "
            "the same budget, and print a table over --seeds (no database writes; the "
            "fields of LabelSourcesConfig)",
        )
        parser.add_argument(
            "--triage",
            action="store_true",
            help="compare strategies, label sources and shown judge suggestions at equal human "
            "budget over --seeds (no database writes; the fields of TriageConfig)",
        )

    def handle(self, *args, **options):
        if options["calibrate"]:
            return self._calibrate(options)
        if options["label_sources"]:
            return self._label_sources(options)
        if options["triage"]:
            return self._triage(options)
        config = _built(loop.SimulationConfig, options)
        if options["compare"]:
            return self._compare(config, options)
        try:
            with _generations_bar(config.generations) as bar:
                results = {
                    config.strategy: loop.run_simulation(
                        config, emit=_above(bar), advanced=bar.update
                    )
                }
        except loop.SimulationRefused as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(loop.table(results))
        self._written(options, loop.result_dict(results))
        if options["plot"]:
            self._plotted(loop.plot(results, options["plot"]))

    def _compare(self, config: loop.SimulationConfig, options):
        try:
            given = options["seeds"]
            seed_list = seeds.parse_seeds(given) if given else recipe.SEEDS
            total = config.generations * len(loop.STRATEGIES) * len(seed_list)
            with _generations_bar(total) as bar:
                per_seed = seeds.compare_seeds(
                    config, seeds=seed_list, emit=_above(bar), advanced=bar.update
                )
        except loop.SimulationRefused as exc:
            raise CommandError(str(exc)) from None
        payload = seeds.payload(per_seed)
        for seed, results in per_seed.items():
            self.stdout.write(f"--- seed {seed} ---")
            self.stdout.write(loop.table(results))
        self.stdout.write(f"--- over seeds {', '.join(map(str, per_seed))} ---")
        self.stdout.write(seeds.table(payload["aggregate"]))
        self._written(options, payload)
        plot_path = options["plot"] or (options["out"] or Path("simulation.json")).with_suffix(
            ".png"
        )
        self._plotted(seeds.plot(payload["aggregate"], plot_path))

    def _written(self, options, payload: dict) -> None:
        """The results as JSON where --out says, if it does."""
        if options["out"]:
            options["out"].write_text(json.dumps(payload, indent=2), encoding="utf-8")
            self.stdout.write(f"Results written to {options['out']}")

    def _plotted(self, written: Path | None) -> None:
        if written:
            self.stdout.write(f"Plot written to {written}")
        else:
            self.stderr.write("No plot: matplotlib is not installed.")

    def _label_sources(self, options):
        ls_config = _built(rollouts_vs_humans.LabelSourcesConfig, options)
        try:
            result = rollouts_vs_humans.compare_label_sources(ls_config, emit=self.stderr.write)
        except loop.SimulationRefused as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"Budget {ls_config.budget:g} completions per source; a human-labeled solution "
            f"costs {ls_config.human_cost:g}, a rollout-labeled one {ls_config.rollouts} per "
            f"step rolled out; seeds {', '.join(map(str, ls_config.seeds))} (mean ± std)."
        )
        self.stdout.write(rollouts_vs_humans.table(result))
        self._written(options, {**result, "summary": rollouts_vs_humans.summarize(result)})

    def _triage(self, options):
        triage_config = _built(triage.TriageConfig, options)
        try:
            result = triage.compare(triage_config, emit=self.stderr.write)
        except loop.SimulationRefused as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"Equal human budget: {triage_config.human_budget} labeled solutions of a pool of "
            f"{triage_config.pool_problems * triage_config.per_problem}; seeds "
            f"{', '.join(map(str, triage_config.seeds))} (mean ± std)."
        )
        self.stdout.write(triage_report.table(result))
        self._written(options, {**result, "summary": triage_report.summarize(result)})
        plot_path = options["plot"] or (options["out"] or Path("triage.json")).with_suffix(".png")
        self._plotted(triage_report.plot(result, plot_path))

    def _calibrate(self, options):
        from trainer.evaluation.simulation.calibrate import calibrate, run_to_run_spread

        config = _built(loop.SimulationConfig, options)
        try:
            counts = [int(n) for n in options["calibrate"].split(",") if n.strip()]
        except ValueError:
            raise CommandError("--calibrate takes comma-separated label counts") from None
        try:
            given = options["train_seeds"]
            train_seeds = seeds.parse_seeds(given) if given else ()
        except loop.SimulationRefused as exc:
            raise CommandError(f"--train-seeds: {exc}") from None
        points = calibrate(
            train_seeds=train_seeds,
            label_counts=counts,
            seed=config.seed,
            **recipe.knobs(config),
            on_point=lambda p: self.stderr.write(json.dumps(p.to_dict())),
        )
        header = (
            f"{'labels':>7} {'seed':>5} {'epoch':>5} {'seconds':>8} {'steps':>6} {'tokens':>10} "
            f"{'AUROC':>6}"
        )
        self.stdout.write(header)
        for p in points:
            auroc = f"{p.step_auroc:.3f}" if p.step_auroc is not None else "-"
            self.stdout.write(
                f"{p.labels:>7} {p.train_seed:>5} {p.epoch:>5} {p.seconds:>8.1f} "
                f"{p.optimizer_steps:>6} {p.tokens:>10} {auroc:>6}"
            )
        spread = run_to_run_spread(points)
        if len(train_seeds) > 1:
            self.stdout.write("Run-to-run spread of the final step AUROC over training seeds:")
            for labels, figure in spread.items():
                values = " ".join(
                    "-" if v is None else f"{v:.3f}" for v in figure["per_seed"].values()
                )
                mean = "-" if figure["mean"] is None else f"{figure['mean']:.3f}"
                std = "-" if figure["std"] is None else f"{figure['std']:.3f}"
                self.stdout.write(f"{labels:>7} labels: {mean} ± {std}  | {values}")
        if options["out"]:
            payload = {
                "calibration": [p.to_dict() for p in points],
                "run_to_run": {str(k): v for k, v in spread.items()},
            }
            options["out"].write_text(json.dumps(payload, indent=2), encoding="utf-8")


def _above(bar: tqdm):
    """The simulation's lines, on stderr above the bar (not through it)."""
    return lambda line: bar.write(line, file=sys.stderr)


def _generations_bar(total: int) -> tqdm:
    """Generations done of all the run will do, with their rate and the time left, on a
    terminal (a simulation runs for hours); off in a log, where the lines say as much."""
    return tqdm(total=total, unit="generation", desc="simulation", file=sys.stderr, disable=None)


def _built(config: type, options) -> Any:
    """The mode's parameter set from the options given (the others take its defaults)."""
    try:
        return config(**given_options(config, options))
    except loop.SimulationRefused as exc:
        raise CommandError(str(exc)) from None
