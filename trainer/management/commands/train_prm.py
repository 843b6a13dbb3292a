import socket

from django.core.management.base import BaseCommand, CommandError

from annotate.errors import DomainError
from trainer import runs


class Command(BaseCommand):
    help = (
        "Train the PRM in the foreground, recorded as a training run like one started from "
        "the web (same data, checkpoint directory, metrics and promotion rule)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--epochs", type=int)
        parser.add_argument("--learning-rate", type=float)
        parser.add_argument("--batch-size", type=int)
        parser.add_argument("--max-minutes", type=float, help="stop training after this long")
        parser.add_argument("--seed", type=int)
        parser.add_argument("--eval-fraction", type=float, help="share of problems held out")
        parser.add_argument(
            "--no-quality-control",
            action="store_true",
            help="leave out quality-control sessions",
        )
        parser.add_argument("--screening", action="store_true", help="include screening")
        parser.add_argument("--generation-min", type=int)
        parser.add_argument("--generation-max", type=int)
        parser.add_argument(
            "--base-model", help="a recorded local model's name, or a checkpoint directory"
        )
        parser.add_argument("--label-source", choices=["human", "rollout", "both"])
        parser.add_argument("--rollout-estimate", choices=["hard", "soft"])
        parser.add_argument("--rollout-weight", type=float)
        parser.add_argument("--rollout-run", type=int, help="a sampling run id (default: latest)")

    def handle(self, *args, **options):
        params = {
            name: options[name]
            for name in (
                "epochs",
                "learning_rate",
                "batch_size",
                "max_minutes",
                "seed",
                "eval_fraction",
                "generation_min",
                "generation_max",
                "base_model",
                "label_source",
                "rollout_estimate",
                "rollout_weight",
                "rollout_run",
            )
            if options[name] is not None
        }
        params["include_quality_control"] = not options["no_quality_control"]
        params["include_screening"] = options["screening"]
        try:
            run = runs.request_training_run(user=None, params=params, enqueue=False)
        except DomainError as exc:
            raise CommandError(str(exc)) from None
        self.stderr.write(f"training run {run.pk} started (Ctrl-C cancels it)")
        run = runs.execute_training_run(
            run_id=run.pk, worker_hostname=f"manage.py@{socket.gethostname()}"
        )
        if run.status != run.Status.SUCCEEDED:
            raise CommandError(f"training run {run.pk} {run.status}: {run.error}")
        version = run.model_version
        state = "active" if version.is_active else "not promoted"
        self.stdout.write(
            f"training run {run.pk} succeeded: {version} ({state}) at {version.checkpoint_path}"
        )
