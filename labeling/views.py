from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST
from django_htmx.http import push_url

from labeling import quality, selectors, services, tokens
from labeling.forms import ApiTokenForm, ExportForm
from labeling.models import Labeler, LabelingSession, StepRating
from labeling.permissions import (
    ADMIN,
    ANNOTATOR,
    RESEARCHER,
    can_export_labels,
    can_manage_labelers,
    can_view_quality,
    has_role,
)


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """My progress today, my totals and agreement with gold, and the way in to labeling."""
    context: dict = {"can_label": has_role(request.user, ANNOTATOR, RESEARCHER, ADMIN)}
    labeler = Labeler.objects.filter(user=request.user).first()
    if labeler is not None:
        context["today"] = quality.today_progress(labeler=labeler)
        context["me"] = quality.labeler_figures(labeler_ids=[labeler.pk])[0]
    if can_view_quality(request.user):
        context.update(selectors.overview())
    return render(request, "labeling/home.html", context)


@login_required
def problem_list(request: HttpRequest) -> HttpResponse:
    if not can_view_quality(request.user):
        raise PermissionDenied("Annotators see problems only while labeling them.")
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


# (rating, CSS class, button text): colour, icon and words, so no meaning rests on colour.
RATING_BUTTONS = ((-1, "bad", "✗ -1 bad"), (0, "ok", "○ 0 okay"), (1, "good", "✓ +1 good"))


def _workbench_context(session: LabelingSession) -> dict:
    """The steps shown so far and the one item (a step or an alternative) to rate next."""
    rated, flagged = {}, {}
    for index, rating, flag in StepRating.objects.filter(
        step__session=session, completion_index=0
    ).values_list("step__index", "rating", "flagged"):
        rated[index], flagged[index] = rating, flag
    steps = session.solution.steps
    error_step = next((i for i, r in rated.items() if r == -1), None)
    current = None
    if error_step is None and len(rated) < len(steps):
        current = f"s{len(rated)}"
    shown = len(rated) + (1 if current is not None else 0)
    items = [
        {
            "index": i,
            "key": f"s{i}",
            "text": steps[i],
            "rating": rated.get(i),
            "flagged": flagged.get(i),
            "alternatives": [],
        }
        for i in range(shown)
    ]
    outcome = "solution" if len(rated) == len(steps) and error_step is None else None
    if error_step is not None:
        # PRM800K phase 2: the other completions offered for the wrong step are rated, one
        # at a time, before the label ends.
        offered = services.alternatives_at(solution=session.solution, step_index=error_step)
        done = services.rated_alternatives(session)
        count = sum(1 for step, _ in done if step == error_step)
        if count < len(offered):
            current = f"s{error_step}c{count + 1}"
        else:
            outcome = "found_error"
        items[error_step]["alternatives"] = [
            {
                "index": error_step,
                "completion": k,
                "key": f"s{error_step}c{k}",
                "text": offered[k - 1],
                "rating": getattr(done.get((error_step, k)), "rating", None),
                "flagged": getattr(done.get((error_step, k)), "flagged", None),
            }
            for k in range(1, min(count + 1, len(offered)) + 1)
        ]
    return {
        "session": session,
        # Reversed once: every step's three buttons post here, and a rating re-renders them.
        "rate_url": reverse("label-rate", args=[session.pk]),
        "problem": session.solution.problem,
        "steps": items,
        "current": current,
        "outcome": outcome,
        "total_steps": len(steps),
        "choices": RATING_BUTTONS,
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
            completion_index=int(request.POST.get("completion_index", "0")),
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
    if not request.htmx:
        return redirect("label-next")
    # Prefetch: the next solution is assigned now and comes back in this response, swapped
    # in without a page load. Unopened, it is an ordinary session whose lease runs out.
    try:
        assignment = services.next_assignment(labeler=labeler)
    except services.LabelingRefused as exc:
        raise PermissionDenied(str(exc)) from None
    if assignment is None:
        response = render(request, "labeling/_nothing_to_label.html")
        return push_url(response, reverse("label-next"))
    session = LabelingSession.objects.select_related("solution__problem").get(
        pk=assignment.session.pk
    )
    response = render(request, "labeling/_workbench.html", _workbench_context(session))
    return push_url(response, reverse("label-session", args=[session.pk]))


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


# --- quality control and guidelines ----------------------------------------------------------


@login_required
def quality_dashboard(request: HttpRequest) -> HttpResponse:
    if not can_view_quality(request.user):
        raise PermissionDenied("The quality page is for researchers and admins.")
    context = {
        "labelers": quality.labeler_figures(),
        "can_manage": can_manage_labelers(request.user),
    }
    return render(request, "labeling/quality.html", context)


@login_required
@require_POST
def labeler_active(request: HttpRequest, labeler_uuid: str) -> HttpResponse:
    if not can_manage_labelers(request.user):
        raise PermissionDenied("Only admins can deactivate labelers.")
    labeler = get_object_or_404(Labeler.objects.select_related("user"), uuid=labeler_uuid)
    active = request.POST.get("active") == "1"
    try:
        quality.set_labeler_active(labeler=labeler, active=active, by=request.user)
    except quality.QualityRefused as exc:
        messages.error(request, str(exc))
    else:
        done = "reactivated" if active else "deactivated"
        messages.success(request, f"Labeler {labeler.uuid} {done}.")
    return redirect("quality")


@login_required
def guidelines(request: HttpRequest) -> HttpResponse:
    return render(request, "labeling/guidelines.html", {"guideline": quality.current_guideline()})


@login_required
def api_token_page(request: HttpRequest) -> HttpResponse:
    """Create and revoke my API tokens; a new token is shown once, here, and never again."""
    new_token = None
    if request.method == "POST":
        if "revoke" in request.POST:
            tokens.revoke_api_token(user=request.user, token_key=request.POST["revoke"])
            return redirect("api-token-page")
        form = ApiTokenForm(request.POST)
        if form.is_valid():
            new_token = tokens.create_api_token(
                user=request.user, expires_in_days=form.cleaned_data["expires_in_days"]
            )
            form = ApiTokenForm()
    else:
        form = ApiTokenForm()
    return render(
        request,
        "labeling/api_tokens.html",
        {"form": form, "new_token": new_token, "tokens": tokens.api_tokens(user=request.user)},
    )
