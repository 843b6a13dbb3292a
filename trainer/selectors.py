"""Reads for the researcher pages and the retrain schedule."""

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import NotSupportedError
from django.db.models import (
    Case,
    Count,
    F,
    FloatField,
    Func,
    Max,
    QuerySet,
    Sum,
    Value,
    When,
)
from django.db.models.functions import Abs

from labeling.models import Labeler, LabelingSession, Solution, StepRating
from trainer.models import ModelVersion, TrainingRun


def submitted_sessions_since(*, since: datetime | None) -> int:
    sessions = LabelingSession.objects.filter(submitted_at__isnull=False)
    if since is not None:
        sessions = sessions.filter(submitted_at__gt=since)
    return sessions.count()


def training_runs() -> QuerySet[TrainingRun]:
    return TrainingRun.objects.select_related("triggered_by", "model_version").defer("log_tail")


def training_run(*, run_id: int) -> TrainingRun:
    return TrainingRun.objects.select_related("triggered_by", "model_version").get(pk=run_id)


def model_versions() -> QuerySet[ModelVersion]:
    return ModelVersion.objects.select_related("training_run")


def active_model_version() -> ModelVersion | None:
    return ModelVersion.objects.filter(is_active=True).first()


def key_metric(metrics: dict | None) -> float | None:
    """The held-out metric promotion compares on (PRM_PROMOTE_METRIC)."""
    return (metrics or {}).get(settings.PRM_PROMOTE_METRIC)


# --- inspection: the PRM's step scores beside the human ratings ------------------------------


def neutral_counts_as_ok(*, model_version: ModelVersion | None) -> bool:
    """Whether this version's step score p(step ok) counts a 0 ("okay") step as ok.

    It is the `neutral_as_positive` parameter of the run that trained the version; imported
    checkpoints (no run) use the default, neutral as ok.
    """
    run = model_version.training_run if model_version is not None else None
    return bool((run.params if run is not None else {}).get("neutral_as_positive", True))


def step_disagreement(*, prm_score: float, rating: int, neutral_as_ok: bool) -> float:
    """|PRM step score - the human rating read as p(step ok)|, from 0 (agree) to 1.

    The PRM's step score estimates p(step ok), so a rating is mapped onto the same scale:
    +1 is 1, -1 is 0, and 0 is 1 or 0 as the scoring version counts neutral steps
    (`neutral_counts_as_ok`). `disagreements` computes the same number in SQL.
    """
    target = 1.0 if rating == 1 or (rating == 0 and neutral_as_ok) else 0.0
    return abs(prm_score - target)


class _JSONArrayFloat(Func):
    """Element `index` (an integer expression) of a JSON array column, as a float or NULL."""

    arity = 2
    output_field = FloatField()

    def _compiled(self, compiler, connection) -> tuple[str, str, list[Any]]:
        array, index = (compiler.compile(e) for e in self.get_source_expressions())
        return array[0], index[0], [*array[1], *index[1]]

    def as_sql(self, compiler, connection, **extra_context):
        raise NotSupportedError("Disagreements are computed on PostgreSQL and SQLite only.")

    def as_postgresql(self, compiler, connection, **extra_context):
        array, index, params = self._compiled(compiler, connection)
        return f"CAST(({array} ->> {index}) AS double precision)", params

    def as_sqlite(self, compiler, connection, **extra_context):
        array, index, params = self._compiled(compiler, connection)
        return f"CAST(JSON_EXTRACT({array}, '$[' || {index} || ']') AS REAL)", params


def human_step_ratings() -> QuerySet[StepRating]:
    """Ratings of a solution's own steps (completion 0) from submitted labeling sessions."""
    return StepRating.objects.filter(
        completion_index=0, rating__isnull=False, step__session__submitted_at__isnull=False
    )


def disagreements(*, model_version: ModelVersion) -> QuerySet:
    """Solutions scored by `model_version`, those where it disagrees most with humans first.

    Every human rating of a solution's own step (submitted sessions only; alternatives are
    not scored by the PRM) is compared with the version's score of that step:
    `step_disagreement`, 0 when they agree and 1 when a step humans rated -1 scored 1.0
    (or the reverse). Per solution the rows give `worst`, the largest of these, and order
    by it: one confidently wrong step is what error analysis looks for, and a sum would let
    a long solution with many slightly-off steps outrank it. Ties go to the larger `total`
    (the sum), then to the older solution. `rated` counts the ratings compared; a step rated
    by several labelers counts once per rating. Steps the PRM did not score are skipped.

    Rows are dicts: `solution` (id), `worst`, `total`, `rated`; the work is one grouped
    query, so the list can be paginated in the database (`with_solutions` fetches a page's
    solutions).
    """
    neutral = 1.0 if neutral_counts_as_ok(model_version=model_version) else 0.0
    target = Case(
        When(rating=1, then=Value(1.0)),
        When(rating=0, then=Value(neutral)),
        default=Value(0.0),
        output_field=FloatField(),
    )
    prm = _JSONArrayFloat(F("step__session__solution__prm_step_scores"), F("step__index"))
    gap = Abs(prm - target)
    return (
        human_step_ratings()
        .filter(step__session__solution__prm_model_version=model_version)
        .alias(prm=prm)
        .filter(prm__isnull=False)
        .values(solution=F("step__session__solution"))
        .annotate(worst=Max(gap), total=Sum(gap), rated=Count("pk"))
        .order_by("-worst", "-total", "solution")
    )


@dataclass
class Disagreement:
    solution: Solution
    worst: float
    total: float
    rated: int


def with_solutions(*, rows: Iterable[dict[str, Any]]) -> list[Disagreement]:
    """A page of `disagreements` rows with their solutions (and problems), in page order."""
    rows = list(rows)
    solutions = Solution.objects.select_related("problem").in_bulk(
        [row["solution"] for row in rows]
    )
    return [
        Disagreement(
            solution=solutions[row["solution"]],
            worst=row["worst"],
            total=row["total"],
            rated=row["rated"],
        )
        for row in rows
        if row["solution"] in solutions
    ]


@dataclass
class HumanRating:
    rating: int
    flagged: bool | None
    labeler: Labeler
    session_id: int
    disagreement: float | None = None


@dataclass
class InspectedStep:
    index: int
    text: str
    prm_score: float | None
    ratings: list[HumanRating] = field(default_factory=list)

    @property
    def worst(self) -> float | None:
        gaps = [r.disagreement for r in self.ratings if r.disagreement is not None]
        return max(gaps) if gaps else None


@dataclass
class SolutionInspection:
    solution: Solution
    steps: list[InspectedStep]
    sessions: int
    active_version: ModelVersion | None
    neutral_as_ok: bool

    @property
    def scored_by_active(self) -> bool:
        version = self.active_version
        return version is not None and self.solution.prm_model_version_id == version.pk

    @property
    def worst(self) -> float | None:
        gaps = [step.worst for step in self.steps if step.worst is not None]
        return max(gaps) if gaps else None


def solution_inspection(*, solution_id: int) -> SolutionInspection:
    """One solution's steps, each with its PRM step score and every submitted human rating.

    The scores are whatever `Solution.prm_step_scores` holds (`scored_by_active` tells
    whether the active version wrote them; activation rescores every solution). Raises
    Solution.DoesNotExist.
    """
    solution = Solution.objects.select_related("problem", "prm_model_version__training_run").get(
        pk=solution_id
    )
    scores = solution.prm_step_scores if isinstance(solution.prm_step_scores, list) else []
    neutral_as_ok = neutral_counts_as_ok(model_version=solution.prm_model_version)
    steps = [
        InspectedStep(
            index=index,
            text=text,
            prm_score=scores[index] if index < len(scores) else None,
        )
        for index, text in enumerate(solution.steps)
    ]
    ratings = (
        human_step_ratings()
        .filter(step__session__solution=solution)
        .select_related("step__session__labeler")
        .order_by("step__index", "step__session_id")
    )
    for rating in ratings:
        if rating.step.index >= len(steps):
            continue
        step = steps[rating.step.index]
        step.ratings.append(
            HumanRating(
                rating=rating.rating,
                flagged=rating.flagged,
                labeler=rating.step.session.labeler,
                session_id=rating.step.session_id,
                disagreement=None
                if step.prm_score is None
                else step_disagreement(
                    prm_score=step.prm_score, rating=rating.rating, neutral_as_ok=neutral_as_ok
                ),
            )
        )
    sessions = LabelingSession.objects.filter(solution=solution, submitted_at__isnull=False).count()
    return SolutionInspection(
        solution=solution,
        steps=steps,
        sessions=sessions,
        active_version=active_model_version(),
        neutral_as_ok=neutral_as_ok,
    )
