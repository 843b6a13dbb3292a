from labeling.management.commands._importing import ImportCommand
from trainer.sampling.imported import import_labels
from trainer.sampling.public_formats import FORMATS


class Command(ImportCommand):
    help = (
        "Import a public step-label dataset (ProcessBench, PRMBench or TRL stepwise supervision; "
        "JSONL or Parquet) as problems, solutions and imported labels, all or nothing."
    )

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--format", required=True, choices=FORMATS, help="the file's format")

    def handle(self, *args, format: str, **options):
        self.format = format
        return super().handle(*args, **options)

    def run_import(self, *, path):
        return import_labels(path=path, format=self.format)
