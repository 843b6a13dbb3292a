import json
import sys
from dataclasses import fields
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from trainer.evaluation.simulation import label_sources, loop, seeds, triage, triage_report


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
        "budget (no database writes)."
    )

    def add_arguments(self, parser):
        defaults = loop.SimulationConfig()
        parser.add_argument("--strategy", choices=loop.STRATEGIES, default=defaults.strategy)
        parser.add_argument("--generations", type=int, default=defaults.generations)
        parser.add_argument(
            "--labels-per-generation",
            type=int,
            default=defaults.labels_per_generation,
            help="submitted sessions per generation (quality control included)",
        )
        parser.add_argument(
            "--pool-size",
            type=int,
            default=defaults.pool_size,
            help="candidate solutions in the pool",
        )
        parser.add_argument("--samples-per-problem", type=int, default=defaults.samples_per_problem)
        parser.add_argument("--per-problem-cap", type=int, default=defaults.per_problem_cap)
        parser.add_argument(
            "--quality-control",
            type=int,
            default=defaults.quality_control,
            help="quality-control solutions (with gold), labeled by every labeler",
        )
        parser.add_argument("--labelers", type=int, default=defaults.labelers)
        parser.add_argument(
            "--noise", type=float, default=defaults.noise, help="labelers' per-step error rate"
        )
        parser.add_argument("--seed", type=int, default=defaults.seed)
        parser.add_argument("--test-problems", type=int, default=defaults.test_problems)
        parser.add_argument("--test-samples", type=int, default=defaults.test_samples)
        parser.add_argument(
            "--best-of",
            default=",".join(map(str, defaults.best_of)),
            help="comma-separated N for best-of-N",
        )
        parser.add_argument("--trials", type=int, default=defaults.trials)
        parser.add_argument("--epochs", type=int, default=defaults.epochs)
        parser.add_argument("--learning-rate", type=float, default=defaults.learning_rate)
        parser.add_argument("--batch-size", type=int, default=defaults.batch_size)
        parser.add_argument(
            "--max-minutes",
            type=float,
            default=defaults.max_minutes,
            help="per training run (none by default: a wall-clock limit makes the figures "
            "depend on how busy the machine is)",
        )
        parser.add_argument(
            "--from-scratch",
            action="store_true",
            help="train every generation's PRM from fresh weights instead of from the previous "
            "generation's (the default, a warm start)",
        )
        parser.add_argument("--no-orm", action="store_true", help="skip the ORM baseline")
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

        sources = label_sources.LabelSourcesConfig()
        parser.add_argument(
            "--label-sources",
            action="store_true",
            help="train PRMs on simulated human labels, rollout labels and both, bought with "
            "the same budget, and print a table over --seeds (no database writes; it uses "
            "--noise, --best-of, --trials, --epochs, --learning-rate, --batch-size, "
            "--max-minutes; its test set is --ls-test-problems x --ls-test-samples)",
        )
        parser.add_argument(
            "--budget",
            type=float,
            default=sources.budget,
            help="with --label-sources: generator completions each source may spend",
        )
        parser.add_argument(
            "--human-cost",
            type=float,
            default=sources.human_cost,
            help="with --label-sources: completions one human-labeled solution costs",
        )
        parser.add_argument(
            "--rollouts",
            type=int,
            default=sources.rollouts,
            help="with --label-sources: k, rollouts from each step's prefix",
        )
        parser.add_argument(
            "--mixed-share",
            type=float,
            default=sources.mixed_share,
            help="with --label-sources: share of the budget 'mixed' spends on human labels",
        )
        parser.add_argument(
            "--sources",
            default=",".join(sources.sources),
            help=f"with --label-sources: comma-separated, among {', '.join(label_sources.SOURCES)}",
        )
        parser.add_argument(
            "--seeds",
            default=",".join(map(str, sources.seeds)),
            help="with --compare or --label-sources: comma-separated seeds (--seed is for a "
            "single run)",
        )
        parser.add_argument("--ls-test-problems", type=int, default=sources.test_problems)
        parser.add_argument("--ls-test-samples", type=int, default=sources.test_samples)

        parser.add_argument(
            "--triage",
            action="store_true",
            help="compare strategies, label sources and shown judge suggestions at equal human "
            "budget over --seeds (no database writes; it uses --noise, --rollouts, "
            "--per-problem-cap, --best-of, --trials, --epochs, --learning-rate, --batch-size, "
            "--max-minutes, --ls-test-problems, --ls-test-samples, --out, --plot)",
        )
        parser.add_argument(
            "--strategies",
            default=",".join(triage.STRATEGIES),
            help="with --triage: comma-separated, among " + ", ".join(triage.STRATEGIES),
        )
        for name, default in _triage_own_options():
            parser.add_argument(
                f"--{name.replace('_', '-')}",
                type=type(default),
                default=default,
                help=f"with --triage: TriageConfig.{name}",
            )

    def handle(self, *args, **options):
        if options["calibrate"]:
            return self._calibrate(options)
        if options["label_sources"]:
            return self._label_sources(options)
        if options["triage"]:
            return self._triage(options)
        config = self._config(options)
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
            seed_list = seeds.parse_seeds(options["seeds"])
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

    def _config(self, options) -> loop.SimulationConfig:
        try:
            best_of = tuple(int(n) for n in options["best_of"].split(",") if n.strip())
        except ValueError:
            raise CommandError("--best-of takes comma-separated integers, e.g. 1,4,16,64") from None
        names = {f.name for f in fields(loop.SimulationConfig)}
        values = {k: v for k, v in options.items() if k in names}
        config = loop.SimulationConfig(
            **{
                **values,
                "best_of": best_of,
                "orm": not options["no_orm"],
                "warm_start": not options["from_scratch"],
            }
        )
        if any(n < 1 for n in best_of) or not best_of:
            raise CommandError("--best-of needs positive integers.")
        return config

    def _label_sources(self, options):
        try:
            seed_list = seeds.parse_seeds(options["seeds"])
        except loop.SimulationRefused as exc:
            raise CommandError(str(exc)) from None
        config = self._config(options)
        sources = tuple(s.strip() for s in options["sources"].split(",") if s.strip())
        ls_config = label_sources.LabelSourcesConfig(
            budget=options["budget"],
            human_cost=options["human_cost"],
            rollouts=options["rollouts"],
            mixed_share=options["mixed_share"],
            sources=sources,
            seeds=seed_list,
            **_held_out_and_training(config, options),
        )
        try:
            result = label_sources.compare_label_sources(ls_config, emit=self.stderr.write)
        except loop.SimulationRefused as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"Budget {ls_config.budget:g} completions per source; a human-labeled solution "
            f"costs {ls_config.human_cost:g}, a rollout-labeled one {ls_config.rollouts} per "
            f"step rolled out; seeds {', '.join(map(str, seed_list))} (mean ± std)."
        )
        self.stdout.write(label_sources.table(result))
        self._written(options, {**result, "summary": label_sources.summarize(result)})

    def _triage(self, options):
        config = self._config(options)
        try:
            triage_config = triage.TriageConfig(
                seeds=seeds.parse_seeds(options["seeds"]),
                strategies=tuple(s.strip() for s in options["strategies"].split(",") if s.strip()),
                rollouts=options["rollouts"],
                per_problem_cap=config.per_problem_cap,
                **_held_out_and_training(config, options),
                **{name: options[name] for name, _ in _triage_own_options()},
            )
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
            epochs=options["epochs"],
            max_seconds=options["max_minutes"] * 60 if options["max_minutes"] else None,
            seed=options["seed"],
            params={"learning_rate": options["learning_rate"], "batch_size": options["batch_size"]},
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


def _held_out_and_training(config: loop.SimulationConfig, options) -> dict:
    """What --label-sources and --triage take alike: the labelers' noise, the test set, best-of-N
    and the training recipe."""
    return {
        "noise": config.noise,
        "test_problems": options["ls_test_problems"],
        "test_samples": options["ls_test_samples"],
        "best_of": config.best_of,
        "trials": config.trials,
        "epochs": config.epochs,
        "learning_rate": config.learning_rate,
        "batch_size": config.batch_size,
        "max_minutes": config.max_minutes,
    }


def _triage_own_options() -> list[tuple[str, object]]:
    """The scalar fields of TriageConfig that no other mode's option already sets."""
    shared = {
        "seeds",
        "strategies",
        "noise",
        "rollouts",
        "per_problem_cap",
        "test_problems",
        "test_samples",
        "best_of",
        "trials",
        "epochs",
        "learning_rate",
        "batch_size",
        "max_minutes",
    }
    defaults = triage.TriageConfig()
    return [(f.name, getattr(defaults, f.name)) for f in fields(defaults) if f.name not in shared]
