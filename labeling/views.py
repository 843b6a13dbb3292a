from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from labeling import selectors, services
from labeling.forms import ExportForm
from labeling.models import LabelingSession, StepRating
from labeling.permissions import ADMIN, ANNOTATOR, RESEARCHER, can_export_labels, has_role


@login_required
def home(request: HttpRequest) -> HttpResponse:
    return render(request, "labeling/home.html", selectors.overview())


@login_required
def problem_list(request: HttpRequest) -> HttpResponse:
    return render(request, "labeling/problem_list.html", {"problems": selectors.problem_list()})


def prm800k_response(
    filters: selectors.ExportFilters, within: QuerySet[LabelingSession] | None = None
) -> StreamingHttpResponse:
    """A streamed JSONL download: rows are written as they are read, never held in memory."""
    records = selectors.iter_prm800k_records(filters=filters, within=within)
    lines = (selectors.json_line(record) for record in records)
    response = StreamingHttpResponse(lines, content_type="application/jsonl; charset=utf-8")
    stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
    response["Content-Disposition"] = f'attachment; filename="prm800k-{stamp}.jsonl"'
    return response


@login_required
def export_labels(request: HttpRequest) -> HttpResponse:
    if not can_export_labels(request.user):
        raise PermissionDenied("Only admins can export labels.")
    if "download" not in request.GET:
        return render(request, "labeling/export.html", {"form": ExportForm()})
    form = ExportForm(request.GET)
    if not form.is_valid():
        return render(request, "labeling/export.html", {"form": form}, status=400)
    return prm800k_response(form.filters())


# --- the annotator's workbench ---------------------------------------------------------------


def _labeler(request: HttpRequest):
    if not has_role(request.user, ANNOTATOR, RESEARCHER, ADMIN):
        raise PermissionDenied("Labeling is for annotators.")
    return services.get_or_create_labeler(user=request.user)


@login_required
def label_next(request: HttpRequest) -> HttpResponse:
    """Assign (or resume) a solution and open it."""
    try:
        assignment = services.next_assignment(labeler=_labeler(request))
    except services.LabelingRefused as exc:
        raise PermissionDenied(str(exc)) from None
    if assignment is None:
        return render(request, "labeling/nothing_to_label.html")
    return redirect("label-session", session_id=assignment.session.pk)


def _workbench_context(session: LabelingSession) -> dict:
    rated = services.rated_steps(session)
    flagged = dict(
        StepRating.objects.filter(step__session=session, completion_index=0).values_list(
            "step__index", "flagged"
        )
    )
    steps = session.solution.steps
    current = len(rated) if -1 not in rated.values() and len(rated) < len(steps) else None
    shown = len(rated) + (1 if current is not None else 0)
    outcome = None
    if -1 in rated.values():
        outcome = "found_error"
    elif len(rated) == len(steps):
        outcome = "solution"
    return {
        "session": session,
        "problem": session.solution.problem,
        "steps": [
            {"index": i, "text": steps[i], "rating": rated.get(i), "flagged": flagged.get(i)}
            for i in range(shown)
        ],
        "current": current,
        "outcome": outcome,
        "total_steps": len(steps),
    }


@login_required
def label_session(request: HttpRequest, session_id: int) -> HttpResponse:
    labeler = _labeler(request)
    session = get_object_or_404(
        LabelingSession.objects.select_related("solution__problem"), pk=session_id
    )
    if session.labeler_id != labeler.pk:
        raise PermissionDenied("This session belongs to another labeler.")
    if not session.is_open:
        return redirect("label-next")
    return render(request, "labeling/workbench.html", _workbench_context(session))


@login_required
@require_POST
def rate(request: HttpRequest, session_id: int) -> HttpResponse:
    labeler = _labeler(request)
    try:
        session = services.rate_step(
            session_id=session_id,
            labeler=labeler,
            step_index=int(request.POST.get("step_index", "-1")),
            rating=int(request.POST.get("rating", "9")),
            flagged=request.POST.get("flagged") in ("1", "on", "true"),
        )
    except services.NotYourSession as exc:
        raise PermissionDenied(str(exc)) from None
    except (services.LabelingRefused, ValueError) as exc:
        return HttpResponse(str(exc), status=409)
    return render(request, "labeling/_steps.html", _workbench_context(session))


@login_required
@require_POST
def submit(request: HttpRequest, session_id: int) -> HttpResponse:
    labeler = _labeler(request)
    try:
        services.submit_session(
            session_id=session_id,
            labeler=labeler,
            finish_reason=request.POST.get("finish_reason", ""),
            reason_text=request.POST.get("reason", ""),
        )
    except services.NotYourSession as exc:
        raise PermissionDenied(str(exc)) from None
    except services.LabelingRefused as exc:
        return HttpResponse(str(exc), status=409)
    if request.htmx:
        return HttpResponse(headers={"HX-Redirect": reverse("label-next")})
    return redirect("label-next")


@login_required
@require_POST
def renew(request: HttpRequest, session_id: int) -> HttpResponse:
    try:
        services.renew_lease(session_id=session_id, labeler=_labeler(request))
    except services.NotYourSession as exc:
        raise PermissionDenied(str(exc)) from None
    except services.LabelingRefused as exc:
        return HttpResponse(str(exc), status=409)
    return HttpResponse(status=204)
