from django.core.management.base import BaseCommand, CommandError

from core.errors import DomainError
from trainer.training import checkpoints


class Command(BaseCommand):
    help = (
        "Move files that records made before the artifact store name by a host's absolute path "
        "(model versions' checkpoints) into the store (STORE_URL). Run it on each host that "
        "holds such files; records whose files are elsewhere are listed and left as they are."
    )

    def handle(self, *args, **options):
        try:
            published, left = checkpoints.publish_legacy()
        except DomainError as exc:
            raise CommandError(str(exc)) from exc
        for version in published:
            self.stdout.write(f"{version} ({version.pk}): published as {version.checkpoint}.")
        for line in left:
            self.stdout.write(f"not here: {line}")
        self.stdout.write(f"{len(published)} published, {len(left)} on other hosts.")
