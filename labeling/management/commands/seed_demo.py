from django.core.management.base import BaseCommand

from labeling.demo.seed import create_demo_accounts, seed_demo


class Command(BaseCommand):
    help = "Load the demo problems and solutions and create one demo account per role."

    def handle(self, *args, **options):
        results = seed_demo()
        for what, result in results.items():
            self.stdout.write(f"demo {what}: {result.created} new, {result.unchanged} unchanged")
        self.stdout.write("Demo accounts (username / password, role):")
        for username, password, role in create_demo_accounts():
            self.stdout.write(f"  {username} / {password}  ({role})")
