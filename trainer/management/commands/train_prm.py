import socket

from django.core.management.base import BaseCommand, CommandError

from core.errors import DomainError
from core.jobs import JobOrigin
from core.params import add_arguments, given_options
from core.progress_bar import job_progress_bar
from trainer.models import TrainingRun
from trainer.training import checkpoints, runs
from trainer.training.params import TrainingParams


class Command(BaseCommand):
    help = (
        "Train the PRM in the foreground, recorded as a training run like one started from "
        "the web (same data, checkpoint directory, metrics and promotion rule). Every training "
        "parameter is an option; one left out takes its default."
    )

    def add_arguments(self, parser):
        add_arguments(
            parser,
            TrainingParams,
            # The spellings before the options were derived: --no-quality-control, --screening.
            aliases={
                "include_quality_control": ("--quality-control",),
                "include_screening": ("--screening",),
            },
        )

    def handle(self, *args, **options):
        try:
            params = TrainingParams.requested(given_options(TrainingParams, options))
            run = runs.request_training_run(
                user=None, params=params, origin=JobOrigin.COMMAND, enqueue=False
            )
        except DomainError as exc:
            raise CommandError(str(exc)) from None
        self.stderr.write(f"training run {run.pk} started (Ctrl-C cancels it)")
        with job_progress_bar(read=_steps_done(run.pk), desc=f"run {run.pk}", unit="step"):
            run = runs.execute_training_run(
                run_id=run.pk, worker_hostname=f"manage.py@{socket.gethostname()}"
            )
        if run.status != run.Status.SUCCEEDED:
            raise CommandError(f"training run {run.pk} {run.status}: {run.error}")
        version = run.model_version
        self.stdout.write(
            f"training run {run.pk} succeeded{', ' + run.cut if run.cut else ''}: {version} "
            f"({version.promotion}), checkpoint "
            f"{checkpoints.describe(version)} in the artifact store"
        )


def _steps_done(run_id: int):
    def read() -> tuple[int, int]:
        run = TrainingRun.objects.only("step", "total_steps").get(pk=run_id)
        return run.step, run.total_steps

    return read
