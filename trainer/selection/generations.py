"""Reads for the generation pages: each generation of active learning with how far its
labeling has come, and one generation with each labeler's progress."""

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import (
    Avg,
    Count,
    Max,
    Q,
    Sum,
)

from labeling.models import (
    Generation,
    LabelingSession,
    SelectionReason,
    Solution,
)
from labeling.selectors import current_generation, has_submitted_label


@dataclass
class GenerationSummary:
    generation: Generation
    size: int = 0  # solutions in it now, quality control included
    quality_control: int = 0
    wrong_answers: int = 0  # of the batch (not QC): final answer wrong
    ungraded: int = 0  # of the batch: no readable final answer (or no ground truth) to grade
    mean_selection_score: float | None = None  # of the batch, at selection
    labeled_solutions: int = 0  # of the batch: submitted by at least one labeler
    labels: int = 0  # submitted sessions served from this generation, QC included
    by_reason: dict[str, int] = field(default_factory=dict)

    @property
    def batch(self) -> int:
        return self.size - self.quality_control

    @property
    def wrong_answer_share(self) -> float | None:
        return self.wrong_answers / self.batch if self.batch else None

    @property
    def labeled_share(self) -> float | None:
        return self.labeled_solutions / self.batch if self.batch else None


def _summaries(generations: Sequence[Generation]) -> list[GenerationSummary]:
    ids = [g.pk for g in generations]
    summaries = {g.pk: GenerationSummary(generation=g) for g in generations}
    batch = Q(is_quality_control=False)
    for row in (
        Solution.objects.filter(generation_id__in=ids)
        .values("generation_id")
        .annotate(
            size=Count("pk"),
            quality_control=Count("pk", filter=Q(is_quality_control=True)),
            wrong_answers=Count("pk", filter=batch & Q(is_correct=False)),
            ungraded=Count("pk", filter=batch & Q(is_correct__isnull=True)),
            mean_selection_score=Avg("selection_score", filter=batch),
        )
        .order_by()
    ):
        summary = summaries[row.pop("generation_id")]
        for key, value in row.items():
            setattr(summary, key, value)
    for generation_id, count in (
        Solution.objects.filter(generation_id__in=ids, is_quality_control=False)
        .filter(has_submitted_label())
        .values("generation_id")
        .annotate(count=Count("pk"))
        .values_list("generation_id", "count")
        .order_by()
    ):
        summaries[generation_id].labeled_solutions = count
    for generation_id, count in (
        LabelingSession.objects.filter(generation_id__in=ids, submitted_at__isnull=False)
        .values("generation_id")
        .annotate(count=Count("pk"))
        .values_list("generation_id", "count")
        .order_by()
    ):
        summaries[generation_id].labels = count
    for generation_id, reason, count in (
        Solution.objects.filter(generation_id__in=ids)
        .exclude(selection_reason="")
        .values("generation_id", "selection_reason")
        .annotate(count=Count("pk"))
        .values_list("generation_id", "selection_reason", "count")
        .order_by()
    ):
        summaries[generation_id].by_reason[reason] = count
    return [summaries[g.pk] for g in generations]


def generation_summaries() -> list[GenerationSummary]:
    """Every generation, newest first, with its size, composition and labels so far."""
    generations = list(Generation.objects.select_related("model_version").order_by("-number"))
    return _summaries(generations)


@dataclass
class LabelerProgress:
    uuid: str
    username: str
    submitted: int  # sessions of this generation submitted, QC included
    quality_control: int  # of which quality control
    open: int  # sessions still open (being labeled)
    time_ms: int  # time on task in submitted sessions
    last_submitted_at: datetime | None


@dataclass
class GenerationDetail:
    summary: GenerationSummary
    labelers: list[LabelerProgress]
    reason_labels: dict[str, str]
    is_current: bool


def generation_detail(*, generation_id: int) -> GenerationDetail:
    """One generation's summary and each labeler's progress on it (Generation.DoesNotExist)."""
    generation = Generation.objects.select_related("model_version").get(pk=generation_id)
    summary = _summaries([generation])[0]
    rows = (
        LabelingSession.objects.filter(generation=generation, abandoned_at__isnull=True)
        .values("labeler_id", "labeler__uuid", "labeler__user__username")
        .annotate(
            submitted=Count("pk", filter=Q(submitted_at__isnull=False)),
            quality_control=Count(
                "pk", filter=Q(submitted_at__isnull=False, is_quality_control=True)
            ),
            open=Count("pk", filter=Q(submitted_at__isnull=True)),
            time_ms=Sum("total_time", filter=Q(submitted_at__isnull=False)),
            last_submitted_at=Max("submitted_at"),
        )
        .order_by()
    )
    labelers = sorted(
        (
            LabelerProgress(
                uuid=str(row["labeler__uuid"]),
                username=row["labeler__user__username"],
                submitted=row["submitted"],
                quality_control=row["quality_control"],
                open=row["open"],
                time_ms=row["time_ms"] or 0,
                last_submitted_at=row["last_submitted_at"],
            )
            for row in rows
        ),
        key=lambda p: (-p.submitted, p.uuid),
    )
    newest = current_generation()
    return GenerationDetail(
        summary=summary,
        labelers=labelers,
        reason_labels=dict(SelectionReason.choices),
        is_current=newest is not None and newest.pk == generation.pk,
    )
