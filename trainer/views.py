"""Researcher pages: training runs (start, watch, cancel), model versions (activate),
inspection (one solution's steps beside the PRM's scores; where PRM and humans disagree) and
generations of active learning (composition, labelers' progress and agreement, overlap, publish
the next one).

A refusal on a form page is shown on that page, with the status core.errors gives its kind.
"""

from datetime import datetime
from functools import partial

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Max
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import NoReverseMatch, reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from core import job_views
from core.errors import DomainError, http_status
from core.permissions import can_manage_labelers, require_researcher
from labeling import agreement
from labeling.models import Generation, Solution
from labeling.services import overlap
from trainer import inspection, pipeline
from trainer.forms import GenerationForm, OverlapForm, TrainingRunForm
from trainer.models import ModelVersion, TrainingRun
from trainer.scoring.progress import scoring_progress
from trainer.selection import generations
from trainer.training import charts, label_sources, model_versions, runs, selectors
from trainer.training.metrics import name_of
from trainer.training.params import InvalidParams, TrainingParams

_require_researcher = partial(require_researcher, refusal="Training is for researchers and admins.")


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
def training_run_list(request: HttpRequest) -> HttpResponse:
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
                # No flash message: the run page's live status says where the run is, and a
                # message saying "queued" would stay after the run had finished.
                return redirect("training-run-detail", run_id=run.pk)
    return render(
        request,
        "trainer/training_run_list.html",
        {
            **job_views.table_context(_recent_runs()),
            "form": form,
            "metric": settings.PRM_PROMOTE_METRIC,
        },
        status=status,
    )


@login_required
def training_run_table(request: HttpRequest) -> HttpResponse:
    """The runs table alone, polled by htmx while a run is live."""
    _require_researcher(request)
    return render(
        request,
        "trainer/_training_run_table.html",
        {**job_views.table_context(_recent_runs()), "metric": settings.PRM_PROMOTE_METRIC},
    )


def _metric_text(value) -> str:
    """A metric as the table shows it: counts as integers, rates to four places."""
    if value is None:
        return "–"
    if isinstance(value, int):  # counts (and a bool, an int too) as they are
        return str(value)
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)


def _run_context(run: TrainingRun) -> dict:
    # One row per metric and one column per epoch: a run has a handful of epochs and a dozen
    # metrics, so the table stays narrow (and scrolls inside its box when it does not).
    names = sorted({key for epoch in run.metrics for key in epoch if key != "epoch"})
    return {
        "run": run,
        "job": run,
        "epochs": [epoch.get("epoch") for epoch in run.metrics],
        "metric_rows": [
            (name_of(name), [_metric_text(epoch.get(name)) for epoch in run.metrics])
            for name in names
        ],
        "charts": charts.run_charts(metrics=run.metrics),
        "version": getattr(run, "model_version", None),
    }


RUN_PAGES = job_views.JobPages(
    allowed=_require_researcher,
    get=_run_or_404,
    context=_run_context,
    page_template="trainer/training_run_detail.html",
    progress_template="trainer/_training_run_progress.html",
    page_url="training-run-detail",
    cancel_job=runs.cancel_training_run,
    stops="at its next step",
)
training_run_detail = login_required(RUN_PAGES.page)
training_run_progress = login_required(RUN_PAGES.progress)
training_run_cancel = login_required(require_POST(RUN_PAGES.cancel))


@login_required
def model_version_list(request: HttpRequest) -> HttpResponse:
    _require_researcher(request)
    versions = [
        (version, selectors.key_metric(version.metrics)) for version in selectors.model_versions()
    ]
    active = selectors.active_model_version()
    return render(
        request,
        "trainer/model_version_list.html",
        {
            "versions": versions,
            "metric": settings.PRM_PROMOTE_METRIC,
            **_scoring_context(active.pk if active else None),
        },
    )


@login_required
@require_POST
def model_version_activate(request: HttpRequest, model_version_id: int) -> HttpResponse:
    _require_researcher(request)
    if not ModelVersion.objects.filter(pk=model_version_id).exists():
        raise Http404("No such model version.")
    try:
        version = model_versions.activate_model_version(
            model_version_id=model_version_id, confirm=request.POST.get("confirm") == "1"
        )
    except model_versions.WorseThanActive as exc:
        # The confirm step: what would be lost, and a button that activates anyway.
        return render(
            request,
            "trainer/model_version_activate_confirm.html",
            {"version": ModelVersion.objects.get(pk=model_version_id), "reason": str(exc)},
            status=409,
        )
    except DomainError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"{version} is now active; solutions are being rescored.")
    return redirect("model-version-list")


@login_required
def model_version_scoring(request: HttpRequest, model_version_id: int) -> HttpResponse:
    """The active version's rescoring of the pool; the model version list polls it till done."""
    _require_researcher(request)
    return render(request, "trainer/_scoring_progress.html", _scoring_context(model_version_id))


def _scoring_context(model_version_id: int | None) -> dict:
    version = ModelVersion.objects.filter(pk=model_version_id).first()
    if version is None:
        return {"scoring_version": None, "scoring": None}
    return {
        "scoring_version": version,
        "scoring": scoring_progress(model_version=version),
    }


# --- inspection -------------------------------------------------------------------------------

DISAGREEMENTS_PER_PAGE = 25


@login_required
def solution_inspect(request: HttpRequest, solution_id: int) -> HttpResponse:
    _require_researcher(request)
    try:
        # The consensus shown is that of the sources asked for, spelled as training takes them.
        chosen = TrainingParams.from_dict(
            {"consensus_sources": request.GET.get("consensus_sources")}
        ).consensus_sources
    except InvalidParams as exc:
        return HttpResponse(str(exc), status=400, content_type="text/plain")
    try:
        inspected = inspection.solution_inspection(
            solution_id=solution_id, sources=label_sources.ordered_machine_names(chosen)
        )
    except Solution.DoesNotExist:
        raise Http404("No such solution.") from None
    for column in inspected.rollout_runs:
        column.url = _sampling_run_url(column.run.pk)
    return render(
        request,
        "trainer/solution_inspect.html",
        {
            "inspection": inspected,
            "consensus_choices": label_sources.consensus_choices(),
            "chosen": chosen,
        },
    )


def _sampling_run_url(run_id: int) -> str | None:
    # The sampling pages may not be routed in every deployment: no link rather than a 500.
    try:
        return reverse("sampling-detail", args=[run_id])
    except NoReverseMatch:
        return None


@login_required
def disagreement_list(request: HttpRequest) -> HttpResponse:
    _require_researcher(request)
    version = selectors.active_model_version()
    page, rows = None, []
    if version is not None:
        ranked = inspection.disagreements(model_version=version)
        page = Paginator(ranked, DISAGREEMENTS_PER_PAGE).get_page(request.GET.get("page"))
        rows = inspection.with_solutions(rows=page.object_list)
    source_agreement = inspection.rollout_agreement()
    for row in source_agreement:
        row.url = _sampling_run_url(row.run.pk)
    return render(
        request,
        "trainer/disagreement_list.html",
        {
            "version": version,
            "page": page,
            "rows": rows,
            "neutral_as_positive": inspection.neutral_as_positive(model_version=version),
            "source_agreement": source_agreement,
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
                # Shown in the polled table, not as a flash message: it goes once the
                # generation it announces is there (a message stayed after it was).
                request.session[PENDING_SELECTION] = {
                    "after": Generation.objects.aggregate(last=Max("pk"))["last"] or 0,
                    "model_version": str(queued.model_version),
                    "queued_at": timezone.now().isoformat(),
                }
                return redirect("generation-list")
    return render(
        request,
        "trainer/generation_list.html",
        {
            **_generation_table_context(request),
            "form": form,
            "active": selectors.active_model_version(),
        },
        status=status,
    )


# The session key of the selection this researcher queued and has not seen published yet.
PENDING_SELECTION = "trainer.pending_selection"


def _generation_table_context(request: HttpRequest) -> dict:
    pending = request.session.get(PENDING_SELECTION)
    if (
        pending
        and Generation.objects.filter(pk__gt=pending["after"])
        .exclude(mode=Generation.Mode.LIVE)
        .exists()
    ):
        del request.session[PENDING_SELECTION]
        pending = None
    if pending:
        pending = {**pending, "queued_at": datetime.fromisoformat(pending["queued_at"])}
    return {"summaries": generations.generation_summaries(), "pending": pending}


@login_required
def generation_table(request: HttpRequest) -> HttpResponse:
    """The generations table alone, polled by the generations page."""
    _require_researcher(request)
    return render(request, "trainer/_generation_table.html", _generation_table_context(request))


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
        detail = generations.generation_detail(generation_id=generation_id)
    except Generation.DoesNotExist:
        raise Http404("No such generation.") from None
    if request.GET.get("part") == "progress":
        return render(
            request,
            "trainer/_generation_progress.html",
            {"detail": detail, "can_manage": can_manage_labelers(request.user)},
        )
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
