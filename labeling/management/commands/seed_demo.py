from django.core.management.base import BaseCommand

from labeling.demo.seed import create_demo_accounts, seed_demo, seed_demo_labels


class Command(BaseCommand):
    help = (
        "Load the demo problems and solutions, label most of them as demo labelers, and "
        "create one demo account per role; idempotent."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--no-labels",
            action="store_true",
            help="Leave every demo solution unlabeled (no demo labelers' sessions).",
        )

    def handle(self, *args, **options):
        results = seed_demo()
        for what, result in results.items():
            self.stdout.write(f"demo {what}: {result.created} new, {result.unchanged} unchanged")
        accounts = create_demo_accounts()
        if not options["no_labels"]:
            self.stdout.write(f"demo labeled sessions: {seed_demo_labels()} new")
        # Last, so that they are what the terminal shows before the server's own output.
        self.stdout.write("Demo accounts (username / password, role):")
        for username, password, role in accounts:
            self.stdout.write(f"  {username} / {password}  ({role})")
