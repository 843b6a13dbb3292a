from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from core.errors import DomainError
from trainer.training.ml.hf_export import export_model_version


class Command(BaseCommand):
    help = (
        "Export a model version as a Hugging Face checkpoint that transformers alone loads "
        "(AutoModelForTokenClassification, three labels read at the step tag) with a model card."
    )

    def add_arguments(self, parser):
        parser.add_argument("model_version", type=int, help="the model version's id")
        parser.add_argument("--out", required=True, type=Path, help="a new directory")

    def handle(self, *args, **options):
        try:
            out = export_model_version(
                model_version_id=options["model_version"], out=options["out"]
            )
        except DomainError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"Model version {options['model_version']} exported to {out}.")
