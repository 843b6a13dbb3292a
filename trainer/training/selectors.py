"""Reads of training: runs, model versions, the active version, the labels submitted since
the last snapshot (the retrain schedule) and the metric promotion compares on."""

from datetime import datetime

from django.conf import settings
from django.db.models import (
    QuerySet,
)

from core.errors import Conflict
from labeling.models import (
    LabelingSession,
)
from trainer.training.models import ModelVersion, TrainingRun


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


def key_metric(metrics: dict | None) -> float | None:
    """The held-out metric promotion compares on (PRM_PROMOTE_METRIC)."""
    return (metrics or {}).get(settings.PRM_PROMOTE_METRIC)
