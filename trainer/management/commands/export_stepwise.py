import sys

from django.core.management.base import BaseCommand, CommandError

from annotate.errors import DomainError
from trainer.params import TrainingParams
from trainer.stepwise_export import write_stepwise


class Command(BaseCommand):
    help = (
        "Export labels as TRL / Hugging Face stepwise supervision (JSON Lines: prompt, "
        "completions, labels), the examples a training run with the same filters trains on."
    )

    def add_arguments(self, parser):
        parser.add_argument("--out", required=True, help="output file, or - for stdout")
        parser.add_argument("--label-source", choices=["human", "rollout", "both"])
        parser.add_argument("--rollout-estimate", choices=["hard", "soft"])
        parser.add_argument("--rollout-run", type=int)
        parser.add_argument("--generation-min", type=int)
        parser.add_argument("--generation-max", type=int)
        parser.add_argument("--no-quality-control", action="store_true")
        parser.add_argument("--screening", action="store_true")
        parser.add_argument(
            "--neutral-as-negative", action="store_true", help="a 0 step is labeled false"
        )

    def handle(self, *args, **options):
        given = {
            name: options[name]
            for name in (
                "label_source",
                "rollout_estimate",
                "rollout_run",
                "generation_min",
                "generation_max",
            )
            if options[name] is not None
        }
        given["include_quality_control"] = not options["no_quality_control"]
        given["include_screening"] = options["screening"]
        given["neutral_as_positive"] = not options["neutral_as_negative"]
        try:
            params = TrainingParams.from_dict(given)
            if options["out"] == "-":
                count = write_stepwise(out=self.stdout, params=params)
            else:
                with open(options["out"], "w", encoding="utf-8") as out:
                    count = write_stepwise(out=out, params=params)
        except DomainError as exc:
            raise CommandError(str(exc)) from exc
        sys.stderr.write(f"{count} examples written.\n")
