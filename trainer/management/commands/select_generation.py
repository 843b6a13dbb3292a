from django.core.management.base import BaseCommand, CommandError

from core.errors import DomainError
from core.params import add_arguments, given_options
from trainer.models import ModelVersion
from trainer.selection import services as selection
from trainer.training import selectors


class Command(BaseCommand):
    help = (
        "Select and publish the next generation in the foreground, as the generations page "
        "and the API queue it: the model version scores the unlabeled pool and the strategy "
        "picks. Every selection parameter is an option; one left out takes its SELECTION_* "
        "setting."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--model-version",
            type=int,
            metavar="ID",
            help="the model version that scores and selects (default: the active one)",
        )
        add_arguments(parser, selection.SelectionParams)

    def handle(self, *args, **options):
        try:
            params = selection.SelectionParams.from_dict(
                given_options(selection.SelectionParams, options)
            )
            version = self._version(options["model_version"])
            generation = selection.publish_generation(model_version=version, params=params)
        except DomainError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"Published {generation}: {generation.params['selected']} from a pool of "
            f"{generation.params['pool']}."
        )

    @staticmethod
    def _version(version_id: int | None) -> ModelVersion:
        if version_id is None:
            version = selectors.active_model_version()
            if version is None:
                raise CommandError("No model version is active: name one with --model-version.")
            return version
        version = ModelVersion.objects.filter(pk=version_id).first()
        if version is None:
            raise CommandError(f"No model version {version_id}.")
        return version
