from labeling.management.commands._importing import ImportCommand
from labeling.services.importing import import_solutions


class Command(ImportCommand):
    help = (
        "Import candidate solutions to label (JSONL: unique_id or problem, steps, answer, "
        "optional source, score), graded against the ground truth on the way in."
    )

    def run_import(self, *, path):
        return import_solutions(path=path)
