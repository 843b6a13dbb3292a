"""Bad-problem reports: one labeler's claim that a problem is bad, and an admin's review.

A labeler ends a session with bad_problem and a reason; that records a report and nothing
more for everyone else. The problem's shared solutions leave the reporter's queue only, for
good (a dismissal does not ask them again). Quality-control and screening solutions are
never hidden by a report: they are served to every labeler, the reporter included, so that
gold keeps measuring everyone.

An admin reviews the open reports of a problem together: *confirm* marks the problem bad
(it leaves selection and every queue), *dismiss* closes the reports and the problem stays.
Confirming a problem that still has quality-control or screening solutions is refused:
marking it bad would silently take gold out of quality control, so those solutions are
unmarked first, on purpose, in the admin.
"""

from dataclasses import dataclass, field
from datetime import datetime
from uuid import UUID

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from core.errors import Conflict, NotFound
from labeling.models import Labeler, LabelingSession, Problem, ProblemReport, Solution


class ReportRefused(Conflict):
    """A review that the current state does not allow; the message says why."""


class NoSuchProblem(NotFound):
    """The review names a problem that does not exist."""


# ---------------------------------------------------------------------------------------------
# Writes


def record_report(
    *, session: LabelingSession, reason: str, now: datetime | None = None
) -> ProblemReport:
    """Record the labeler's report on the problem of `session` (ended with bad_problem)."""
    report, _created = ProblemReport.objects.get_or_create(
        session=session,
        defaults={
            "problem_id": session.solution.problem_id,
            "labeler_id": session.labeler_id,
            "reason": reason,
            "created_at": now or timezone.now(),
        },
    )
    return report


def _locked_problem(problem_id: int) -> Problem:
    # The problem's row lock serialises reviews of the same problem: one of two admins
    # confirming and dismissing at once finds the reports already closed.
    problem = Problem.objects.select_for_update().filter(pk=problem_id).first()
    if problem is None:
        raise NoSuchProblem(f"No problem {problem_id}.")
    return problem


def _close(*, problem: Problem, status: str, by: AbstractBaseUser, now: datetime | None) -> int:
    closed = ProblemReport.objects.filter(problem=problem, status=ProblemReport.Status.OPEN).update(
        status=status, reviewed_by=by, reviewed_at=now or timezone.now()
    )
    if not closed:
        raise ReportRefused(
            f"Problem {problem.pk} has no open reports (they may have been reviewed already)."
        )
    return closed


def gold_solutions(*, problem_id: int) -> int:
    """How many of the problem's solutions are quality control or screening."""
    return (
        Solution.objects.filter(problem_id=problem_id)
        .filter(Q(is_quality_control=True) | Q(is_screening=True))
        .count()
    )


def confirm_report(*, problem_id: int, by: AbstractBaseUser, now: datetime | None = None) -> int:
    """Confirm the open reports of a problem: it is marked bad and leaves every queue and
    selection. Returns how many reports were closed.

    Refused while the problem has quality-control or screening solutions: those are unmarked
    first, so that gold never drops out of quality control unnoticed.
    """
    with transaction.atomic():
        problem = _locked_problem(problem_id)
        gold = gold_solutions(problem_id=problem_id)
        if gold:
            raise ReportRefused(
                f"Problem {problem_id} has {gold} quality-control or screening solution(s). "
                "Unmark them in the admin first: marking the problem bad would take them out "
                "of quality control."
            )
        closed = _close(problem=problem, status=ProblemReport.Status.CONFIRMED, by=by, now=now)
        problem.is_bad = True
        problem.save(update_fields=["is_bad"])
    return closed


def dismiss_report(*, problem_id: int, by: AbstractBaseUser, now: datetime | None = None) -> int:
    """Dismiss the open reports of a problem: it stays in the queues (the reporters still do
    not see it again). Returns how many reports were closed."""
    with transaction.atomic():
        closed = _close(
            problem=_locked_problem(problem_id),
            status=ProblemReport.Status.DISMISSED,
            by=by,
            now=now,
        )
    return closed


# ---------------------------------------------------------------------------------------------
# Reads


def reported_by(*, labeler: Labeler | int) -> Exists:
    """For a Solution queryset: whether the labeler reported the solution's problem."""
    return Exists(ProblemReport.objects.filter(labeler=labeler, problem_id=OuterRef("problem_id")))


@dataclass(frozen=True)
class ReportLine:
    labeler: UUID
    reason: str
    created_at: datetime


@dataclass
class ProblemReports:
    """The open reports of one problem, as the review page lists them."""

    problem: Problem
    gold_solutions: int  # quality-control and screening solutions: confirm is refused
    reports: list[ReportLine] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.reports)


def open_reports() -> list[ProblemReports]:
    """Problems with open reports, the most reported first, each with its reports."""
    by_problem: dict[int, ProblemReports] = {}
    rows = (
        ProblemReport.objects.filter(status=ProblemReport.Status.OPEN)
        .select_related("problem", "labeler")
        .order_by("problem_id", "created_at", "id")
    )
    for report in rows:
        entry = by_problem.get(report.problem_id)
        if entry is None:
            entry = by_problem[report.problem_id] = ProblemReports(
                problem=report.problem, gold_solutions=0
            )
        entry.reports.append(
            ReportLine(
                labeler=report.labeler.uuid, reason=report.reason, created_at=report.created_at
            )
        )
    if by_problem:
        gold = (
            Solution.objects.filter(problem_id__in=by_problem)
            .filter(Q(is_quality_control=True) | Q(is_screening=True))
            .values_list("problem_id", flat=True)
        )
        for problem_id in gold:
            by_problem[problem_id].gold_solutions += 1
    return sorted(
        by_problem.values(), key=lambda e: (-e.count, e.reports[0].created_at, e.problem.pk)
    )
