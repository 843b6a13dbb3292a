"""The annotator's workbench: queues and leases, rating, submission, and the state a page or
an API client shows (`labeling.selectors.session_state`, a read).

Over 500 lines on purpose: serving, rating and submitting share one locking discipline (the
labeler's row, then the session's) that reads best in one place.

A session is one labeler on one solution. `next_session` serves one from named queues
(screening, quality control, the current generation, leftovers) under a lease;
`rate_step` and `submit_session` apply the labeling rules (`core.rules`: labels stop at the
first -1, whose alternatives are rated before the session ends); `labeling.selectors.session_state`
says what is shown and what the labeler may do next, for the page and the API alike.
"""

from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import datetime

from django.db import IntegrityError, connection, transaction
from django.db.models import Exists, F, Q, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce
from django.db.models.lookups import LessThan
from django.utils import timezone

from core import prm800k, rules
from core.errors import Invalid
from core.prepared import Prepared
from labeling import judge_display
from labeling.models import (
    IN_QUEUES,
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
    current_generation_id,
    done_by,
    own_ratings,
    rated_steps,
    sessions_per_solution,
    unrated_alternatives,
)
from labeling.services import corrections, reports
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

    @property
    def is_new(self) -> bool:
        """Served just now: nothing of it is rated yet."""
        return self.queue != "resumed"


def _open_sessions() -> QuerySet[LabelingSession]:
    return LabelingSession.objects.filter(submitted_at__isnull=True, abandoned_at__isnull=True)


def _taken_places(now: datetime) -> Subquery:
    """For a Solution queryset: how many of its places are taken, by a submitted label or by
    a session whose lease still runs. A lapsed lease frees its place for the next claim."""
    return sessions_per_solution(
        Q(submitted_at__isnull=False)
        | Q(submitted_at__isnull=True, abandoned_at__isnull=True, lease_expires_at__gt=now)
    )


def _sessions_holding(now: datetime) -> Subquery:
    """For a Solution queryset: how many of its sessions hold a place or may (every one not
    abandoned: submitted, open, or open with a lapsed lease). Read with the claim, for its one
    row: none, and the claim takes the first place without reading the sessions again."""
    return sessions_per_solution(Q(abandoned_at__isnull=True))


def _candidates(
    *, queue: str, labeler: int, now: datetime, current: int | None, live_open: bool
) -> QuerySet[Solution]:
    """A queue's claimable solutions in serving order, as (id, places held) rows.

    Screening then quality control are one queue, "gold" (`_gold_name` tells which served);
    "generation" is the current generation's, "leftover" every other. A problem the labeler
    reported bad leaves the shared queues for them alone; quality control and screening are
    served to them still (see `reports`). Every queue is within IN_QUEUES, which the queues'
    partial indexes hold: the claim walks no solution that has its labels already, however
    much of the pool is labeled.
    """
    # Conditions given together rather than chained: each call copies the query.
    available = Solution.objects.filter(IN_QUEUES, ~done_by(labeler=labeler), problem__is_bad=False)
    if live_open:
        # Live trajectories belong to the labeler who writes them (labeling.services.live).
        available = available.exclude(generation__mode=Generation.Mode.LIVE)
    if queue == "gold":
        gold = Q(is_screening=True) | (
            Q(is_quality_control=True) & (Q(generation_id=current) | Q(generation__isnull=True))
        )
        claimable = available.filter(gold).order_by(F("is_screening").desc(), "id")
        return _claimed(claimable.annotate(holding=Value(0)))
    shared = available.filter(
        ~reports.reported_by(labeler=labeler),
        LessThan(Coalesce(_taken_places(now), 0), F("labels_wanted")),
        is_quality_control=False,
        is_screening=False,
    ).annotate(holding=Coalesce(_sessions_holding(now), 0))
    if queue == "generation":
        # In the order of the index `solution_generation_queue`.
        return _claimed(shared.filter(generation_id=current).order_by("-priority", "id"))
    # Newest generation first: generation ids follow their numbers (generations are created in
    # number order), and ordering by the id column lets the claim walk the index
    # `solution_leftover_order` rather than sort every unlabeled solution. Solutions of no
    # generation (0) come last.
    return _claimed(shared.order_by(Coalesce("generation_id", Value(0)).desc(), "id"))


def _claimed(candidates: QuerySet[Solution]) -> QuerySet[Solution]:
    # On PostgreSQL one SELECT ... FOR UPDATE SKIP LOCKED: concurrent requests skip each
    # other's rows instead of queueing behind them. SQLite has no row locks; there the write
    # transaction and the partial unique constraint keep the guarantee.
    if connection.features.has_select_for_update_skip_locked:
        candidates = candidates.select_for_update(skip_locked=True, of=("self",))
    return candidates.values_list("pk", "holding")[:1]


# Compiled once per process and shape: compiling the claim cost more than running it.
_CLAIM = Prepared(_candidates)


def _queues(*, current: int | None, live_open: bool) -> Iterator[tuple[str, bool]]:
    """Named queues tried in order: (name, shared by labelers?). Phase 1 before phase 2: a
    live generation is opened to be labeled now, its candidates built by
    labeling.services.live, not claimed from the pool."""
    yield "gold", False
    if live_open:
        yield "live", False
    if current is not None:
        yield "generation", True
    yield "leftover", True


def _gold_name(solution: Solution) -> str:
    return "screening" if solution.is_screening else "quality_control"


def _claim(*, queue: str, labeler: Labeler, now: datetime, current: int | None, live_open: bool):
    """The queue's next solution, locked, with its problem (for the page that shows it) and
    how many of its places are held; None when the queue has nothing for the labeler."""
    found = _CLAIM.rows(
        queue=queue, labeler=labeler.pk, now=now, current=current, live_open=live_open
    )
    if not found:
        return None
    pk, holding = found[0]
    solution = Solution.objects.select_related("problem").get(pk=pk)
    solution.holding = holding
    return solution


def next_session(*, labeler: Labeler, now: datetime | None = None) -> NextSession | None:
    """Give the labeler their open session, or a new one on the next solution, with a lease."""
    now = now or timezone.now()
    if not labeler.user.is_active:
        raise LabelerDeactivated("This labeler is deactivated.")
    for _attempt in range(5):
        try:
            with transaction.atomic():
                current, live_open = _lock_labeler(labeler)
                mine = _resumable(labeler)
                if mine is not None:
                    mine.lease_expires_at = now + LEASE
                    mine.save(update_fields=["lease_expires_at"])
                    return NextSession(session=mine, queue="resumed")
                return _assign_from_queues(
                    labeler=labeler, now=now, current=current, live_open=live_open
                )
        except IntegrityError:
            # Another request took the same solution between our read and our insert.
            continue
    return None


def _lock_labeler(labeler: Labeler) -> tuple[int | None, bool]:
    """One "next session" of a labeler at a time: a second request (another tab, a retry)
    waits here, then finds and resumes the session the first one served. The database also
    refuses a second open session (`one_open_session_per_labeler`). NO KEY: inserting a
    session that references the labeler does not wait for this lock.

    Read in the same statement (a round trip less): the current generation's id, and whether
    a live generation is open. (Only the labeler's row is locked: FOR UPDATE does not reach
    into the subqueries.)"""
    rows = _LOCK_LABELER.rows(labeler=labeler.pk)
    return (rows[0][0], bool(rows[0][1])) if rows else (None, False)


def _labeler_locked(*, labeler: int) -> QuerySet[Labeler]:
    live = Generation.objects.filter(mode=Generation.Mode.LIVE)
    return (
        Labeler.objects.select_for_update(no_key=True)
        .filter(pk=labeler)
        .values_list(current_generation_id(), Exists(live))
    )


_LOCK_LABELER = Prepared(_labeler_locked)


def _resumable(labeler: Labeler) -> LabelingSession | None:
    # Locked: a session whose lease lapsed may be ending at this moment (its place given to
    # another labeler, `_assign_from_queues`); the locked read waits for that and then no
    # longer finds it open, rather than renewing a session that was just abandoned.
    # Its id alone first: mostly there is none (the labeler has just submitted), and this
    # plain statement costs less than half of one that brings the solution and problem along.
    open_id = _open_sessions().select_for_update().filter(labeler=labeler).values_list("pk").first()
    if open_id is None:
        return None
    return LabelingSession.objects.select_related("solution__problem").get(pk=open_id[0])


def _assign_from_queues(
    *, labeler: Labeler, now: datetime, current: int | None, live_open: bool
) -> NextSession | None:
    for name, shared in _queues(current=current, live_open=live_open):
        if name == "live":
            from labeling.services import live

            session = live.next_live_session(labeler=labeler, now=now)
            if session is not None:
                return NextSession(session=session, queue=name)
            continue
        solution = _claim(
            queue=name, labeler=labeler, now=now, current=current, live_open=live_open
        )
        if solution is None:
            continue
        if name == "gold":
            name = _gold_name(solution)
        slot = None
        if shared and not solution.holding:
            # Nobody holds any place of it (the common case): the first is free. Had another
            # claim taken it meanwhile, the insert below breaks the unique constraint, and
            # the loser tries again.
            slot = 0
        elif shared:
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
    held, placeless = set(), 0
    # One read of the sessions that still count (held places and placeless labels alike).
    for slot, submitted_at in LabelingSession.objects.filter(
        solution=solution, abandoned_at__isnull=True
    ).values_list("slot", "submitted_at"):
        if slot is not None:
            held.add(slot)
        elif submitted_at is not None:
            placeless += 1
    free = [slot for slot in range(solution.labels_wanted - placeless) if slot not in held]
    if not free:
        raise IntegrityError("Every place of this solution was taken meanwhile.")
    return free[0]


def recount_labels(*, solutions: QuerySet[Solution] | None = None) -> int:
    """Count `solutions`' submitted labels again (all solutions without): after labels were
    stored or deleted other than by `submit_session` (an import, an admin), so that the
    queues serve again what wants labels and stop walking past what has them. Returns how
    many solutions were counted."""
    labels = sessions_per_solution(Q(submitted_at__isnull=False))
    solutions = Solution.objects.all() if solutions is None else solutions
    return solutions.update(labels_submitted=Coalesce(labels, 0))


def recount_after_delete(sender, instance: LabelingSession, **kwargs) -> None:
    """post_delete of a session: a submitted label deleted anywhere (the admin, a shell, a
    cascade) gives its solution back to the queues at once, as before there was a count."""
    if instance.submitted_at is not None:
        recount_labels(solutions=Solution.objects.filter(pk=instance.solution_id))


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
        own = own_ratings(session)
        rated = {index: rating for index, (rating, _) in own.items()}
        progress = _progress(session, rated)
        refused = rules.refusal(progress, step_index=step_index)
        if refused:
            raise LabelingRefused(refused)
        if completion_index:
            _rate_alternative(
                session=session,
                progress=progress,
                step_index=step_index,
                completion_index=completion_index,
                rating=rating,
                flagged=flagged,
            )
        else:
            # Plain inserts and updates, no get_or_create: the session's row lock already
            # serialises every rating of this session. (This is the hottest write.)
            chosen = None if rating == -1 else 0
            # Beside the rating, what the labeler was shown of the judge with it.
            judge = judge_display.shown(session).recorded(step_index)
            if step_index in rated:
                StepLabel.objects.filter(session=session, index=step_index).update(
                    chosen_completion=chosen
                )
                StepRating.objects.filter(
                    step__session=session, step__index=step_index, completion_index=0
                ).update(rating=rating, flagged=flagged, **judge)
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
                    **judge,
                )
            own[step_index] = (rating, flagged)
            gone = rules.dropped(progress, step_index=step_index, rating=rating)
            if gone.later_steps:
                StepLabel.objects.filter(session=session, index__gt=step_index).delete()
                own = {index: given for index, given in own.items() if index <= step_index}
            elif gone.alternatives:
                StepRating.objects.filter(
                    step__session=session, step__index=step_index, completion_index__gt=0
                ).delete()
                StepLabel.objects.filter(session=session, index=step_index).update(
                    human_completion=None
                )
        touch(session, now)
        session.save(update_fields=["total_time", "last_activity_at", "lease_expires_at"])
    # What this write left, for the answer's render (selectors.session_state): this request's
    # own result, not a later request's, and no second read.
    session.own_ratings_written = own
    return session


def _progress(session: LabelingSession, rated: dict[int, int | None]) -> rules.Progress:
    """The label as the rules read it, from its own steps' ratings (alternatives not counted)."""
    return rules.Progress(
        total_steps=len(session.solution.steps),
        own=tuple(rated.get(step) for step in range(len(rated))),
        offered=rules.offered_per_step(session.solution.alternatives),
    )


def _rate_alternative(
    *,
    session: LabelingSession,
    progress: rules.Progress,
    step_index: int,
    completion_index: int,
    rating: int,
    flagged: bool,
) -> None:
    step, done = None, 0
    if progress.rating_of(step_index) == -1:
        step = StepLabel.objects.get(session=session, index=step_index)
        done = step.ratings.filter(completion_index__gt=0).count()
    progress = replace(progress, alternatives_done=done)
    refused = rules.refusal(progress, step_index=step_index, completion_index=completion_index)
    if refused:
        raise LabelingRefused(refused)
    alternatives = alternatives_at(solution=session.solution, step_index=step_index)
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
    finish_reason_text: str = "",
    now: datetime | None = None,
) -> LabelingSession:
    """Finish a session, or save the correction of a reopened label
    (`labeling.services.corrections`: it was counted when first submitted, and is not again).
    Submitting the same outcome twice is a no-op."""
    now = now or timezone.now()
    with transaction.atomic():
        session = locked_session(session_id=session_id, labeler=labeler)
        correcting = session.is_being_corrected
        if session.is_submitted and not correcting:
            if session.finish_reason == finish_reason:
                # A repeated submission; of a correction, it is answered as the first was.
                session.was_correction = session.edited_at is not None
                return session
            raise LabelingRefused("This session is already finished.")
        if session.abandoned_at is not None:
            raise LabelingRefused(LEASE_LAPSED)
        if finish_reason in (rules.FOUND_ERROR, rules.SOLUTION):
            progress = _progress(session, rated_steps(session))
            error_step = progress.error_step
            if finish_reason == rules.FOUND_ERROR and error_step is not None:
                # Read only here: a label that ends at a -1 has its alternatives to count.
                done = StepRating.objects.filter(
                    step__session=session, step__index=error_step, completion_index__gt=0
                ).count()
                progress = replace(progress, alternatives_done=done)
            refused = rules.submit_refusal(progress, finish_reason=finish_reason)
            if refused:
                raise LabelingRefused(refused)
        elif finish_reason in ("bad_problem", "give_up"):
            if not finish_reason_text.strip():
                raise LabelingRefused("Please give a short reason.")
            if finish_reason == "bad_problem":
                # A report, not a verdict: one labeler's view does not mark the problem bad
                # for everyone (an admin confirms or dismisses it).
                reports.record_report(session=session, reason=finish_reason_text.strip(), now=now)
        else:
            raise LabelingRefused(
                "finish_reason must be one of " + ", ".join(FinishReason.values) + "."
            )
        touch(session, now)
        if correcting:
            corrections.finish_correction(
                session,
                finish_reason=finish_reason,
                finish_reason_text=finish_reason_text.strip(),
                now=now,
            )
            session.save(
                update_fields=[
                    "total_time",
                    "last_activity_at",
                    "lease_expires_at",
                    "finish_reason",
                    "finish_reason_text",
                    "reopened_at",
                    "edited_at",
                    "extra",
                ]
            )
            session.was_correction = True
            return session
        session.finish_reason = finish_reason
        session.finish_reason_text = finish_reason_text.strip()
        session.submitted_at = now
        session.save(
            update_fields=[
                "total_time",
                "last_activity_at",
                "lease_expires_at",
                "finish_reason",
                "finish_reason_text",
                "submitted_at",
            ]
        )
    # Counted once the label is committed, not inside its transaction: that holds the
    # session's row, and a claim holding the solution's row may be waiting for it (to end a
    # lapsed lease on the same solution), so waiting there for the solution's row could
    # deadlock. A process that dies between the two leaves the count one behind, which costs
    # a step of the queues' walk, nothing more. (Exactly once: a repeated submission returned
    # above.)
    Solution.objects.filter(pk=session.solution_id).update(
        labels_submitted=F("labels_submitted") + 1
    )
    return session


def skip_session(
    *, session_id: int, labeler: Labeler, now: datetime | None = None
) -> LabelingSession:
    """End the session without a label and without a reason: the solution goes back to the
    queue for others (its place is freed) and is not served to this labeler again."""
    now = now or timezone.now()
    with transaction.atomic():
        session = session_to_change(session_id=session_id, labeler=labeler)
        if session.is_submitted:
            # A reopened label keeps its place; leaving it is cancelling the correction.
            raise LabelingRefused(
                "A submitted label is not skipped: cancel the correction to keep it as it was."
            )
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
        if not session.accepts_ratings:
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
