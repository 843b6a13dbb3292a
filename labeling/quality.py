"""Quality control: gold labels, labelers' agreement with them, throughput, deactivation.

Its own module because it is one topic read top to bottom; writes come first (the
services of quality control), then reads (its selectors). Every function is keyword-only.

Agreement is measured only on submitted sessions whose solution has gold ratings:
- *exact*: the labeler's first -1 is at the same step as gold's, or neither has a -1.
  Only complete labels count (ended `found_error` or `solution`): a label given up on
  half-way says nothing about where the first error is.
- *per step*: of the steps both the labeler and gold rated, the share rated the same.
  Every submitted session counts here, including given-up ones.
"""

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, time
from uuid import UUID

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Count, Max, Q, QuerySet, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone

from core.errors import Conflict
from labeling import tallies
from labeling.models import (
    FinishReason,
    Guideline,
    Labeler,
    LabelingSession,
    Solution,
    StepRating,
)

COMPLETE = (FinishReason.FOUND_ERROR, FinishReason.SOLUTION)
QUALITY_CONTROL = "quality_control"
SCREENING = "screening"


class QualityRefused(Conflict):
    """A quality-control request that the current state does not allow; the message says why."""


# ---------------------------------------------------------------------------------------------
# Writes


def mark_solutions(*, solutions: QuerySet[Solution], role: str | None) -> int:
    """Serve the solutions to every labeler as quality control or screening, or neither.

    The two are exclusive: screening is for new labelers, quality control for everyone.
    """
    if role not in (QUALITY_CONTROL, SCREENING, None):
        raise ValueError(f"Unknown role {role!r}.")
    return solutions.update(
        is_quality_control=role == QUALITY_CONTROL, is_screening=role == SCREENING
    )


def gold_from_session(*, session: LabelingSession) -> list[int]:
    """A submitted complete label as gold: its step ratings up to and including the first -1."""
    if session.submitted_at is None or session.finish_reason not in COMPLETE:
        raise QualityRefused(
            f"Session {session.pk} is not a complete label (it must end with an error "
            "found or the solution reached)."
        )
    rated = dict(
        StepRating.objects.filter(
            step__session=session, completion_index=0, rating__isnull=False
        ).values_list("step__index", "rating")
    )
    gold = []
    for index in range(len(rated)):
        if index not in rated:
            raise QualityRefused(f"Session {session.pk} has no rating for step {index + 1}.")
        gold.append(rated[index])
        if rated[index] == -1:
            break
    if not gold or (gold[-1] != -1 and len(gold) != len(session.solution.steps)):
        raise QualityRefused(f"Session {session.pk} does not rate every step.")
    return gold


@dataclass
class GoldResult:
    updated: list[int] = field(default_factory=list)
    skipped: dict[int, str] = field(default_factory=dict)  # solution id -> why


def use_ratings_as_gold(*, solutions: QuerySet[Solution], labeler: Labeler) -> GoldResult:
    """Copy the labeler's own latest submitted label of each solution into its gold ratings."""
    result = GoldResult()
    with transaction.atomic():
        # Only the solutions locked: the admin's list joins their (nullable) generation.
        for solution in solutions.select_for_update(of=("self",)).order_by("pk"):
            session = (
                LabelingSession.objects.filter(
                    labeler=labeler, solution=solution, submitted_at__isnull=False
                )
                .select_related("solution")
                .order_by("-submitted_at", "-pk")
                .first()
            )
            if session is None:
                result.skipped[solution.pk] = "you have not submitted a label for it"
                continue
            try:
                solution.gold_ratings = gold_from_session(session=session)
            except QualityRefused as exc:
                result.skipped[solution.pk] = str(exc)
                continue
            solution.save(update_fields=["gold_ratings"])
            result.updated.append(solution.pk)
    return result


def set_labeler_active(
    *, labeler: Labeler, active: bool, by: AbstractBaseUser, now: datetime | None = None
) -> Labeler:
    """Deactivate (or reactivate) a labeler. A deactivated labeler cannot log in or get sessions.

    Deactivation also ends the labeler's open sessions, so their solutions go back to the
    queue at once instead of waiting for the lease to run out.
    """
    now = now or timezone.now()
    if not active and labeler.user_id == by.pk:
        raise QualityRefused("You cannot deactivate yourself.")
    with transaction.atomic():
        user = labeler.user
        user.is_active = active
        user.save(update_fields=["is_active"])
        if not active:
            LabelingSession.objects.filter(
                labeler=labeler, submitted_at__isnull=True, abandoned_at__isnull=True
            ).update(abandoned_at=now)
    return labeler


# The demo's shipped solutions know their correct ratings; a few serve as quality control
# (one of each kind, and a second wrong answer) and two as screening questions.
DEMO_QC_KINDS = ("correct", "wrong_answer", "wrong_step_right_answer", "wrong_answer")
DEMO_SCREENING_KINDS = ("wrong_step_right_answer", "correct")


def mark_demo_quality_control() -> tuple[int, int]:
    """Give demo solutions gold and the QC/screening flags; return (changed, unchanged)."""
    wanted = [(QUALITY_CONTROL, kind) for kind in DEMO_QC_KINDS] + [
        (SCREENING, kind) for kind in DEMO_SCREENING_KINDS
    ]
    used_problems: set[int] = set()
    changed = unchanged = 0
    for solution in Solution.objects.filter(source="demo").order_by("pk"):
        if not wanted:
            break
        kind = solution.meta.get("kind")
        match = next((w for w in wanted if w[1] == kind), None)
        if match is None or solution.problem_id in used_problems:
            continue
        wanted.remove(match)
        used_problems.add(solution.problem_id)
        values = {
            "gold_ratings": solution.meta["gold_ratings"],
            "is_quality_control": match[0] == QUALITY_CONTROL,
            "is_screening": match[0] == SCREENING,
        }
        if all(getattr(solution, k) == v for k, v in values.items()):
            unchanged += 1
            continue
        Solution.objects.filter(pk=solution.pk).update(**values)
        changed += 1
    return changed, unchanged


# ---------------------------------------------------------------------------------------------
# Reads


def first_error(ratings: dict[int, int] | list[int]) -> int | None:
    """Index of the first -1 step, or None when no step is rated -1."""
    items = enumerate(ratings) if isinstance(ratings, list) else ratings.items()
    errors = [index for index, rating in items if rating == -1]
    return min(errors) if errors else None


@dataclass
class Agreement:
    exact_total: int = 0  # complete labels of gold solutions
    exact_agreed: int = 0
    steps_total: int = 0  # steps rated by both the labeler and gold
    steps_agreed: int = 0
    sessions: int = 0  # submitted sessions of gold solutions

    @property
    def exact(self) -> float | None:
        return self.exact_agreed / self.exact_total if self.exact_total else None

    @property
    def per_step(self) -> float | None:
        return self.steps_agreed / self.steps_total if self.steps_total else None


def _first_submitted(history: list | None) -> tuple[str, dict[int, int]] | None:
    """(finish reason, step index -> rating) of a corrected label as first submitted, from
    the versions `labeling.services.corrections` keeps; None for a label never reopened."""
    first = history[0].get("previous") if history else None
    if first is None:
        return None
    rated = {
        step["index"]: rating["rating"]
        for step in first["steps"]
        for rating in step["ratings"]
        if rating["completion_index"] == 0 and rating["rating"] is not None
    }
    return first["finish_reason"], rated


def gold_agreement_by_labeler(
    *, labeler_ids: list[int] | None = None, submitted_before: datetime | None = None
) -> dict[int, Agreement]:
    """Labeler id -> agreement with gold, for labelers with at least one gold session.

    A corrected label counts as first submitted: a labeler may correct any label (which ones
    are gold stays blind), and a second try would measure nothing. `submitted_before`: only
    the labels submitted before then (a labeler's own figure, so that it does not move the
    moment a gold label is submitted and give it away)."""
    sessions = LabelingSession.objects.filter(
        submitted_at__isnull=False, solution__gold_ratings__isnull=False
    )
    if labeler_ids is not None:
        sessions = sessions.filter(labeler_id__in=labeler_ids)
    if submitted_before is not None:
        sessions = sessions.filter(submitted_at__lt=submitted_before)
    rated: dict[int, dict[int, int]] = defaultdict(dict)
    for session_id, index, rating in StepRating.objects.filter(
        step__session__in=sessions, completion_index=0, rating__isnull=False
    ).values_list("step__session_id", "step__index", "rating"):
        rated[session_id][index] = rating

    result: dict[int, Agreement] = defaultdict(Agreement)
    # Only the corrections' history of `extra`: an imported label's extra holds its raw line.
    for session_id, labeler_id, finish_reason, gold, history in sessions.values_list(
        "pk", "labeler_id", "finish_reason", "solution__gold_ratings", "extra__corrections"
    ):
        agreement = result[labeler_id]
        agreement.sessions += 1
        mine = rated.get(session_id, {})
        if first := _first_submitted(history):
            finish_reason, mine = first
        if finish_reason in COMPLETE:
            agreement.exact_total += 1
            agreement.exact_agreed += first_error(mine) == first_error(gold)
        for index, rating in mine.items():
            if index < len(gold):
                agreement.steps_total += 1
                agreement.steps_agreed += rating == gold[index]
    return dict(result)


# A rate per hour says something only after this much time on task: 3 solutions in the first
# 6 s would otherwise read as 1,800 an hour.
RATE_MIN_TIME_MS = 10 * 60_000


@dataclass
class LabelerFigures:
    labeler_id: int
    uuid: UUID
    username: str
    is_active: bool
    solutions: int = 0  # submitted sessions
    steps: int = 0  # steps rated in them
    time_ms: int = 0  # time on task, summed over them
    days_active: int = 0  # days with at least one submission
    last_active: datetime | None = None
    agreement: Agreement = field(default_factory=Agreement)

    @property
    def hours(self) -> float:
        return self.time_ms / 3_600_000

    @property
    def has_rates(self) -> bool:
        return self.time_ms >= RATE_MIN_TIME_MS

    @property
    def solutions_per_hour(self) -> float | None:
        return self.solutions / self.hours if self.has_rates else None

    @property
    def steps_per_hour(self) -> float | None:
        return self.steps / self.hours if self.has_rates else None

    @property
    def solutions_per_day(self) -> float | None:
        return self.solutions / self.days_active if self.days_active else None


def labeler_figures(
    *, labeler_ids: list[int] | None = None, gold_submitted_before: datetime | None = None
) -> list[LabelerFigures]:
    """Counts, agreement with gold and throughput of each labeler, in UUID order; agreement
    over the gold labels submitted before `gold_submitted_before` when given.

    Never in username order: a list of pseudonyms sorted by name would tell whoever knows the
    usernames which UUID is whose.
    """
    labelers = Labeler.objects.select_related("user").order_by("uuid")
    sessions = LabelingSession.objects.all()
    if labeler_ids is not None:
        labelers = labelers.filter(pk__in=labeler_ids)
        sessions = sessions.filter(labeler_id__in=labeler_ids)

    figures = {
        lab.pk: LabelerFigures(
            labeler_id=lab.pk,
            uuid=lab.uuid,
            username=lab.user.get_username(),
            is_active=lab.user.is_active,
        )
        for lab in labelers
    }
    # One scan of an index of the labels (`session_labeler_figures`), grouped by labeler and
    # day submitted (none for open ones), rolled up here: a distinct count of days inside a
    # per-labeler query sorted every label (88 ms at 100,000 labels, against 39 for this).
    submitted = Q(submitted_at__isnull=False)
    for row in (
        sessions.order_by()
        .values("labeler_id", day=TruncDate("submitted_at"))
        .annotate(
            solutions=Count("submitted_at"),  # not the id: the index holds what is read
            time_ms=Sum("total_time", filter=submitted),
            last_submitted=Max("submitted_at"),
            last_activity=Max("last_activity_at"),
        )
    ):
        f = figures.get(row["labeler_id"])
        if f is None:
            continue
        f.solutions += row["solutions"]
        f.time_ms += row["time_ms"] or 0
        f.days_active += row["day"] is not None
        moments = [m for m in (f.last_active, row["last_submitted"], row["last_activity"]) if m]
        f.last_active = max(moments, default=None)
    # Added up from each label's kept counts, not from the million ratings (labeling/tallies.py).
    for labeler_id, steps in tallies.steps_by_labeler(labeler_ids=labeler_ids).items():
        if labeler_id in figures:
            figures[labeler_id].steps = steps
    agreements = gold_agreement_by_labeler(
        labeler_ids=labeler_ids, submitted_before=gold_submitted_before
    )
    for labeler_id, agreement in agreements.items():
        if labeler_id in figures:
            figures[labeler_id].agreement = agreement
    return list(figures.values())


@dataclass
class Today:
    solutions: int  # finished (submitted) today
    steps: int  # rated in the labels submitted today: counted as "All my labels" counts them
    time_ms: int  # time on task of the sessions worked on today
    open_steps: int = 0  # rated today in a label not yet submitted


def start_of_today(now: datetime | None = None) -> datetime:
    """Midnight today in the site's time zone."""
    now = now or timezone.now()
    return timezone.make_aware(datetime.combine(timezone.localdate(now), time.min))


def today_progress(*, labeler: Labeler, now: datetime | None = None) -> Today:
    """The labeler's work today (in the site's time zone).

    Ratings carry no timestamp of their own: a session counts for today when it was
    submitted today or is still open and was last touched today.
    """
    start = start_of_today(now)
    today = LabelingSession.objects.filter(labeler=labeler).filter(
        Q(submitted_at__gte=start)
        | Q(submitted_at__isnull=True, abandoned_at__isnull=True, last_activity_at__gte=start)
    )
    totals = today.aggregate(
        solutions=Count("pk", filter=Q(submitted_at__isnull=False)), time_ms=Sum("total_time")
    )
    rated = StepRating.objects.filter(
        step__session__in=today, completion_index=0, rating__isnull=False
    ).aggregate(
        submitted=Count("pk", filter=Q(step__session__submitted_at__isnull=False)),
        open=Count("pk", filter=Q(step__session__submitted_at__isnull=True)),
    )
    return Today(
        solutions=totals["solutions"],
        steps=rated["submitted"],
        time_ms=totals["time_ms"] or 0,
        open_steps=rated["open"],
    )


def current_guideline() -> Guideline | None:
    """The labeling guideline edited most recently."""
    return Guideline.objects.order_by("-updated_at", "-pk").first()
