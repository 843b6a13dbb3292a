from django.core.management.base import BaseCommand

from labeling.tasks import regrade_solutions_task


class Command(BaseCommand):
    help = (
        "Grade every solution's final answer again (after a grader, ground-truth or answer "
        "change); answers missing from solutions are read again from their steps."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--async", dest="run_async", action="store_true", help="queue it for a worker"
        )

    def handle(self, *args, run_async, **options):
        if run_async:
            regrade_solutions_task.delay()
            self.stdout.write("queued")
            return
        done = regrade_solutions_task()
        self.stdout.write(
            f"{done['changed']} solutions changed verdict; {done['answers_read']} answers read "
            f"from steps; now {done['correct']} correct, {done['wrong']} wrong, "
            f"{done['ungraded']} ungraded (no readable answer or no ground truth)"
        )
