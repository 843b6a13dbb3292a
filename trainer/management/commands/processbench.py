from django.core.management.base import BaseCommand, CommandError

from core.errors import DomainError
from trainer.evaluation import figures, processbench
from trainer.models import ModelVersion
from trainer.training import checkpoints


class Command(BaseCommand):
    help = (
        "ProcessBench with the active model version (or --model-version): accuracy on the "
        "erroneous and on the correct items and their harmonic mean F1, by ProcessBench's rule "
        "(a step scored below 0.5 is wrong; the same rule as evaluation sets), with the "
        "bootstrap interval and the baselines. --threshold reports another fixed threshold; "
        "--sweep adds every threshold of a grid as a diagnostic, not a figure."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", help="JSONL: problem, steps, label (first wrong step or -1)")
        parser.add_argument("--model-version", type=int)
        parser.add_argument(
            "--threshold",
            type=float,
            help="a threshold fixed in advance, instead of ProcessBench's 0.5 (never tune it "
            "on the file it is reported on)",
        )
        parser.add_argument(
            "--sweep", action="store_true", help="also print F1 at thresholds 0.05 … 0.95"
        )

    def handle(self, *args, **options):
        from trainer.training.ml.prm import PRM

        try:
            items = processbench.read_items(path=options["file"])
        except OSError as exc:
            raise CommandError(f"cannot read {options['file']}: {exc.strerror}") from None
        except DomainError as exc:
            raise CommandError(str(exc)) from None
        if not items:
            raise CommandError(f"{options['file']}: no items")
        threshold, rule = figures.THRESHOLD, figures.THRESHOLD_RULE
        if options["threshold"] is not None:
            threshold = options["threshold"]
            if not 0 < threshold < 1:
                raise CommandError("--threshold must be between 0 and 1")
            rule = f"{threshold:g}, given with --threshold; not ProcessBench's rule"
        versions = ModelVersion.objects.all()
        version = (
            versions.filter(pk=options["model_version"]).first()
            if options["model_version"]
            else versions.filter(is_active=True).first()
        )
        if version is None:
            raise CommandError("No such model version (and none is active).")
        prm = PRM.load(checkpoints.local_dir(version))
        scores = prm.score(problems=[i.problem for i in items], steps=[i.steps for i in items])
        self.stdout.write(f"{version}: {len(items)} items from {options['file']}")
        result = processbench.evaluate(items, scores, threshold)
        self.stdout.write(
            f"Threshold {rule}:\n{processbench.HEADER}\n{processbench.format_result(result)}"
        )
        # How uncertain the figure is, and what a model that learned nothing would score.
        reported = figures.evaluate(
            [figures.EvalItem(i.problem, i.steps, i.label) for i in items],
            scores,
            threshold=threshold,
            threshold_rule=rule,
        )
        self.stdout.write("\n".join(figures.lines(reported)))
        if options["sweep"]:
            self.stdout.write(
                "Sweep (a diagnostic: each row is tuned on these same items, so none of them "
                "is a figure to report):\n" + processbench.HEADER
            )
            for row in processbench.sweep(items, scores):
                self.stdout.write(processbench.format_result(row))
