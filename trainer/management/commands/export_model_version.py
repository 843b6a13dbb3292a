from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from core import store
from core.errors import DomainError
from trainer.training.ml.hf_export import export_model_version, publish_export


class Command(BaseCommand):
    help = (
        "Export a model version as a Hugging Face checkpoint that transformers alone loads "
        "(AutoModelForTokenClassification, three labels read at the step tag) with a model card."
    )

    def add_arguments(self, parser):
        parser.add_argument("model_version", type=int, help="the model version's id")
        parser.add_argument("--out", required=True, type=Path, help="a new directory")
        parser.add_argument(
            "--publish",
            action="store_true",
            help="also put the export in the artifact store (STORE_URL) for a serving host",
        )

    def handle(self, *args, **options):
        export = publish_export if options["publish"] else export_model_version
        try:
            result = export(model_version_id=options["model_version"], out=options["out"])
        except DomainError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"Model version {options['model_version']} exported to {options['out']}.")
        if options["publish"]:
            self.stdout.write(
                f"Published as {store.describe(result)} in {store.store_url()} ({result})."
            )
