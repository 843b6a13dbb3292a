from labeling.management.commands._importing import ImportCommand
from labeling.services.importing import import_problems


class Command(ImportCommand):
    help = "Import MATH-style problems (JSONL: problem, solution, answer, subject, level, ...)."

    def run_import(self, *, path):
        return import_problems(path=path)
