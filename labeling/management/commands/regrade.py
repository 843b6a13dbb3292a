from django.core.management.base import BaseCommand

from labeling.tasks import regrade_solutions_task


class Command(BaseCommand):
    help = "Grade every solution's final answer again (after a grader or ground-truth change)."

    def add_arguments(self, parser):
        parser.add_argument(
            "--async", dest="run_async", action="store_true", help="queue it for a worker"
        )

    def handle(self, *args, run_async, **options):
        if run_async:
            regrade_solutions_task.delay()
            self.stdout.write("queued")
            return
        changed = regrade_solutions_task()
        self.stdout.write(f"{changed} solutions changed verdict")
