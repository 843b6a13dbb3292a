"""Reads of judge labels that other rooms ask for through labeling's registries."""

from collections.abc import Iterable

from django.db.models import OuterRef, QuerySet, Subquery

from labeling.judge_display import JudgeShown
from trainer.judging.models import JudgeLabel

CHUNK = 500  # solutions read at once


def judged_solution_ids() -> QuerySet:
    """A query of the ids of the solutions some judge run labeled (for `__in` filters)."""
    return JudgeLabel.objects.values("solution_id")


def newest_judge_labels(
    *, solution_ids: Iterable[int], run_id: int | None = None
) -> dict[int, dict[int, JudgeShown]]:
    """Solution id -> step index -> the label of the newest judge run that labeled the
    solution (runs are numbered in the order they were made), or of run `run_id`. A newer run
    that did not label a solution (its reply unreadable, or the solution not in it) leaves the
    older labels in force. A first_error run rates the steps up to its first -1 and gives no
    reasons but that."""
    ids, found = list(solution_ids), {}
    newest = (
        JudgeLabel.objects.filter(solution_id=OuterRef("solution_id"))
        .order_by("-run_id")
        .values("run_id")[:1]
    )
    for start in range(0, len(ids), CHUNK):
        rows = (
            JudgeLabel.objects.filter(
                solution_id__in=ids[start : start + CHUNK],
                run_id=Subquery(newest) if run_id is None else run_id,
            )
            .order_by()
            .values_list("solution_id", "index", "rating", "reason", "run_id")
        )
        for solution_id, index, rating, reason, run_id in rows:
            found.setdefault(solution_id, {})[index] = JudgeShown(
                rating=rating, reason=reason, run_id=run_id
            )
    return found
