"""Read operations of the annotation domain (the PRM800K export has its own module, export.py)."""

from django.db.models import Count, Exists, OuterRef, QuerySet

from labeling.models import Generation, LabelingSession, Problem, Solution


def problem_list() -> QuerySet[Problem]:
    return Problem.objects.order_by("subject", "level", "id").annotate(
        solution_count=Count("solutions")
    )


def overview() -> dict[str, int]:
    """Counts for the landing page."""
    return {
        "problem_count": Problem.objects.count(),
        "solution_count": Solution.objects.count(),
        "submitted_count": LabelingSession.objects.filter(submitted_at__isnull=False).count(),
    }


def current_generation() -> Generation | None:
    """The newest selected generation (screening, number -1, is never the current one)."""
    return Generation.objects.filter(number__gte=0).order_by("-number").first()


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
