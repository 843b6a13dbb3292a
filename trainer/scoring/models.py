"""Scoring chunks: the ranges of solutions a model version scores (a table of the trainer app)."""

from django.db import models
from django.db.models import F, Q

from core.jobs import LIVE, Job, status_constraint
from trainer.training.models import ModelVersion


class ScoringChunk(Job):
    """One range of solution ids that a model version scores in one transaction.

    The scoring of a pool is the sum of its chunks: any number of workers claim chunks (a
    locked row skipped by the others), each chunk's scores and its done mark are committed
    together, and a chunk whose worker died (its heartbeat went stale) is claimed again.
    Ranges of one version never overlap (`trainer.scoring.chunks.plan_scoring` plans them under a
    lock on the version); scoring a range writes only what lacks the version's scores, so a
    chunk is idempotent. A job (`core.jobs`) that is queued again when its worker dies;
    `started_at` is its latest claim, and nobody requests it (the scoring does).
    """

    model_version = models.ForeignKey(
        ModelVersion, on_delete=models.CASCADE, related_name="scoring_chunks"
    )
    first_solution_id = models.BigIntegerField()
    last_solution_id = models.BigIntegerField(help_text="Inclusive.")
    solutions = models.PositiveIntegerField(
        help_text="Solutions of the range that lacked the version's scores when planned."
    )
    scored = models.PositiveIntegerField(default=0, help_text="Solutions the chunk wrote.")
    # Each claim counts: a chunk done at its first attempt was scored exactly once, and a
    # worker whose chunk was taken over recognises that its claim is no longer the current one.
    attempts = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["model_version", "first_solution_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["model_version", "first_solution_id"], name="one_chunk_per_first_solution"
            ),
            status_constraint(name="scoring_chunk_status_valid"),
            models.CheckConstraint(
                condition=Q(first_solution_id__lte=F("last_solution_id")),
                name="scoring_chunk_range_ordered",
            ),
        ]
        indexes = [
            # Claiming reads the chunks of one version still to do, lowest range first.
            models.Index(
                fields=["model_version", "first_solution_id"],
                condition=Q(status__in=LIVE),
                name="scoring_chunk_todo",
            )
        ]

    def __str__(self) -> str:
        return (
            f"chunk {self.first_solution_id}-{self.last_solution_id} of model version "
            f"{self.model_version_id} ({self.status})"
        )
