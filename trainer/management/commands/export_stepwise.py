import sys

from django.core.management.base import BaseCommand, CommandError

from core.errors import DomainError
from core.params import add_arguments, given_options
from labeling.filters import DataFilters
from trainer.stepwise_download import EXAMPLE_PARAMS, solution_ids
from trainer.training.params import TrainingParams
from trainer.training.stepwise_export import write_stepwise


class Command(BaseCommand):
    help = (
        "Export labels as TRL / Hugging Face stepwise supervision (JSON Lines: prompt, "
        "completions, labels), the examples a training run with the same filters trains on."
    )

    def add_arguments(self, parser):
        parser.add_argument("--out", required=True, help="output file, or - for stdout")
        # The training parameters that choose the examples, as train_prm spells them.
        add_arguments(
            parser,
            TrainingParams,
            only=EXAMPLE_PARAMS,
            aliases={
                "include_quality_control": ("--quality-control",),
                "include_screening": ("--screening",),
            },
        )
        # The data pages' filters (subject, level, source, graded, PRM score...), as in their URLs.
        add_arguments(parser, DataFilters, aliases={"q": ("--search",)})
        parser.add_argument(
            "--neutral-as-negative",
            dest="neutral_as_positive",
            action="store_false",
            default=None,
            help="a 0 step is labeled false (--no-neutral-as-positive)",
        )

    def handle(self, *args, **options):
        given = given_options(TrainingParams, options)
        try:
            params = TrainingParams.from_dict(given)
            kept = solution_ids(data=DataFilters.from_dict(given_options(DataFilters, options)))
            if options["out"] == "-":
                count = write_stepwise(out=self.stdout, params=params, solution_ids=kept)
            else:
                with open(options["out"], "w", encoding="utf-8") as out:
                    count = write_stepwise(out=out, params=params, solution_ids=kept)
        except DomainError as exc:
            raise CommandError(str(exc)) from exc
        sys.stderr.write(f"{count} examples written.\n")
