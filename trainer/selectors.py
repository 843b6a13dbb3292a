"""Reads for the researcher pages and the retrain schedule: training runs, model versions, the
active version and scoring progress. The inspection pages read from `trainer/inspection.py`,
the generation pages from `trainer/selection/progress.py`."""

from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db.models import (
    Count,
    Q,
    QuerySet,
    Sum,
)

from core.errors import Conflict
from labeling.models import (
    LabelingSession,
    Solution,
)
from trainer.models import ModelVersion, ScoringChunk, TrainingRun


def submitted_sessions_since(*, since: datetime | None) -> int:
    sessions = LabelingSession.objects.filter(submitted_at__isnull=False)
    if since is not None:
        sessions = sessions.filter(submitted_at__gt=since)
    return sessions.count()


def training_runs() -> QuerySet[TrainingRun]:
    return TrainingRun.objects.select_related("requested_by", "model_version").defer("log_tail")


def training_run(*, run_id: int) -> TrainingRun:
    return TrainingRun.objects.select_related("requested_by", "model_version").get(pk=run_id)


def model_versions() -> QuerySet[ModelVersion]:
    return ModelVersion.objects.select_related("training_run")


class NoActiveModelVersion(Conflict):
    """The request needs an active model version (to score the pool with) and none is."""


def active_model_version() -> ModelVersion | None:
    """The version that scores and selects; callers that need one raise NoActiveModelVersion."""
    return ModelVersion.objects.filter(is_active=True).first()


@dataclass(frozen=True)
class ChunkProgress:
    """The version's scoring chunks (`trainer.scoring.chunks`): the scoring's progress is their
    sum."""

    chunks: int
    done: int
    solutions: int  # planned: what lacked the version's scores when the chunks were cut
    scored: int  # written by the chunks that are done
    running: list[tuple[str, int]]  # (worker, chunks it is scoring now)


def scoring_chunks(*, model_version: ModelVersion | int) -> ChunkProgress:
    chunks = ScoringChunk.objects.filter(model_version=model_version)
    totals = chunks.aggregate(
        chunks=Count("pk"),
        done=Count("pk", filter=Q(status=ScoringChunk.Status.SUCCEEDED)),
        solutions=Sum("solutions"),
        scored=Sum("scored"),
    )
    running = (
        chunks.filter(status=ScoringChunk.Status.RUNNING)
        .values("worker_hostname")
        .annotate(n=Count("pk"))
        .order_by("worker_hostname")
    )
    return ChunkProgress(
        chunks=totals["chunks"],
        done=totals["done"],
        solutions=totals["solutions"] or 0,
        scored=totals["scored"] or 0,
        running=[(row["worker_hostname"], row["n"]) for row in running],
    )


@dataclass(frozen=True)
class ScoringProgress:
    scored: int  # solutions that carry this version's scores
    total: int
    chunks: ChunkProgress

    @property
    def done(self) -> bool:
        return self.scored >= self.total

    @property
    def percent(self) -> int:
        return 100 if not self.total else min(100, self.scored * 100 // self.total)


def scoring_progress(*, model_version: ModelVersion) -> ScoringProgress:
    """How far the pool is rescored with this version: each chunk commits its solutions' scores
    with its done mark (`trainer.scoring.chunks`), so the count moves chunk by chunk."""
    return ScoringProgress(
        scored=Solution.objects.filter(prm_model_version=model_version).count(),
        total=Solution.objects.count(),
        chunks=scoring_chunks(model_version=model_version),
    )


def key_metric(metrics: dict | None) -> float | None:
    """The held-out metric promotion compares on (PRM_PROMOTE_METRIC)."""
    return (metrics or {}).get(settings.PRM_PROMOTE_METRIC)
