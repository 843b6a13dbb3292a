"""Shared shell for the import commands: run one import service, report, map failures."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from labeling.services.importing import ImportFailed, ImportResult


class ImportCommand(BaseCommand):
    def add_arguments(self, parser):
        parser.add_argument("file", type=Path, help="JSONL file to import")

    def run_import(self, *, path: Path) -> ImportResult:
        raise NotImplementedError

    def handle(self, *args, file: Path, **options):
        if not file.is_file():
            raise CommandError(f"{file}: no such file")
        try:
            result = self.run_import(path=file)
        except ImportFailed as exc:
            raise CommandError(f"{exc} (nothing was imported from this file)") from None
        details = "".join(f", {v} {k}" for k, v in result.details.items())
        self.stdout.write(
            self.style.SUCCESS(
                f"{file}: {result.lines} lines, {result.created} created, "
                f"{result.updated} updated, {result.unchanged} unchanged{details}"
            )
        )
        for note in result.notes:
            self.stdout.write(self.style.WARNING(f"{file}: {note}"))
