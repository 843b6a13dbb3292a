import sys
import uuid
from datetime import UTC, datetime

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from labeling.export import ExportFilters, write_prm800k


def parse_since(value: str) -> datetime:
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise CommandError(f"--since: not an ISO 8601 date or time: {value!r}") from None
    return moment if timezone.is_aware(moment) else moment.replace(tzinfo=UTC)


def parse_labeler(value: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except ValueError:
        raise CommandError(f"--labeler: not a labeler UUID: {value!r}") from None


class Command(BaseCommand):
    help = "Export submitted labels as PRM800K JSONL (labelers appear only as UUIDs)."

    def add_arguments(self, parser):
        parser.add_argument("--out", required=True, help="output file, or - for stdout")
        parser.add_argument("--generation", type=int, help="only this generation number")
        parser.add_argument("--since", help="only sessions submitted at or after (ISO 8601)")
        parser.add_argument("--labeler", help="only this labeler's UUID")
        quality_control = parser.add_mutually_exclusive_group()
        quality_control.add_argument(
            "--include-quality-control",
            dest="include_quality_control",
            action="store_true",
            default=True,
            help="include quality-control sessions (the default)",
        )
        quality_control.add_argument(
            "--no-quality-control",
            dest="include_quality_control",
            action="store_false",
            help="leave quality-control sessions out",
        )

    def handle(self, *args, out, generation, since, labeler, include_quality_control, **options):
        filters = ExportFilters(
            generation=generation,
            since=parse_since(since) if since else None,
            labeler=parse_labeler(labeler) if labeler else None,
            include_quality_control=include_quality_control,
        )
        if out == "-":
            count = write_prm800k(out=self.stdout, filters=filters, progress=sys.stderr)
        else:
            with open(out, "w", encoding="utf-8") as f:
                count = write_prm800k(out=f, filters=filters, progress=sys.stderr)
        self.stderr.write(f"exported {count} lines")
