"""What every way of labeling shares: a session's lease, its lock, and the refusals.

The workbench (phase 2: rating given solutions) and live labeling (phase 1: building one from
proposals) both change a labeler's own open session under its row lock and count time on task
the same way; this module is that common ground, so neither imports the other's internals.
"""

from datetime import datetime, timedelta

from django.db.models import F

from core.errors import Conflict, NotAllowed, NotFound
from labeling.models import Labeler, LabelingSession

LEASE = timedelta(minutes=30)
# Gaps between a labeler's actions longer than this count as idle, not as time on task.
IDLE_GAP = timedelta(minutes=3)


LEASE_LAPSED = (
    "This session's lease ran out and it went to someone else. Your ratings so far are kept "
    "with it; choose Label for your next solution."
)


class LabelingRefused(Conflict):
    """A labeling request that cannot be applied; the message says why."""


class NotYourSession(LabelingRefused, NotFound):
    """No session of this labeler has that id: missing and another labeler's alike, so that
    answers do not tell which session ids exist."""


class LabelerDeactivated(LabelingRefused, NotAllowed):
    """The labeler was deactivated (quality control) and gets no more sessions."""


# A labeler's own written step (phase 1's human_completion).
HUMAN_COMPLETION_MAX_CHARS = 5000


def locked_session(*, session_id: int, labeler: Labeler) -> LabelingSession:
    # The session's row alone: its solution (a QC one is served to every labeler) is shared,
    # and locking it would queue other labelers' ratings. The solution comes along, its
    # problem does not: a rating (the hottest request) never shows the problem, and the
    # wider statement cost it a sixth of its time; a page that shows it reads it then. The
    # generation's judge display comes along, which every rating stores (`judge_display`).
    try:
        session = (
            LabelingSession.objects.select_for_update(of=("self",))
            .select_related("solution")
            .annotate(generation_judge_display=F("generation__judge_display"))
            .get(pk=session_id)
        )
    except LabelingSession.DoesNotExist:
        session = None
    if session is None or session.labeler_id != labeler.pk:
        raise NotYourSession(f"You have no session {session_id}.")
    return session


def session_to_change(*, session_id: int, labeler: Labeler) -> LabelingSession:
    """The caller's session, locked, refused unless it is still open or reopened by its
    labeler to correct it (`labeling.services.corrections`)."""
    session = locked_session(session_id=session_id, labeler=labeler)
    if session.is_being_corrected:
        if session.used_at is not None or session.adjudicated_at is not None:
            # Used while reopened (a model trained on it, a reviewer chose it): as it stands.
            raise LabelingRefused(
                "This label was used meanwhile (a model was trained on it, or a reviewer "
                "chose it): it takes no more changes. Cancel the correction to keep it as "
                "it was."
            )
        return session
    if session.abandoned_at is not None:
        # A tab left open past the lease: say why, not "finished" (the page shows this).
        raise LabelingRefused(LEASE_LAPSED)
    if not session.is_open:
        raise LabelingRefused("This session is already finished.")
    return session


def touch(session: LabelingSession, now: datetime) -> None:
    last = session.last_activity_at or session.started_at or now
    gap = min(max(now - last, timedelta(0)), IDLE_GAP)
    session.total_time = (session.total_time or 0) + int(gap.total_seconds() * 1000)
    session.last_activity_at = now
    session.lease_expires_at = now + LEASE
