"""Researcher pages: training runs (start, watch, cancel), model versions (activate),
inspection (one solution's steps beside the PRM's scores; where PRM and humans disagree) and
generations of active learning (composition, labelers' progress and agreement, overlap, publish
the next one).

A refusal on a form page is shown on that page, with the status annotate.errors gives its kind.
"""

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from annotate.errors import DomainError, http_status
from labeling import agreement
from labeling.models import Generation, Solution
from labeling.permissions import ADMIN, RESEARCHER, can_manage_labelers, has_role
from labeling.services import overlap
from trainer import model_versions, pipeline, runs, selectors
from trainer.forms import GenerationForm, OverlapForm, TrainingRunForm
from trainer.models import ModelVersion, TrainingRun


def _require_researcher(request: HttpRequest) -> None:
    if not has_role(request.user, RESEARCHER, ADMIN):
        raise PermissionDenied("Training is for researchers and admins.")


def _run_or_404(run_id: int) -> TrainingRun:
    try:
        return selectors.training_run(run_id=run_id)
    except TrainingRun.DoesNotExist:
        raise Http404("No such training run.") from None


def _recent_runs() -> list[TrainingRun]:
    recent = list(selectors.training_runs()[:100])
    for run in recent:
        run.key_metric = selectors.key_metric(run.metrics[-1] if run.metrics else None)
    return recent


@login_required
def run_list(request: HttpRequest) -> HttpResponse:
    _require_researcher(request)
    form = TrainingRunForm(request.POST or None)
    status = 200
    if request.method == "POST":
        status = 400
        if form.is_valid():
            try:
                run = runs.request_training_run(user=request.user, params=form.training_params)
            except DomainError as exc:
                messages.error(request, str(exc))
                status = http_status(exc)
            else:
                messages.success(request, f"Training run {run.pk} is queued.")
                return redirect("run-detail", run_id=run.pk)
    recent = _recent_runs()
    return render(
        request,
        "trainer/run_list.html",
        {
            "runs": recent,
            "form": form,
            "live": any(run.is_live for run in recent),
            "metric": settings.PRM_PROMOTE_METRIC,
        },
        status=status,
    )


@login_required
def run_table(request: HttpRequest) -> HttpResponse:
    """The runs table alone, polled by htmx while a run is live."""
    _require_researcher(request)
    recent = _recent_runs()
    return render(
        request,
        "trainer/_run_table.html",
        {
            "runs": recent,
            "live": any(run.is_live for run in recent),
            "metric": settings.PRM_PROMOTE_METRIC,
        },
    )


CURVE_METRICS = ("step_accuracy", "step_auroc", "first_error_f1", "best_of_n")


def _curves(epochs: list[dict]) -> list[dict]:
    """SVG polylines (viewBox 400x160, y from 0 to 1) for the held-out metrics over epochs."""
    curves = []
    for name in CURVE_METRICS:
        values = [(i, epoch.get(name)) for i, epoch in enumerate(epochs)]
        values = [(i, v) for i, v in values if isinstance(v, int | float)]
        if not values:
            continue
        span = max(len(epochs) - 1, 1)
        points = " ".join(
            f"{30 + 360 * i / span:.1f},{140 - 130 * min(max(v, 0.0), 1.0):.1f}" for i, v in values
        )
        curves.append({"name": name, "points": points})
    return curves


def _run_context(run: TrainingRun) -> dict:
    names = sorted({key for epoch in run.metrics for key in epoch if key != "epoch"})
    return {
        "run": run,
        "metric_names": names,
        "epoch_rows": [
            (epoch.get("epoch"), [epoch.get(name) for name in names]) for epoch in run.metrics
        ],
        "curves": _curves(run.metrics) if len(run.metrics) > 1 else [],
        "version": getattr(run, "model_version", None),
    }


@login_required
def run_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    _require_researcher(request)
    return render(request, "trainer/run_detail.html", _run_context(_run_or_404(run_id)))


@login_required
def run_progress(request: HttpRequest, run_id: int) -> HttpResponse:
    """The live part of a run page; htmx polls it every 2 s and stops once the run is over."""
    _require_researcher(request)
    return render(request, "trainer/_run_progress.html", _run_context(_run_or_404(run_id)))


@login_required
@require_POST
def run_cancel(request: HttpRequest, run_id: int) -> HttpResponse:
    _require_researcher(request)
    _run_or_404(run_id)
    try:
        run = runs.cancel_training_run(run_id=run_id)
    except DomainError as exc:
        messages.error(request, str(exc))
    else:
        if run.status == TrainingRun.Status.CANCELLED:
            messages.success(request, f"Training run {run_id} is cancelled.")
        else:
            messages.info(request, f"Training run {run_id} stops at its next step.")
    return redirect("run-detail", run_id=run_id)


@login_required
def model_list(request: HttpRequest) -> HttpResponse:
    _require_researcher(request)
    versions = [
        (version, selectors.key_metric(version.metrics)) for version in selectors.model_versions()
    ]
    return render(
        request,
        "trainer/model_list.html",
        {"versions": versions, "metric": settings.PRM_PROMOTE_METRIC},
    )


@login_required
@require_POST
def model_activate(request: HttpRequest, model_version_id: int) -> HttpResponse:
    _require_researcher(request)
    if not ModelVersion.objects.filter(pk=model_version_id).exists():
        raise Http404("No such model version.")
    try:
        version = model_versions.activate_model_version(model_version_id=model_version_id)
    except DomainError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"{version} is now active; solutions are being rescored.")
    return redirect("model-list")


# --- inspection -------------------------------------------------------------------------------

DISAGREEMENTS_PER_PAGE = 25


@login_required
def solution_inspect(request: HttpRequest, solution_id: int) -> HttpResponse:
    _require_researcher(request)
    try:
        inspection = selectors.solution_inspection(solution_id=solution_id)
    except Solution.DoesNotExist:
        raise Http404("No such solution.") from None
    return render(request, "trainer/solution_inspect.html", {"inspection": inspection})


@login_required
def disagreement_list(request: HttpRequest) -> HttpResponse:
    _require_researcher(request)
    version = selectors.active_model_version()
    page, rows = None, []
    if version is not None:
        ranked = selectors.disagreements(model_version=version)
        page = Paginator(ranked, DISAGREEMENTS_PER_PAGE).get_page(request.GET.get("page"))
        rows = selectors.with_solutions(rows=page.object_list)
    return render(
        request,
        "trainer/disagreement_list.html",
        {
            "version": version,
            "page": page,
            "rows": rows,
            "neutral_as_positive": selectors.neutral_as_positive(model_version=version),
        },
    )


# --- generations (active learning) ------------------------------------------------------------


@login_required
def generation_list(request: HttpRequest) -> HttpResponse:
    """Every generation with its composition and progress; POST publishes the next one now."""
    _require_researcher(request)
    form = GenerationForm(request.POST or None)
    status = 200
    if request.method == "POST":
        status = 400
        if form.is_valid():
            try:
                queued = pipeline.request_generation(params=form.params())
            except DomainError as exc:
                messages.error(request, str(exc))
                status = http_status(exc)
            else:
                messages.success(
                    request,
                    f"Selection with {queued.model_version} is queued: the next generation "
                    "appears here once a GPU worker has scored the pool.",
                )
                return redirect("generation-list")
    return render(
        request,
        "trainer/generation_list.html",
        {
            "summaries": selectors.generation_summaries(),
            "form": form,
            "active": selectors.active_model_version(),
        },
        status=status,
    )


@login_required
def generation_detail(
    request: HttpRequest,
    generation_id: int,
    *,
    overlap_form: OverlapForm | None = None,
    status: int = 200,
) -> HttpResponse:
    _require_researcher(request)
    try:
        detail = selectors.generation_detail(generation_id=generation_id)
    except Generation.DoesNotExist:
        raise Http404("No such generation.") from None
    generation = detail.summary.generation
    progress = agreement.overlap_progress(generation=generation)
    return render(
        request,
        "trainer/generation_detail.html",
        {
            "detail": detail,
            "can_manage": can_manage_labelers(request.user),
            "overlap": progress,
            "overlap_form": overlap_form
            or OverlapForm(initial={"share": progress.share, "labelers": progress.labelers}),
            "agreement": agreement.figures(agreement.overlapping_labels(generation=generation)),
        },
        status=status,
    )


@login_required
@require_POST
def generation_overlap(request: HttpRequest, generation_id: int) -> HttpResponse:
    """Change the share of the generation's solutions that several labelers label."""
    _require_researcher(request)
    form = OverlapForm(request.POST)
    if not form.is_valid():
        return generation_detail(request, generation_id, overlap_form=form, status=400)
    generation = get_object_or_404(Generation, pk=generation_id)
    overlapping = overlap.set_overlap(generation=generation, **form.cleaned_data)
    messages.success(
        request,
        f"{overlapping} solutions of generation {generation.number} now go to "
        f"{form.cleaned_data['labelers']} labelers each.",
    )
    return redirect("generation-detail", generation_id=generation_id)
