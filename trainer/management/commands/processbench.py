from django.core.management.base import BaseCommand, CommandError

from core.errors import DomainError
from trainer.evaluation import figures, processbench
from trainer.models import ModelVersion
from trainer.training import checkpoints


class Command(BaseCommand):
    help = (
        "ProcessBench with the active model version (or --model-version): accuracy on the "
        "erroneous and on the correct items and their harmonic mean F1, with the threshold on "
        "the step score chosen on a development split (--dev-fraction) or given (--threshold), "
        "and the whole sweep."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", help="JSONL: problem, steps, label (first wrong step or -1)")
        parser.add_argument("--model-version", type=int)
        parser.add_argument("--threshold", type=float, help="use this threshold, no choosing")
        parser.add_argument("--dev-fraction", type=float, default=0.5)
        parser.add_argument("--seed", type=int, default=0)

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
        if not 0 < options["dev_fraction"] < 1:
            raise CommandError("--dev-fraction must be between 0 and 1")
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
        self.stdout.write("Sweep over all items:\n" + processbench.HEADER)
        for result in processbench.sweep(items, scores):
            self.stdout.write(processbench.format_result(result))
        if options["threshold"] is not None:
            chosen, test = options["threshold"], list(range(len(items)))
            how = "given"
        else:
            dev, test = processbench.split(
                len(items), dev_fraction=options["dev_fraction"], seed=options["seed"]
            )
            if not dev or not test:
                raise CommandError("Too few items to split: give --threshold instead.")
            chosen = processbench.choose_threshold(
                [items[i] for i in dev], [scores[i] for i in dev]
            )
            how = f"chosen on {len(dev)} development items"
        test_items, test_scores = [items[i] for i in test], [scores[i] for i in test]
        result = processbench.evaluate(test_items, test_scores, chosen)
        self.stdout.write(
            f"Threshold {chosen:.2f} ({how}), on {len(test)} items:\n"
            + processbench.HEADER
            + "\n"
            + processbench.format_result(result)
        )
        # How uncertain the figure is, and what a model that learned nothing would score.
        reported = figures.evaluate(
            [figures.EvalItem(i.problem, i.steps, i.label) for i in test_items],
            test_scores,
            threshold=chosen,
            threshold_rule=how,
        )
        self.stdout.write("\n".join(figures.lines(reported)))
