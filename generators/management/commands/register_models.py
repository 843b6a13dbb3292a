from django.core.management.base import BaseCommand, CommandError

from core import store
from generators import local_models


class Command(BaseCommand):
    help = (
        "Record every checkpoint directory and GGUF file under PRM_MODEL_DIR as a local model "
        "and publish its files to the artifact store, from which every worker loads it (models "
        "already recorded are kept, and published if they were recorded before the store; "
        "anything leading outside the directory is refused)."
    )

    def handle(self, *args, **options):
        result = local_models.register_models()
        for model in result.added:
            self.stdout.write(
                f"added {model.name} ({model.kind}, {model.architecture}), "
                f"published as {store.describe(model.artifact)}"
            )
        for model in result.published:
            self.stdout.write(
                f"published {model.name} (recorded before) as {store.describe(model.artifact)}"
            )
        for reason in result.refused:
            self.stderr.write(f"refused: {reason}")
        for reason in result.failed:
            self.stderr.write(f"failed: {reason}")
        self.stdout.write(
            f"{len(result.added)} added, {len(result.known)} already recorded "
            f"({len(result.published)} published now), {len(result.refused)} refused"
        )
        if result.failed:
            raise CommandError(
                f"{len(result.failed)} model(s) could not be recorded or published (above)."
            )
