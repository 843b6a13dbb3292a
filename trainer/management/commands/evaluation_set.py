from django.core.management.base import BaseCommand, CommandError

from core.errors import DomainError
from trainer.evaluation import figures, sets
from trainer.models import ModelVersion


class Command(BaseCommand):
    help = (
        "Evaluation sets: register a ProcessBench file or problems held out from training "
        "(`register`), list them (`list`), or evaluate a model version on every set now "
        "(`evaluate`). Every model version a run records is evaluated on each set."
    )

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        register = sub.add_parser("register", help="register an evaluation set")
        register.add_argument("name")
        source = register.add_mutually_exclusive_group(required=True)
        source.add_argument("--processbench", metavar="FILE", help="JSONL or Parquet")
        source.add_argument(
            "--held-out-problems", metavar="IDS", help="comma-separated problem ids"
        )
        register.add_argument(
            "--decides-promotion", action="store_true", help="promotion compares on this set"
        )
        sub.add_parser("list", help="the registered sets")
        evaluate = sub.add_parser("evaluate", help="evaluate a version here, in this process")
        evaluate.add_argument("--model-version", type=int, required=True)

    def handle(self, *args, **options):
        try:
            getattr(self, f"_{options['action']}")(options)
        except DomainError as exc:
            raise CommandError(str(exc)) from None

    def _register(self, options):
        if options["processbench"]:
            found = sets.register_processbench_set(
                name=options["name"], path=options["processbench"]
            )
        else:
            try:
                ids = [int(p) for p in options["held_out_problems"].split(",") if p.strip()]
            except ValueError:
                raise CommandError("--held-out-problems: comma-separated integers") from None
            found = sets.register_held_out_set(name=options["name"], problem_ids=ids)
        if options["decides_promotion"]:
            found = sets.choose_for_promotion(evaluation_set_id=found.pk)
        self.stdout.write(
            f"Evaluation set {found.pk} {found.name!r}: {len(sets.items_of(found))} items"
            + (", decides promotion" if found.decides_promotion else "")
        )

    def _list(self, options):
        for found in sets.evaluation_sets():
            promotion = "  (decides promotion)" if found.decides_promotion else ""
            self.stdout.write(f"{found.pk}\t{found.name}\t{found.get_kind_display()}{promotion}")

    def _evaluate(self, options):
        if not ModelVersion.objects.filter(pk=options["model_version"]).exists():
            raise CommandError(f"No model version {options['model_version']}.")
        sets.request_evaluations(model_version_id=options["model_version"])
        for evaluation in sets.evaluations_of(
            model_version=ModelVersion.objects.get(pk=options["model_version"])
        ):
            if evaluation.status == evaluation.Status.QUEUED:
                evaluation = sets.run_evaluation(
                    evaluation_id=evaluation.pk, worker_hostname="manage.py evaluation_set"
                )
            self.stdout.write(f"{evaluation.evaluation_set}: {evaluation.status}")
            for line in figures.lines(evaluation.results):
                self.stdout.write("  " + line)
        version = ModelVersion.objects.get(pk=options["model_version"])
        self.stdout.write(f"{version}: {version.promotion or 'no promotion decision'}")
