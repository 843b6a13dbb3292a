"""Rating counts kept per label, so that the quality figures read a row per label, not per rating.

At PRM800K's size a million step ratings sit under 100,000 labels; counting them per labeler or
per judge display on every look at the quality page took seconds (issue 44). A submitted label's
ratings change only through a correction, which stamps `edited_at`, so a count made once holds
until then: each label's counts are kept in a `SessionTally` row, and the label is marked with
the version they were counted from (`LabelingSession.tallied_version`: its `edited_at`, else
`submitted_at`). A read first counts again the labels whose mark is not their version (new
labels, corrected ones), found through a partial index that holds just them, then adds up the
tallies. Whoever deletes tallies clears the marks with them. Nothing has to remember to update
them: whatever path wrote a label (the workbench, live labeling, an import, a correction, an
undone correction), the next read sees it. A label reopened for a correction is counted from its
ratings on each read until it is saved or cancelled (its ratings are in flux; a handful at a
time).

The counts are made in one snapshot of the database (REPEATABLE READ on PostgreSQL; SQLite's
transactions are snapshots already), so a tally never mixes a label's version with ratings of
another; docs/benchmarks.md ("Pages at PRM800K size") has the query plans.
"""

from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from django.db import IntegrityError, connection, transaction
from django.db.models import Count, OuterRef, Q, QuerySet, Subquery, Sum

from labeling.models import (
    LABEL_VERSION,
    UNTALLIED,
    JudgeDisplay,
    LabelingSession,
    SessionTally,
    StepRating,
)

CHUNK = 5_000
# A label's ratings as kept in its tally: a character per step of the solution, in order.
# Decoding JSON was half of the quality page's time at 100,000 labels (issue 44): 25 µs a
# label for [[index, rating], ...], against a few for a short string.
RATING_CHARS = {1: "+", 0: "0", -1: "-"}
NOT_RATED = "."
CHAR_RATINGS = {char: rating for rating, char in RATING_CHARS.items()}
DISPLAYS = tuple(JudgeDisplay.values)  # the tally's columns, one per display
VERSION = LABEL_VERSION
# Inside `refreshed()`: the labels still counted live, every tally being current otherwise.
_CURRENT: ContextVar[frozenset[int] | None] = ContextVar("tallies_current", default=None)
# Inside `refreshed()`: the tallies' sums already read, by the labelers they were read for.
_SUMS: ContextVar[dict | None] = ContextVar("tallies_sums", default=None)


def _ratings(session_ids: Iterable[int]) -> QuerySet[StepRating]:
    """The ratings the figures count: the solution's own steps (completion 0), rated."""
    return StepRating.objects.filter(
        step__session_id__in=list(session_ids), completion_index=0, rating__isnull=False
    )


def encode(ratings: dict[int, int]) -> str:
    """Step index -> rating, as a tally keeps it (`RATING_CHARS`, `NOT_RATED` for a gap)."""
    if not ratings:
        return ""
    return "".join(
        RATING_CHARS[ratings[i]] if i in ratings else NOT_RATED for i in range(max(ratings) + 1)
    )


def decode(text: str) -> dict[int, int]:
    """A tally's ratings back as step index -> rating."""
    return {i: CHAR_RATINGS[char] for i, char in enumerate(text) if char != NOT_RATED}


def _untallied(sessions: QuerySet[LabelingSession]) -> list[tuple[int, bool]]:
    """(id, reopened) of the submitted sessions among `sessions` whose tally is missing or of
    another version, or that are reopened for a correction: the rows of the partial index
    `session_untallied`, however many labels there are."""
    return list(
        sessions.filter(UNTALLIED)
        .annotate(reopened=Q(reopened_at__isnull=False))
        .values_list("pk", "reopened")
    )


def _count(session_ids: list[int]) -> tuple[dict, dict[int, Counter], dict[int, list]]:
    """(labeler and version of each settled session, its ratings counted by display, the
    ratings), read in one snapshot."""
    # Inside an outer transaction (ATOMIC_REQUESTS, a test) the snapshot is the outer one's:
    # SET TRANSACTION must be a transaction's first statement.
    outermost = not connection.in_atomic_block
    with transaction.atomic():
        if outermost and connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        versions = {
            pk: (labeler_id, version)
            for pk, labeler_id, version in LabelingSession.objects.filter(
                pk__in=session_ids, submitted_at__isnull=False, reopened_at__isnull=True
            )
            .annotate(version=VERSION)
            .values_list("pk", "labeler_id", "version")
        }
        counts: dict[int, Counter] = defaultdict(Counter)
        rated: dict[int, dict[int, int]] = defaultdict(dict)
        for session_id, display, index, rating in (
            _ratings(versions)
            .order_by()
            .values_list("step__session_id", "judge_display", "step__index", "rating")
        ):
            counts[session_id][display] += 1
            rated[session_id][index] = rating
    return versions, counts, rated


def refresh(sessions: QuerySet[LabelingSession] | None = None) -> list[int]:
    """Count the untallied settled labels among `sessions` (all by default); return the ids of
    the submitted ones still without a current tally (reopened ones), to be counted live."""
    untallied = _untallied(LabelingSession.objects.all() if sessions is None else sessions)
    live = [pk for pk, reopened in untallied if reopened]
    settle = [pk for pk, reopened in untallied if not reopened]
    for start in range(0, len(settle), CHUNK):
        chunk = settle[start : start + CHUNK]
        versions, counts, rated = _count(chunk)
        rows = [
            SessionTally(
                session_id=pk,
                labeler_id=labeler_id,
                counted_version=version,
                **{display: counts[pk][display] for display in DISPLAYS},
                ratings=encode(rated[pk]),
            )
            for pk, (labeler_id, version) in versions.items()
        ]
        live += [pk for pk in chunk if pk not in versions]  # reopened since they were listed
        try:
            with transaction.atomic():  # a savepoint, so a caller's transaction survives
                SessionTally.objects.bulk_create(
                    rows,
                    update_conflicts=True,
                    unique_fields=["session"],
                    update_fields=["labeler", "counted_version", *DISPLAYS, "ratings"],
                )
                # The label's mark, and only it, copied from the tallies just written in one
                # statement: a correction saved meanwhile moves the label's version past the
                # mark, so the next read counts it again.
                LabelingSession.objects.filter(pk__in=list(versions)).update(
                    tallied_version=Subquery(
                        SessionTally.objects.filter(session_id=OuterRef("pk")).values(
                            "counted_version"
                        )[:1]
                    )
                )
        except IntegrityError:
            # A label deleted since it was counted: these counts are not kept, and this read
            # adds them up live; the next read counts the chunk again.
            live += chunk
    return live


@contextmanager
def refreshed() -> Iterator[None]:
    """Bring every tally up to date once for what runs inside: a page that shows several
    figures (the quality page) compares the labels with their tallies once, not per figure."""
    token = _CURRENT.set(frozenset(refresh()))
    sums = _SUMS.set({})
    try:
        yield
    finally:
        _SUMS.reset(sums)
        _CURRENT.reset(token)


def live_among(sessions: QuerySet[LabelingSession]) -> list[int]:
    """The submitted labels among `sessions` whose tally does not hold (reopened for a
    correction); every other one has a current tally once this returns."""
    current = _CURRENT.get()
    return list(current) if current is not None else refresh(sessions)


def _tallied(live: list[int], labeler_ids: list[int] | None = None) -> QuerySet[SessionTally]:
    """The current tallies, after `refresh` (which returned `live`): every settled submitted
    label has one, and a label is never unsubmitted, so no join back to the labels is needed."""
    rows = SessionTally.objects.exclude(session_id__in=live)
    return rows if labeler_ids is None else rows.filter(labeler_id__in=labeler_ids)


def _sums_by_labeler(live: list[int], labeler_ids: list[int] | None = None) -> dict[int, Counter]:
    """Labeler id -> display -> rated steps, added up from the current tallies; read once per
    `refreshed()` block for every labeler (the quality page's figures share it)."""
    key = None if labeler_ids is None else tuple(sorted(labeler_ids))
    kept = _SUMS.get()
    if kept is not None and key in kept:
        return kept[key]
    sums = {
        row["labeler_id"]: Counter({display: row[display] or 0 for display in DISPLAYS})
        for row in _tallied(live, labeler_ids)
        .values("labeler_id")
        .annotate(**{display: Sum(display) for display in DISPLAYS})
    }
    if kept is not None:
        kept[key] = sums
    return sums


def steps_by_labeler(*, labeler_ids: list[int] | None = None) -> dict[int, int]:
    """Labeler id -> steps rated (of solutions' own steps) in their submitted labels."""
    sessions = LabelingSession.objects.filter(submitted_at__isnull=False)
    if labeler_ids is not None:
        sessions = sessions.filter(labeler_id__in=labeler_ids)
    live = live_among(sessions)
    steps: Counter = Counter()
    for labeler_id, by_display in _sums_by_labeler(live, labeler_ids).items():
        steps[labeler_id] += sum(by_display.values())
    counted_live = _ratings(live)
    if labeler_ids is not None:
        counted_live = counted_live.filter(step__session__labeler_id__in=labeler_ids)
    for labeler_id, n in (
        counted_live.values("step__session__labeler_id")
        .annotate(n=Count("pk"))
        .values_list("step__session__labeler_id", "n")
    ):
        steps[labeler_id] += n
    return dict(steps)


def ratings_by_display() -> dict[str, int]:
    """Display -> rated steps (solutions' own) of submitted labels with that display."""
    live = live_among(LabelingSession.objects.filter(submitted_at__isnull=False))
    counts: Counter = Counter()
    for by_display in _sums_by_labeler(live).values():
        counts.update(by_display)
    for display, n in (
        _ratings(live)
        .values("judge_display")
        .annotate(n=Count("pk"))
        .values_list("judge_display", "n")
    ):
        counts[display] += n
    return {display: n for display, n in counts.items() if n}
