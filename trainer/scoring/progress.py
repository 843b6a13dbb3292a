"""How far a model version's scoring has come: its chunks, and the pool's solutions scored."""

from dataclasses import dataclass

from django.db.models import (
    Count,
    Q,
    Sum,
)

from labeling.models import (
    Solution,
)
from trainer.scoring.models import ScoringChunk
from trainer.training.models import ModelVersion


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
