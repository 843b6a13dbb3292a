"""Hand-judged answer pairs, and the grader measured on them.

A corpus is a TSV (`answer`, `ground_truth`, `verdict`, `category`; the project's own under
`labeling/tests/fixtures/`) or the JSONL of the answer-review export (`/api/answer-reviews/
export/`), so every answer a person decides grows the corpus the grader is measured on:
`manage.py measure_grading reviewed.jsonl`. The figures are the ones docs/import-export.md
reports: accuracy on the pairs the grader decides, false accepts, and the unsure share.
"""

import csv
import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from labeling.grading.compare import grade
from labeling.grading.verdict import Verdict

# A person's verdict as corpora write it: the TSVs say `different`, the review export
# `not_equal`.
_SAME = {"equal": True, "different": False, "not_equal": False, "not equal": False}


@dataclass(frozen=True)
class JudgedPair:
    answer: str
    ground_truth: str
    equal: bool  # what the person said
    category: str


def read_pairs(path: Path) -> list[JudgedPair]:
    """The pairs of a TSV corpus or a JSONL review export; ValueError names a bad line."""
    if path.suffix == ".jsonl":
        pairs = []
        with path.open(encoding="utf-8") as lines:
            for number, line in enumerate(lines, 1):
                if line.strip():
                    pairs.append(_pair(json.loads(line), "review", f"{path}:{number}"))
        return pairs
    with path.open(newline="", encoding="utf-8") as lines:
        rows = csv.DictReader(lines, delimiter="\t", quoting=csv.QUOTE_NONE)
        return [_pair(row, "", f"{path}:{n}") for n, row in enumerate(rows, 2)]


def _pair(row: dict, category: str, where: str) -> JudgedPair:
    verdict = str(row.get("verdict", "")).lower()
    if verdict not in _SAME or not isinstance(row.get("answer"), str):
        raise ValueError(f"{where}: expected an answer, a ground truth and a verdict of "
                         f"{sorted(_SAME)}, got {row!r:.200}")  # fmt: skip
    return JudgedPair(
        answer=row["answer"],
        ground_truth=str(row.get("ground_truth", "")),
        equal=_SAME[verdict],
        category=row.get("category") or category or "uncategorised",
    )


@dataclass
class Measure:
    pairs: int = 0
    decided: int = 0
    right: int = 0
    false_accepts: list[str] = field(default_factory=list)
    missed: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    unsure: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    @property
    def accuracy(self) -> float:
        """Right verdicts among the decided (equal or not equal) ones."""
        return self.right / self.decided if self.decided else 1.0

    @property
    def unsure_share(self) -> float:
        return 1 - self.decided / self.pairs if self.pairs else 0.0

    def report(self, name: str) -> str:
        lines = [
            f"{name}: {self.pairs} pairs; on the {self.decided} decided, accuracy "
            f"{self.accuracy:.2%}, {len(self.false_accepts)} false accepts; unsure "
            f"{self.unsure_share:.1%}"
        ]
        for label, by_category in (("missed", self.missed), ("unsure", self.unsure)):
            for category, pairs in sorted(by_category.items()):
                lines.append(f"  {category}: {len(pairs)} {label}: {'; '.join(pairs)}")
        return "\n".join(lines)


def measure(pairs: list[JudgedPair]) -> Measure:
    result = Measure(pairs=len(pairs))
    for pair in pairs:
        verdict = grade(pair.answer, pair.ground_truth)
        shown = f"{pair.answer!r} vs {pair.ground_truth!r}"
        if verdict is Verdict.UNSURE:
            result.unsure[pair.category].append(shown)
            continue
        result.decided += 1
        if (verdict is Verdict.EQUAL) == pair.equal:
            result.right += 1
            continue
        result.missed[pair.category].append(shown)
        if verdict is Verdict.EQUAL:
            result.false_accepts.append(shown)
    return result
