"""Read operations of the annotation domain (the PRM800K export has its own module, export.py)."""

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property

from django.contrib.auth import get_user_model
from django.db.models import Count, Exists, F, OuterRef, Q, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce, Trim
from django.db.models.lookups import LessThan

from core import permissions, rules
from core.prepared import Prepared
from labeling import judge_display
from labeling.judge_display import JudgeShown
from labeling.models import (
    IN_QUEUES,
    AnswerReview,
    Generation,
    Labeler,
    LabelingSession,
    Problem,
    Solution,
    StepLabel,
    StepRating,
)


def overview() -> dict[str, int]:
    """Counts for the landing page."""
    return {
        "problem_count": Problem.objects.count(),
        "solution_count": Solution.objects.count(),
        "submitted_count": LabelingSession.objects.filter(submitted_at__isnull=False).count(),
    }


def _selected_generations() -> QuerySet[Generation]:
    # A live (phase-1) generation has no solutions to serve: its labelers write them.
    return Generation.objects.filter(number__gte=0, mode=Generation.Mode.RATE).order_by("-number")


def current_generation() -> Generation | None:
    """The newest selected generation (screening, number -1, and live generations are never
    the current one)."""
    return _selected_generations().first()


def current_generation_id() -> Subquery:
    """The current generation's id (null without one), for a statement that reads it beside
    other things."""
    return Subquery(_selected_generations().values("pk")[:1])


def submitted_sessions_of(**lookups) -> QuerySet[LabelingSession]:
    """Submitted sessions of the outer query's solution, narrowed by `lookups` (a labeler,
    say): the body of every "has a submitted label" subquery."""
    return LabelingSession.objects.filter(
        solution=OuterRef("pk"), submitted_at__isnull=False, **lookups
    )


def has_submitted_label(**lookups) -> Exists:
    """For a Solution queryset: whether the row has a submitted label (by `lookups`' labeler,
    when given). `filter(has_submitted_label())` keeps labeled solutions, `exclude` the rest."""
    return Exists(submitted_sessions_of(**lookups))


def done_by(*, labeler: Labeler | int) -> Exists:
    """For a Solution queryset: whether `labeler` is done with the row, having labeled it or
    skipped it (a skip ended their session without a label, so others still get it). Either
    way it is not served to them again. One subquery for both: serving reads it per row."""
    return Exists(
        LabelingSession.objects.filter(solution=OuterRef("pk"), labeler=labeler).filter(
            Q(submitted_at__isnull=False) | Q(abandoned_at__isnull=False, extra__skipped=True)
        )
    )


# The queue's length is counted up to here, and shown as "100+" past it. Counting the whole
# pool read every solution's labels on each submission and page: 33-50 ms of PostgreSQL at
# 10,000 solutions (200 ms on a busy machine), growing with the pool, while the capped count
# stops at its 100th row (about 1 ms).
QUEUE_LEFT_AT_MOST = 100


def sessions_per_solution(condition: Q) -> Subquery:
    """For a Solution queryset: how many of each solution's sessions meet `condition` (NULL
    for none: wrap it in Coalesce)."""
    counted = (
        LabelingSession.objects.filter(condition, solution=OuterRef("pk"))
        .order_by()
        .values("solution")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return Subquery(counted)


def queue_left(
    *, labeler: Labeler, besides: int | None = None, at_most: int = QUEUE_LEFT_AT_MOST
) -> int:
    """About how many solutions are still there for `labeler`, in one query, counted up to
    `at_most` (a figure of `at_most` means that many or more); `besides`: a solution id not to
    count (the one on the labeler's screen).

    The queues' rules without their leases: a solution another labeler holds right now
    still counts, so the figure is what is left, not what is free this minute. Counted in the
    leftover queue's order, which walks its partial index (IN_QUEUES): the count stops after
    `at_most` rows of it and passes no solution that has its labels.
    """
    if besides is None:
        besides = 0  # no solution's id
    return len(_QUEUE_LEFT.rows(labeler=labeler.pk, besides=besides, shape={"at_most": at_most}))


def _left_in_queue(*, labeler: int, besides: int, at_most: int) -> QuerySet[Solution]:
    labels = sessions_per_solution(Q(submitted_at__isnull=False))
    return (
        Solution.objects.filter(
            IN_QUEUES,
            Q(is_quality_control=True)
            | Q(is_screening=True)
            | LessThan(Coalesce(labels, 0), F("labels_wanted")),
            ~done_by(labeler=labeler),
            ~Q(generation__mode=Generation.Mode.LIVE),
            ~Q(pk=besides),
            problem__is_bad=False,
        )
        .order_by(Coalesce("generation_id", Value(0)).desc(), "id")
        .values_list("pk")[:at_most]
    )


# Compiled once per process (core.prepared): compiling the count cost more than running it.
_QUEUE_LEFT = Prepared(_left_in_queue)


def my_labels(*, labeler: Labeler) -> QuerySet[LabelingSession]:
    """The labeler's submitted labels, newest first, with their problem, rated steps, and
    whether a reviewer settled on a label of their solution (`settled`, which ends
    corrections: `labeling.services.corrections.refusal`)."""
    settled = Exists(
        LabelingSession.objects.filter(solution=OuterRef("solution"), adjudicated_at__isnull=False)
    )
    return (
        LabelingSession.objects.filter(labeler=labeler, submitted_at__isnull=False)
        .select_related("solution__problem")
        .annotate(rated=Count("step_labels"), settled=settled)
        .order_by("-submitted_at", "-pk")
    )


def labeler_with_roles(*, user) -> Labeler | None:
    """The user's labeler (None before their first session), and the user's role names read
    in the same query and kept for `permissions.has_role`: every workbench request checks the
    role and needs the labeler, and a rating, the hottest request, was ten round trips."""
    if permissions.knows_role_names(user) and get_user_model().labeler.is_cached(user):
        # Read with the user (labeling.auth.UserWithRolesBackend): no statement of its own.
        return getattr(user, "labeler", None)
    rows = list(Labeler.objects.filter(user=user).values_list("pk", "uuid", "user__groups__name"))
    if not rows:
        return None
    permissions.remember_role_names(user, {name for _, _, name in rows if name is not None})
    labeler = Labeler.from_db(
        Labeler.objects.db, ["id", "user_id", "uuid"], [rows[0][0], user.pk, rows[0][1]]
    )
    labeler.user = user
    return labeler


# --- the workbench: what a labeler sees of a session (page and API alike) ---------------------


# Step index -> (rating, flagged) of the solution's own completion, for rated steps.
OwnRatings = dict[int, tuple[int | None, bool]]


def own_ratings(session: LabelingSession) -> OwnRatings:
    """The session's ratings of the solution's own steps, with their "unsure" flags."""
    return {
        index: (rating, bool(flagged))  # SQLite gives its flags as 0 and 1
        for index, rating, flagged in _OWN_RATINGS.rows(session=session.pk)
    }


def _own_ratings(*, session: int) -> QuerySet[StepRating]:
    # In step order (the first -1 is the error step), without the model's default ordering,
    # which joins the session table only to sort by it.
    return (
        StepRating.objects.filter(step__session=session, completion_index=0)
        .order_by("step__index")
        .values_list("step__index", "rating", "flagged")
    )


# Every rating reads them: compiled once per process (core.prepared).
_OWN_RATINGS = Prepared(_own_ratings)


def rated_steps(session: LabelingSession) -> dict[int, int | None]:
    """Step index -> rating of the solution's own completion, for rated steps."""
    return {index: rating for index, (rating, _) in own_ratings(session).items()}


def alternatives_at(*, solution: Solution, step_index: int) -> list[str]:
    """The alternative completions offered for one step (PRM800K phase 2), in order."""
    return list((solution.alternatives or {}).get(str(step_index), []))


def unrated_alternatives(session: LabelingSession, *, error_step: int) -> int:
    """How many alternatives of the -1 step are still to rate before the session can end."""
    offered = len(alternatives_at(solution=session.solution, step_index=error_step))
    done = StepRating.objects.filter(
        step__session=session, step__index=error_step, completion_index__gt=0
    ).count()
    return max(offered - done, 0)


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
    # What the labeler sees of the judge here (labeling.judge_display): its label beside the
    # step, and the rating its buttons suggest (confirm). Never set while the judge is hidden.
    judge: JudgeShown | None = None
    suggestion: int | None = None


@dataclass(frozen=True)
class WorkbenchState:
    """A session as its labeler sees it.

    `items` are the steps shown so far (each rated one, then the one to rate next), the
    first -1 step carrying its alternatives shown so far. `current` is the one item to rate
    next (None when nothing is left); `outcome` the finish reason that can be submitted now
    (found_error or solution), if any. `next_actions` is what the labeler may do next
    (`core.rules.next_actions`): what the page acts on, and what API clients are told.
    """

    items: list[Item]
    current: Item | None
    outcome: str | None
    error_step: int | None
    total_steps: int
    alternatives_offered: int  # at the error step; 0 without one
    progress: rules.Progress
    # The step the labeler wrote in place of the error step, and whether they may write it
    # now (the error step and every alternative of it rated).
    human_completion: str | None = None
    can_write_human_completion: bool = False
    judge_display: str = judge_display.HIDDEN

    @cached_property
    def next_actions(self) -> dict:
        # Computed when asked (the page and the API ask; a submitted label's page does not).
        return rules.next_actions(self.progress)


def session_state(*, session: LabelingSession, new: bool = False) -> WorkbenchState:
    """What the labeler sees of `session`: the steps shown, the item to rate, the outcome.
    `new`: the session was served just now, so nothing of it is rated (nothing to read)."""
    # A rating's answer renders what its write left (workbench.rate_step keeps it on the
    # session): read again, it would cost the hottest request one more round trip.
    own: OwnRatings = getattr(session, "own_ratings_written", None)
    if own is None:
        own = {} if new else own_ratings(session)
    rated = {index: rating for index, (rating, _) in own.items()}
    flagged = {index: flag for index, (_, flag) in own.items()}
    steps = session.solution.steps
    progress = rules.Progress(
        total_steps=len(steps),
        own=tuple(rated.get(step) for step in range(len(rated))),
        offered=rules.offered_per_step(session.solution.alternatives),
    )
    error_step = progress.error_step
    done: dict[int, tuple[int | None, bool | None]] = {}
    if error_step is not None:
        # PRM800K phase 2: the other completions offered for the wrong step are rated, one
        # at a time, before the label ends.
        done = {
            completion: (rating, flag)
            for completion, rating, flag in StepRating.objects.filter(
                step__session=session, step__index=error_step, completion_index__gt=0
            ).values_list("completion_index", "rating", "flagged")
        }
        progress = replace(progress, alternatives_done=len(done))
    offered = (
        []
        if error_step is None
        else alternatives_at(solution=session.solution, step_index=error_step)
    )
    shown = progress.shown()
    alternatives = [
        Item(
            index=step,
            completion=completion,
            key=rules.item_key(step, completion),
            text=offered[completion - 1],
            rating=done.get(completion, (None, None))[0],
            flagged=done.get(completion, (None, None))[1],
        )
        for step, completion in shown
        if completion
    ]
    judge = judge_display.shown(session)
    items = [
        Item(
            index=step,
            completion=0,
            key=rules.item_key(step),
            text=steps[step],
            rating=rated.get(step),
            flagged=flagged.get(step),
            alternatives=alternatives if step == error_step else [],
            judge=judge.beside(step, rated=step in rated),
            suggestion=judge.suggestion(step),
        )
        for step, completion in shown
        if not completion
    ]
    by_key = {item.key: item for item in [*items, *alternatives]}
    current = progress.current()
    outcome = progress.outcome()
    human = None
    if error_step is not None:
        written = (
            StepLabel.objects.filter(session=session, index=error_step)
            .values_list("human_completion", flat=True)
            .first()
        )
        human = written.get("text") if isinstance(written, dict) else None
    return WorkbenchState(
        items=items,
        current=by_key[rules.item_key(*current)] if current else None,
        outcome=outcome,
        error_step=error_step,
        total_steps=len(steps),
        alternatives_offered=len(offered),
        progress=progress,
        human_completion=human,
        can_write_human_completion=outcome == rules.FOUND_ERROR and session.accepts_ratings,
        judge_display=judge.display,
    )


# ---------------------------------------------------------------------------------------------
# A step the labeler writes in place of the wrong one (PRM800K phase 1's human_completion)


# --- the answer-review queue (labeling/services/answer_review.py) ---------------------------

# The ids a visit of the review page has skipped travel with it, at most this many (the latest).
ANSWER_REVIEW_SKIPPED_MAX = 200


def answer_review_queue(*, skipped: Sequence[int] = ()) -> QuerySet[Solution]:
    """Solutions whose final answer waits for a person, oldest first: ungraded, with a final
    answer and a problem with an answer, not decided yet, and not among `skipped`."""
    return (
        Solution.objects.filter(is_correct__isnull=True)
        .alias(given=Trim("answer"), truth=Trim("problem__answer"))
        .exclude(given="")
        .exclude(truth="")
        .exclude(Exists(AnswerReview.objects.filter(solution_id=OuterRef("pk"))))
        .exclude(pk__in=list(skipped)[-ANSWER_REVIEW_SKIPPED_MAX:])
        .select_related("problem")
        .order_by("created_at", "id")
    )


def answer_review_pairs() -> Iterator[dict]:
    """The hand-judged answer pairs, in the order they were decided, streamed: the two texts
    as they were compared, the verdict, when, the decider's labeler UUID (never a username)
    and the problem's `unique_id`."""
    rows = AnswerReview.objects.order_by("decided_at", "id").values_list(
        "solution_id",
        "solution__problem__unique_id",
        "answer",
        "ground_truth",
        "verdict",
        "decided_at",
        "decided_by__labeler__uuid",
    )
    for solution_id, unique_id, answer, truth, verdict, at, uuid in rows.iterator(chunk_size=2000):
        yield {
            "solution": solution_id,
            "problem_unique_id": unique_id,
            "answer": answer,
            "ground_truth": truth,
            "verdict": verdict,
            "decided_at": at.isoformat(),
            "decided_by": str(uuid) if uuid else None,
        }
