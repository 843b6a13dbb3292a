"""Measure the grader on hand-judged answer pairs: a corpus TSV or an answer-review export."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from labeling.grading.corpus import measure, read_pairs


class Command(BaseCommand):
    help = (
        "Grade hand-judged answer pairs (TSV: answer, ground_truth, verdict, category; or the "
        "JSONL of /api/answer-reviews/export/) and print the accuracy on the pairs the grader "
        "decides, its false accepts and its unsure share."
    )

    def add_arguments(self, parser):
        parser.add_argument("paths", nargs="+", type=Path)

    def handle(self, *args, paths: list[Path], **options):
        for path in paths:
            try:
                pairs = read_pairs(path)
            except (OSError, ValueError) as exc:
                raise CommandError(str(exc)) from exc
            self.stdout.write(measure(pairs).report(str(path)))
