"""The annotator's workbench: queues and leases, rating, submission, and the state a page or
an API client shows (`labeling.selectors.session_state`, a read).

A session is one labeler on one solution. `next_session` serves one from named queues
(screening, quality control, the current generation, leftovers) under a lease;
`rate_step` and `submit_session` apply the labeling rules (labels stop at the first -1, whose
alternatives are rated before the session ends); `labeling.selectors.session_state` says
what is shown, what to rate next and which outcome can be submitted, for the page and the API
alike.
"""

from dataclasses import dataclass
from datetime import datetime

from django.db import IntegrityError, connection, transaction
from django.db.models import Count, F, OuterRef, Q, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from annotate.errors import Invalid
from labeling import prm800k
from labeling.models import (
    FinishReason,
    Generation,
    Labeler,
    LabelingSession,
    Solution,
    StepLabel,
    StepRating,
)
from labeling.selectors import (
    alternatives_at,
    current_generation,
    has_submitted_label,
    rated_steps,
    skipped_by,
    unrated_alternatives,
)
from labeling.services import reports
from labeling.services.sessions import (
    HUMAN_COMPLETION_MAX_CHARS,
    LEASE,
    LEASE_LAPSED,
    LabelerDeactivated,
    LabelingRefused,
    locked_session,
    session_to_change,
    touch,
)
from labeling.services.sessions import (
    NotYourSession as NotYourSession,  # the workbench's refusals, importable from here too
)


@dataclass
class NextSession:
    session: LabelingSession
    queue: str  # screening, quality_control, live, generation, leftover or resumed


def _open_sessions() -> QuerySet[LabelingSession]:
    return LabelingSession.objects.filter(submitted_at__isnull=True, abandoned_at__isnull=True)


def _taken_places(now: datetime) -> Subquery:
    """For a Solution queryset: how many of its places are taken, by a submitted label or by
    a session whose lease still runs. A lapsed lease frees its place for the next claim."""
    taken = (
        LabelingSession.objects.filter(solution=OuterRef("pk"))
        .filter(
            Q(submitted_at__isnull=False)
            | Q(submitted_at__isnull=True, abandoned_at__isnull=True, lease_expires_at__gt=now)
        )
        .order_by()
        .values("solution")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return Subquery(taken)


def _queues(labeler: Labeler, now: datetime) -> list[tuple[str, QuerySet[Solution], bool]]:
    """Named queues tried in order: (name, candidates, shared by labelers?).

    A problem the labeler reported bad leaves the shared queues for them alone; quality
    control and screening are served to them still (see `reports`).
    """
    available = (
        Solution.objects.filter(problem__is_bad=False)
        # Live trajectories belong to the labeler who writes them (labeling.services.live).
        .exclude(generation__mode=Generation.Mode.LIVE)
        .exclude(has_submitted_label(labeler=labeler))
        .exclude(skipped_by(labeler=labeler))
    )
    shared = (
        available.filter(is_quality_control=False, is_screening=False)
        .exclude(reports.reported_by(labeler=labeler))
        .alias(taken=Coalesce(_taken_places(now), 0))
        .filter(taken__lt=F("labels_wanted"))
    )
    current = current_generation()
    queues = [
        ("screening", available.filter(is_screening=True).order_by("id"), False),
        (
            "quality_control",
            available.filter(is_quality_control=True, is_screening=False)
            .filter(Q(generation=current) | Q(generation__isnull=True))
            .order_by("id"),
            False,
        ),
    ]
    # Phase 1 before phase 2: a live generation is opened to be labeled now. (Its candidates
    # are built by labeling.services.live, not claimed from the pool.)
    queues.append(("live", Solution.objects.none(), False))
    if current is not None:
        queues.append(
            ("generation", shared.filter(generation=current).order_by("-priority", "id"), True)
        )
    queues.append(
        # Newest generation first: generation ids follow their numbers (generations are
        # created in number order), and ordering by the id column lets the claim walk an
        # index rather than sort every unlabeled solution.
        # Solutions of no generation (0) come last.
        ("leftover", shared.order_by(Coalesce("generation_id", Value(0)).desc(), "id"), True)
    )
    return queues


def _claim(candidates: QuerySet[Solution]) -> Solution | None:
    # On PostgreSQL this is one SELECT ... FOR UPDATE SKIP LOCKED: concurrent requests skip
    # each other's rows instead of queueing behind them. SQLite has no row locks; there the
    # write transaction and the partial unique constraint keep the guarantee.
    if connection.features.has_select_for_update_skip_locked:
        candidates = candidates.select_for_update(skip_locked=True, of=("self",))
    return candidates.first()


def next_session(*, labeler: Labeler, now: datetime | None = None) -> NextSession | None:
    """Give the labeler their open session, or a new one on the next solution, with a lease."""
    now = now or timezone.now()
    if not labeler.user.is_active:
        raise LabelerDeactivated("This labeler is deactivated.")
    mine = _open_sessions().filter(labeler=labeler).select_related("solution").first()
    if mine is not None:
        mine.lease_expires_at = now + LEASE
        mine.save(update_fields=["lease_expires_at"])
        return NextSession(session=mine, queue="resumed")
    for _attempt in range(5):
        try:
            with transaction.atomic():
                return _assign_from_queues(labeler=labeler, now=now)
        except IntegrityError:
            # Another request took the same solution between our read and our insert.
            continue
    return None


def _assign_from_queues(*, labeler: Labeler, now: datetime) -> NextSession | None:
    for name, candidates, shared in _queues(labeler, now):
        if name == "live":
            from labeling.services import live

            session = live.next_live_session(labeler=labeler, now=now)
            if session is not None:
                return NextSession(session=session, queue=name)
            continue
        solution = _claim(candidates)
        if solution is None:
            continue
        slot = None
        if shared:
            # A lapsed lease: the solution goes back to the queue and the old session ends.
            _open_sessions().filter(solution=solution, lease_expires_at__lte=now).update(
                abandoned_at=now
            )
            slot = _free_slot(solution)
        session = LabelingSession.objects.create(
            slot=slot,
            labeler=labeler,
            solution=solution,
            generation_id=solution.generation_id,
            is_quality_control=solution.is_quality_control,
            is_screening=solution.is_screening,
            queue=name,
            started_at=now,
            last_activity_at=now,
            lease_expires_at=now + LEASE,
            total_time=0,
        )
        return NextSession(session=session, queue=name)
    return None


def _free_slot(solution: Solution) -> int:
    """The lowest of the solution's places no live session holds.

    Labels stored without a place (imported ones) use places up too. Two requests that pick
    the same place collide on the unique constraint and the loser tries again.
    """
    sessions = LabelingSession.objects.filter(solution=solution, abandoned_at__isnull=True)
    held = set(sessions.filter(slot__isnull=False).values_list("slot", flat=True))
    placeless = sessions.filter(slot__isnull=True, submitted_at__isnull=False).count()
    free = [slot for slot in range(solution.labels_wanted - placeless) if slot not in held]
    if not free:
        raise IntegrityError("Every place of this solution was taken meanwhile.")
    return free[0]


def rate_step(
    *,
    session_id: int,
    labeler: Labeler,
    step_index: int,
    rating: int,
    flagged: bool = False,
    completion_index: int = 0,
    now: datetime | None = None,
) -> LabelingSession:
    """Rate (or re-rate) one step, or one alternative completion of the step rated -1.

    Completion 0 is the solution's own step; 1..n are the step's alternatives, rated in
    order once the step itself is rated -1. Repeating the same request changes nothing.
    """
    now = now or timezone.now()
    if rating not in prm800k.RATINGS:
        raise LabelingRefused("A rating is -1, 0 or 1.")
    with transaction.atomic():
        session = session_to_change(session_id=session_id, labeler=labeler)
        steps = session.solution.steps
        rated = rated_steps(session)
        if not 0 <= step_index < len(steps):
            raise LabelingRefused(
                f"There is no step {step_index + 1}: the solution has {len(steps)} steps."
            )
        if step_index > len(rated) or any(r == -1 for i, r in rated.items() if i < step_index):
            raise LabelingRefused(
                f"Step {step_index + 1} is not reached yet: rate the steps before it first."
            )
        if completion_index:
            _rate_alternative(
                session=session,
                step_index=step_index,
                completion_index=completion_index,
                rating=rating,
                flagged=flagged,
                own_rating=rated.get(step_index),
            )
        else:
            # Plain inserts and updates, no get_or_create: the session's row lock already
            # serialises every rating of this session. (This is the hottest write.)
            chosen = None if rating == -1 else 0
            if step_index in rated:
                StepLabel.objects.filter(session=session, index=step_index).update(
                    chosen_completion=chosen
                )
                StepRating.objects.filter(
                    step__session=session, step__index=step_index, completion_index=0
                ).update(rating=rating, flagged=flagged)
            else:
                step = StepLabel.objects.create(
                    session=session, index=step_index, chosen_completion=chosen
                )
                StepRating.objects.create(
                    step=step,
                    completion_index=0,
                    text=steps[step_index],
                    rating=rating,
                    flagged=flagged,
                )
            if rating == -1 and any(i > step_index for i in rated):
                # Labels stop at the first error: steps after it are no longer part of it.
                StepLabel.objects.filter(session=session, index__gt=step_index).delete()
            elif rating != -1 and rated.get(step_index) == -1:
                # Alternatives, and a step written in its place, exist only for a wrong step.
                StepRating.objects.filter(
                    step__session=session, step__index=step_index, completion_index__gt=0
                ).delete()
                StepLabel.objects.filter(session=session, index=step_index).update(
                    human_completion=None
                )
        touch(session, now)
        session.save(update_fields=["total_time", "last_activity_at", "lease_expires_at"])
    return session


def _rate_alternative(
    *,
    session: LabelingSession,
    step_index: int,
    completion_index: int,
    rating: int,
    flagged: bool,
    own_rating: int | None,
) -> None:
    alternatives = alternatives_at(solution=session.solution, step_index=step_index)
    if not 1 <= completion_index <= len(alternatives):
        raise LabelingRefused(f"Step {step_index + 1} has no alternative {completion_index}.")
    if own_rating != -1:
        raise LabelingRefused(
            f"Alternatives of step {step_index + 1} are rated after a -1 on that step."
        )
    step = StepLabel.objects.get(session=session, index=step_index)
    if completion_index > step.ratings.filter(completion_index__gt=0).count() + 1:
        raise LabelingRefused(f"Alternative {completion_index} is not reached yet.")
    StepRating.objects.update_or_create(
        step=step,
        completion_index=completion_index,
        defaults={
            "text": alternatives[completion_index - 1],
            "rating": rating,
            "flagged": flagged,
        },
    )


def submit_session(
    *,
    session_id: int,
    labeler: Labeler,
    finish_reason: str,
    reason_text: str = "",
    now: datetime | None = None,
) -> LabelingSession:
    """Finish a session. Submitting the same outcome twice is a no-op."""
    now = now or timezone.now()
    with transaction.atomic():
        session = locked_session(session_id=session_id, labeler=labeler)
        if session.is_submitted:
            if session.finish_reason == finish_reason:
                return session
            raise LabelingRefused("This session is already finished.")
        if session.abandoned_at is not None:
            raise LabelingRefused(LEASE_LAPSED)
        rated = rated_steps(session)
        steps = session.solution.steps
        if finish_reason == "found_error":
            if -1 not in rated.values():
                raise LabelingRefused("No step is rated -1.")
            error_step = next(i for i, r in rated.items() if r == -1)
            if unrated_alternatives(session, error_step=error_step):
                raise LabelingRefused("Rate the alternatives of the -1 step first.")
        elif finish_reason == "solution":
            if len(rated) < len(steps) or -1 in rated.values():
                raise LabelingRefused("Rate every step first; a -1 step ends with found_error.")
        elif finish_reason in ("bad_problem", "give_up"):
            if not reason_text.strip():
                raise LabelingRefused("Please give a short reason.")
            if finish_reason == "bad_problem":
                # A report, not a verdict: one labeler's view does not mark the problem bad
                # for everyone (an admin confirms or dismisses it).
                reports.record_report(session=session, reason=reason_text.strip(), now=now)
        else:
            raise LabelingRefused(
                "finish_reason must be one of " + ", ".join(FinishReason.values) + "."
            )
        touch(session, now)
        session.finish_reason = finish_reason
        session.finish_reason_text = reason_text.strip()
        session.submitted_at = now
        session.save()
    return session


def skip_session(
    *, session_id: int, labeler: Labeler, now: datetime | None = None
) -> LabelingSession:
    """End the session without a label and without a reason: the solution goes back to the
    queue for others (its place is freed) and is not served to this labeler again."""
    now = now or timezone.now()
    with transaction.atomic():
        session = session_to_change(session_id=session_id, labeler=labeler)
        touch(session, now)
        session.abandoned_at = now
        session.extra = {**(session.extra or {}), "skipped": True}
        session.save()
    return session


def renew_lease(
    *, session_id: int, labeler: Labeler, now: datetime | None = None
) -> LabelingSession:
    """Keep the solution while the labeler's page is open (idle time is not counted)."""
    now = now or timezone.now()
    with transaction.atomic():
        session = locked_session(session_id=session_id, labeler=labeler)
        if not session.is_open:
            raise LabelingRefused("This session is no longer open.")
        session.lease_expires_at = now + LEASE
        session.save(update_fields=["lease_expires_at"])
    return session


# ---------------------------------------------------------------------------------------------
# What the labeler sees


class HumanCompletionInvalid(Invalid):
    """The written step cannot be stored as given (too long)."""


def write_human_completion(
    *,
    session_id: int,
    labeler: Labeler,
    step_index: int,
    text: str,
    now: datetime | None = None,
) -> LabelingSession:
    """Store (or replace) the labeler's own correct step in place of the -1 step.

    Empty text removes it. It is written once the step and every alternative of it are
    rated, and kept as PRM800K phase 1 keeps it: the `human_completion` object with
    `chosen_completion` null, the step's rated completions unchanged.
    """
    now = now or timezone.now()
    text = text.strip()
    if len(text) > HUMAN_COMPLETION_MAX_CHARS:
        raise HumanCompletionInvalid(
            f"A written step has at most {HUMAN_COMPLETION_MAX_CHARS:,} characters."
        )
    with transaction.atomic():
        session = session_to_change(session_id=session_id, labeler=labeler)
        if rated_steps(session).get(step_index) != -1:
            raise LabelingRefused(f"Step {step_index + 1} is not rated -1.")
        if unrated_alternatives(session, error_step=step_index):
            raise LabelingRefused(f"Rate the alternatives of step {step_index + 1} first.")
        human = (
            {
                "text": text,
                "rating": None,
                "source": "human",
                "flagged": False,
                "corrected_rating": None,
            }
            if text
            else None
        )
        StepLabel.objects.filter(session=session, index=step_index).update(
            human_completion=human, chosen_completion=None
        )
        touch(session, now)
        session.save(update_fields=["total_time", "last_activity_at", "lease_expires_at"])
    return session
