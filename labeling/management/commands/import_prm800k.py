from labeling.management.commands._importing import ImportCommand
from labeling.services.prm800k_import import import_prm800k


class Command(ImportCommand):
    help = "Import PRM800K label JSONL (phase 1 or 2): problems, solutions, labelers, ratings."

    def run_import(self, *, path):
        return import_prm800k(path=path)
