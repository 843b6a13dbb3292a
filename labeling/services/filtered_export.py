"""The PRM800K export of what the data filters keep: its count and first lines before the
download, and the download itself, through the export's own writer (labeling/export.py)."""

import json
from dataclasses import dataclass
from itertools import islice

from django.http import StreamingHttpResponse

from labeling import export, filters
from labeling.export import ExportFilters
from labeling.filters import DataFilters

PREVIEW_LINES = 3


@dataclass(frozen=True)
class PreviewRow:
    problem: str  # the problem's text, for the page to show as math
    summary: str  # what the line holds, in a few words
    line: str  # the line as the download writes it


@dataclass(frozen=True)
class Preview:
    count: int  # lines the download will hold
    rows: list[PreviewRow]  # its first lines

    @property
    def lines(self) -> list[str]:
        return [row.line for row in self.rows]


def prm800k_preview(
    *, data: DataFilters, options: ExportFilters, lines: int = PREVIEW_LINES
) -> Preview:
    within = filters.labels(filters=data)
    count = export.submitted_sessions(filters=options, within=within).count()
    rows = []
    for line in islice(export.iter_prm800k_lines(filters=options, within=within), lines):
        record = json.loads(line)
        ratings = [
            str(c["rating"])
            for step in record["label"]["steps"]
            for c in step["completions"][:1]
            if c.get("rating") is not None
        ]
        summary = f"{len(record['label']['steps'])} steps rated {' '.join(ratings)}".strip()
        rows.append(PreviewRow(problem=record["question"]["problem"], summary=summary, line=line))
    return Preview(count=count, rows=rows)


def prm800k_download(*, data: DataFilters, options: ExportFilters) -> StreamingHttpResponse:
    return export.prm800k_response(filters=options, within=filters.labels(filters=data))
