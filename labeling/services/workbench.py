"""The annotator's workbench: queues and leases, rating, submission, and the state a page or
an API client shows.

A session is one labeler on one solution. `next_session` serves one from named queues
(screening, quality control, the current generation, leftovers) under a lease;
`rate_step` and `submit_session` apply the labeling rules (labels stop at the first -1, whose
alternatives are rated before the session ends); `session_state` says what is shown, what
to rate next and which outcome can be submitted, for the page and the API alike.
"""

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import IntegrityError, connection, transaction
from django.db.models import Exists, OuterRef, Q, QuerySet, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from annotate.errors import Conflict, NotAllowed
from labeling import prm800k
from labeling.models import (
    Labeler,
    LabelingSession,
    Solution,
    StepLabel,
    StepRating,
)
from labeling.selectors import current_generation, has_submitted_label
from labeling.services import reports

LEASE = timedelta(minutes=30)
# Gaps between a labeler's actions longer than this count as idle, not as time on task.
IDLE_GAP = timedelta(minutes=3)


LEASE_LAPSED = (
    "This session's lease ran out and it went to someone else. Your ratings so far are kept "
    "with it; choose Label for your next solution."
)


class LabelingRefused(Conflict):
    """A labeling request that cannot be applied; the message says why."""


class NotYourSession(LabelingRefused, NotAllowed):
    """The session belongs to another labeler."""


class LabelerDeactivated(LabelingRefused, NotAllowed):
    """The labeler was deactivated (quality control) and gets no more sessions."""


@dataclass
class NextSession:
    session: LabelingSession
    queue: str  # screening, quality_control, generation, leftover or resumed


def _open_sessions() -> QuerySet[LabelingSession]:
    return LabelingSession.objects.filter(submitted_at__isnull=True, abandoned_at__isnull=True)


def _queues(labeler: Labeler, now: datetime) -> list[tuple[str, QuerySet[Solution], bool]]:
    """Named queues tried in order: (name, candidates, shared by labelers?).

    A problem the labeler reported bad leaves the shared queues for them alone; quality
    control and screening are served to them still (see `reports`).
    """
    available = Solution.objects.filter(problem__is_bad=False).exclude(
        has_submitted_label(labeler=labeler)
    )
    held = _open_sessions().filter(solution=OuterRef("pk"), lease_expires_at__gt=now)
    shared = available.filter(is_quality_control=False, is_screening=False).exclude(
        Exists(held) | has_submitted_label() | reports.reported_by(labeler=labeler)
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
        solution = _claim(candidates)
        if solution is None:
            continue
        if shared:
            # A lapsed lease: the solution goes back to the queue and the old session ends.
            _open_sessions().filter(solution=solution, lease_expires_at__lte=now).update(
                abandoned_at=now
            )
        session = LabelingSession.objects.create(
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


def _locked_session(*, session_id: int, labeler: Labeler) -> LabelingSession:
    # The session's row alone: its solution (a QC one is served to every labeler) and that
    # solution's problem are shared, and locking them would queue other labelers' ratings.
    session = (
        LabelingSession.objects.select_for_update(of=("self",))
        .select_related("solution__problem")
        .filter(pk=session_id)
        .first()
    )
    if session is None:
        raise LabelingRefused(f"No session {session_id}.")
    if session.labeler_id != labeler.pk:
        raise NotYourSession("This session belongs to another labeler.")
    return session


def _touch(session: LabelingSession, now: datetime) -> None:
    last = session.last_activity_at or session.started_at or now
    gap = min(max(now - last, timedelta(0)), IDLE_GAP)
    session.total_time = (session.total_time or 0) + int(gap.total_seconds() * 1000)
    session.last_activity_at = now
    session.lease_expires_at = now + LEASE


def rated_steps(session: LabelingSession) -> dict[int, int | None]:
    """Step index -> rating of the solution's own completion, for rated steps."""
    return dict(
        StepRating.objects.filter(step__session=session, completion_index=0).values_list(
            "step__index", "rating"
        )
    )


def alternatives_at(*, solution: Solution, step_index: int) -> list[str]:
    """The alternative completions offered for one step (PRM800K phase 2), in order."""
    return list((solution.alternatives or {}).get(str(step_index), []))


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
        session = _locked_session(session_id=session_id, labeler=labeler)
        if session.abandoned_at is not None:
            # A tab left open past the lease: say why, not "finished" (the page shows this).
            raise LabelingRefused(LEASE_LAPSED)
        if not session.is_open:
            raise LabelingRefused("This session is already finished.")
        steps = session.solution.steps
        rated = rated_steps(session)
        if not 0 <= step_index < len(steps):
            raise LabelingRefused(f"Step {step_index} does not exist.")
        if step_index > len(rated) or any(r == -1 for i, r in rated.items() if i < step_index):
            raise LabelingRefused(f"Step {step_index} is not reached yet.")
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
                # Alternatives are rated only in place of a wrong step.
                StepRating.objects.filter(
                    step__session=session, step__index=step_index, completion_index__gt=0
                ).delete()
        _touch(session, now)
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
        raise LabelingRefused(f"Step {step_index} has no alternative {completion_index}.")
    if own_rating != -1:
        raise LabelingRefused(f"Alternatives of step {step_index} follow a -1 on that step.")
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


def unrated_alternatives(session: LabelingSession, *, error_step: int) -> int:
    """How many alternatives of the -1 step are still to rate before the session can end."""
    offered = len(alternatives_at(solution=session.solution, step_index=error_step))
    done = StepRating.objects.filter(
        step__session=session, step__index=error_step, completion_index__gt=0
    ).count()
    return max(offered - done, 0)


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
        session = _locked_session(session_id=session_id, labeler=labeler)
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
            raise LabelingRefused(f"Unknown finish reason {finish_reason!r}.")
        _touch(session, now)
        session.finish_reason = finish_reason
        session.finish_reason_text = reason_text.strip()
        session.submitted_at = now
        session.save()
    return session


def renew_lease(
    *, session_id: int, labeler: Labeler, now: datetime | None = None
) -> LabelingSession:
    """Keep the solution while the labeler's page is open (idle time is not counted)."""
    now = now or timezone.now()
    with transaction.atomic():
        session = _locked_session(session_id=session_id, labeler=labeler)
        if not session.is_open:
            raise LabelingRefused("This session is no longer open.")
        session.lease_expires_at = now + LEASE
        session.save(update_fields=["lease_expires_at"])
    return session


# ---------------------------------------------------------------------------------------------
# What the labeler sees


@dataclass(frozen=True)
class Item:
    """One thing to rate: a step (completion 0) or an alternative completion of a step."""

    index: int  # the step index
    completion: int  # 0: the solution's own step; 1..n: the step's alternatives
    key: str  # "s3" for step 3, "s3c1" for its first alternative
    text: str
    rating: int | None
    flagged: bool | None
    alternatives: list["Item"] = field(default_factory=list)


@dataclass(frozen=True)
class WorkbenchState:
    """A session as its labeler sees it.

    `items` are the steps shown so far (each rated one, then the one to rate next), the
    first -1 step carrying its alternatives shown so far. `current` is the one item to rate
    next (None when nothing is left); `outcome` the finish reason that can be submitted now
    (found_error or solution), if any.
    """

    items: list[Item]
    current: Item | None
    outcome: str | None
    error_step: int | None
    total_steps: int
    alternatives_offered: int  # at the error step; 0 without one


def session_state(*, session: LabelingSession) -> WorkbenchState:
    """What the labeler sees of `session`: the steps shown, the item to rate, the outcome."""
    rated: dict[int, int | None] = {}
    flagged: dict[int, bool] = {}
    for index, rating, flag in StepRating.objects.filter(
        step__session=session, completion_index=0
    ).values_list("step__index", "rating", "flagged"):
        rated[index], flagged[index] = rating, flag
    steps = session.solution.steps
    error_step = next((i for i, r in sorted(rated.items()) if r == -1), None)
    next_step = len(rated) if error_step is None and len(rated) < len(steps) else None
    shown = len(rated) + (1 if next_step is not None else 0)
    alternatives: list[Item] = []
    offered: list[str] = []
    current_alternative = None
    if error_step is not None:
        # PRM800K phase 2: the other completions offered for the wrong step are rated, one
        # at a time, before the label ends.
        offered = alternatives_at(solution=session.solution, step_index=error_step)
        done = {
            completion: (rating, flag)
            for completion, rating, flag in StepRating.objects.filter(
                step__session=session, step__index=error_step, completion_index__gt=0
            ).values_list("completion_index", "rating", "flagged")
        }
        count = len(done)
        if count < len(offered):
            current_alternative = count + 1
        alternatives = [
            Item(
                index=error_step,
                completion=k,
                key=f"s{error_step}c{k}",
                text=offered[k - 1],
                rating=done.get(k, (None, None))[0],
                flagged=done.get(k, (None, None))[1],
            )
            for k in range(1, min(count + 1, len(offered)) + 1)
        ]
    items = [
        Item(
            index=i,
            completion=0,
            key=f"s{i}",
            text=steps[i],
            rating=rated.get(i),
            flagged=flagged.get(i),
            alternatives=alternatives if i == error_step else [],
        )
        for i in range(shown)
    ]
    if next_step is not None:
        current = items[next_step]
    elif current_alternative is not None:
        current = alternatives[current_alternative - 1]
    else:
        current = None
    if error_step is None:
        outcome = "solution" if len(rated) == len(steps) else None
    else:
        outcome = "found_error" if current_alternative is None else None
    return WorkbenchState(
        items=items,
        current=current,
        outcome=outcome,
        error_step=error_step,
        total_steps=len(steps),
        alternatives_offered=len(offered),
    )
