from django.core.management.base import BaseCommand

from generators import local_models


class Command(BaseCommand):
    help = (
        "Record every checkpoint directory and GGUF file under PRM_MODEL_DIR as a local model "
        "(models already recorded are kept; anything leading outside the directory is refused)."
    )

    def handle(self, *args, **options):
        result = local_models.register_models()
        for model in result.added:
            self.stdout.write(f"added {model.name} ({model.kind}, {model.architecture})")
        for reason in result.refused:
            self.stderr.write(f"refused: {reason}")
        self.stdout.write(
            f"{len(result.added)} added, {len(result.known)} already recorded, "
            f"{len(result.refused)} refused"
        )
