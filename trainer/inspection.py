"""Reads for the inspection pages: the PRM's step scores beside the human ratings (the
disagreements), one solution inspected step by step with every label source (human ratings,
rollout estimates, the newest judge run's rating and reason, the PRM's score) and the consensus
verdict training with `label_source: consensus` would use, and how rollout labels agree with
human ones."""

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

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

from labeling.agreement import labels_of, training_label
from labeling.judge_display import JudgeShown
from labeling.models import (
    Labeler,
    LabelingSession,
    Solution,
    StepRating,
)
from trainer.models import ModelVersion, RolloutLabel, SamplingRun
from trainer.sampling import rollout_agreement as human_vs_rollout
from trainer.sampling.rollouts import rollout_labels_of
from trainer.training import consensus
from trainer.training.selectors import active_model_version


def neutral_as_positive(*, model_version: ModelVersion | None) -> bool:
    """Whether this version's step score p(step ok) counts a 0 ("okay") step as ok.

    It is the `neutral_as_positive` parameter of the run that trained the version; imported
    checkpoints (no run) use the default, neutral as positive.
    """
    run = model_version.training_run if model_version is not None else None
    return bool((run.params if run is not None else {}).get("neutral_as_positive", True))


def step_disagreement(*, prm_score: float, rating: int, neutral_as_positive: bool) -> float:
    """|PRM step score - the human rating read as p(step ok)|, from 0 (agree) to 1.

    The PRM's step score estimates p(step ok), so a rating is mapped onto the same scale:
    +1 is 1, -1 is 0, and 0 is 1 or 0 as the scoring version counts neutral steps
    (`neutral_as_positive`). `disagreements` computes the same number in SQL.
    """
    target = 1.0 if rating == 1 or (rating == 0 and neutral_as_positive) else 0.0
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
    neutral = 1.0 if neutral_as_positive(model_version=model_version) else 0.0
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
class RolloutEstimate:
    """One sampling run's rollout label of a step, and how it compares with the human ratings
    (`agrees`: every rating gives the hard estimate's verdict; None without ratings)."""

    run_id: int
    label: RolloutLabel | None
    agrees: bool | None = None
    soft_error: float | None = None


@dataclass
class InspectedStep:
    index: int
    text: str
    prm_score: float | None
    ratings: list[HumanRating] = field(default_factory=list)
    rollouts: list[RolloutEstimate] = field(default_factory=list)  # one per inspected run
    judge: JudgeShown | None = None  # the newest judge run's label of the step
    verdict: consensus.Verdict | None = None

    @property
    def worst(self) -> float | None:
        gaps = [r.disagreement for r in self.ratings if r.disagreement is not None]
        return max(gaps) if gaps else None


@dataclass
class RolloutRunOfSolution:
    """A sampling run that labeled the solution by rollouts, with its provenance and its
    agreement with the solution's human labels."""

    run: SamplingRun
    agreement: human_vs_rollout.SourceAgreement
    url: str | None = None  # the run's page, where one is routed (the view fills it in)


@dataclass
class SolutionInspection:
    solution: Solution
    steps: list[InspectedStep]
    sessions: int
    active_version: ModelVersion | None
    neutral_as_positive: bool
    rollout_runs: list[RolloutRunOfSolution] = field(default_factory=list)
    # The consensus verdicts' sources, and the runs they read (each source's newest).
    consensus_sources: tuple[str, ...] = ()
    consensus_rollout_run: int | None = None
    judge_run: int | None = None

    @property
    def scored_by_active(self) -> bool:
        version = self.active_version
        return version is not None and self.solution.prm_model_version_id == version.pk

    @property
    def worst(self) -> float | None:
        gaps = [step.worst for step in self.steps if step.worst is not None]
        return max(gaps) if gaps else None


def solution_inspection(
    *, solution_id: int, sources: tuple[str, ...] = consensus.DEFAULT_SOURCES
) -> SolutionInspection:
    """One solution's steps, each with its PRM step score, every submitted human rating, the
    rollout estimates of each sampling run, the newest judge run's label, and the verdict of
    the consensus of `sources`.

    The scores are whatever `Solution.prm_step_scores` holds (`scored_by_active` tells
    whether the active version wrote them; activation rescores every solution; the consensus
    reads the active version's only). Raises Solution.DoesNotExist.
    """
    solution = Solution.objects.select_related("problem", "prm_model_version__training_run").get(
        pk=solution_id
    )
    scores = solution.prm_step_scores if isinstance(solution.prm_step_scores, list) else []
    neutral = neutral_as_positive(model_version=solution.prm_model_version)
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
                    prm_score=step.prm_score, rating=rating.rating, neutral_as_positive=neutral
                ),
            )
        )
    submitted = LabelingSession.objects.filter(solution=solution, submitted_at__isnull=False)
    inspected = SolutionInspection(
        solution=solution,
        steps=steps,
        sessions=submitted.count(),
        active_version=active_model_version(),
        neutral_as_positive=neutral,
        rollout_runs=_rollout_columns(solution=solution, steps=steps, submitted=submitted),
        consensus_sources=sources,
    )
    _consensus_columns(inspected, submitted=submitted)
    return inspected


def _consensus_columns(inspected: SolutionInspection, *, submitted: QuerySet) -> None:
    """Each step's newest judge label and its consensus verdict (`trainer.training.consensus`,
    the rule training uses), the human side being the label training uses of the solution."""
    solution = inspected.solution
    labels = labels_of(submitted).get(solution.pk, [])
    human = training_label(labels, gold=solution.gold_ratings).ratings if labels else {}
    machine = consensus.machine_labels(solution_ids=[solution.pk])[solution.pk]
    inspected.consensus_rollout_run = machine.runs.get("rollout")
    inspected.judge_run = machine.runs.get("judge")
    verdicts = consensus.solution_verdicts(
        steps=len(inspected.steps),
        human=human,
        machine=machine,
        sources=inspected.consensus_sources,
    )
    for step, verdict in zip(inspected.steps, verdicts, strict=True):
        step.judge = machine.of("judge").get(step.index)
        step.verdict = verdict


def _rollout_columns(
    *, solution: Solution, steps: list[InspectedStep], submitted: QuerySet
) -> list[RolloutRunOfSolution]:
    """Each sampling run's rollout labels of the solution beside its steps, newest run first."""
    by_run = rollout_labels_of([solution.pk]).get(solution.pk, {})
    if not by_run:
        return []
    human = labels_of(submitted).get(solution.pk, [])
    runs = SamplingRun.objects.in_bulk(list(by_run))
    columns = []
    for run_id, labels in by_run.items():
        for step in steps:
            label = labels.get(step.index)
            estimate = RolloutEstimate(run_id=run_id, label=label)
            if label is not None and step.ratings:
                estimate.agrees = all(
                    human_vs_rollout.step_agrees(rating=r.rating, reached=label.reached)
                    for r in step.ratings
                )
                estimate.soft_error = sum(
                    human_vs_rollout.soft_error(
                        rating=r.rating, reached=label.reached, rollouts=label.rollouts
                    )
                    for r in step.ratings
                ) / len(step.ratings)
            step.rollouts.append(estimate)
        agreement = human_vs_rollout.compare(
            human=human,
            rollout={i: (label.reached, label.rollouts) for i, label in labels.items()},
            steps=len(steps),
        )
        columns.append(RolloutRunOfSolution(run=runs[run_id], agreement=agreement))
    return columns


@dataclass
class RolloutRunAgreement:
    run: SamplingRun
    labeled: int  # solutions the run labeled
    agreement: human_vs_rollout.SourceAgreement
    url: str | None = None


ROLLOUT_AGREEMENT_RUNS = 20


def rollout_agreement(*, limit: int = ROLLOUT_AGREEMENT_RUNS) -> list[RolloutRunAgreement]:
    """Per rollout sampling run (the `limit` newest that stored labels), how its labels agree
    with the human labels of the same solutions (`trainer.sampling.rollout_agreement`), and
    overall."""
    runs = list(
        SamplingRun.objects.filter(rollout_labels__isnull=False).distinct().order_by("-pk")[:limit]
    )
    rows = []
    for run in runs:
        solution_ids = list(
            RolloutLabel.objects.filter(sampling_run=run)
            .order_by()
            .values_list("solution_id", flat=True)
            .distinct()
        )
        total = human_vs_rollout.SourceAgreement()
        human = labels_of(
            LabelingSession.objects.filter(solution_id__in=solution_ids, submitted_at__isnull=False)
        )
        labels = rollout_labels_of(human.keys(), run=run)
        lengths = dict(Solution.objects.filter(pk__in=human.keys()).values_list("pk", "steps"))
        for solution_id, by_run in labels.items():
            total += human_vs_rollout.compare(
                human=human[solution_id],
                rollout={i: (label.reached, label.rollouts) for i, label in by_run[run.pk].items()},
                steps=len(lengths.get(solution_id) or []),
            )
        rows.append(RolloutRunAgreement(run=run, labeled=len(solution_ids), agreement=total))
    return rows
