"""Researcher pages of sampling runs: start one, watch it, cancel or resume it.

A refusal on the form page is shown on that page, with the status core.errors gives its kind.
"""

from functools import partial

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from core import job_views
from core.errors import DomainError, http_status
from core.permissions import require_researcher
from generators import outbound
from trainer.sampling import services as sampling
from trainer.sampling.forms import SamplingRunForm
from trainer.sampling.models import SamplingRun
from trainer.sampling.selectors import search_agreement

SOLUTIONS_SHOWN = 50


_require_researcher = partial(require_researcher, refusal="Sampling is for researchers and admins.")


def _recent_runs() -> list[SamplingRun]:
    recent = list(SamplingRun.objects.select_related("requested_by")[:100])
    for run in recent:
        run.progress = sampling.progress(run)
    return recent


def _run_or_404(run_id: int) -> SamplingRun:
    run = SamplingRun.objects.select_related("requested_by").filter(pk=run_id).first()
    if run is None:
        raise Http404("No such sampling run.")
    return run


@login_required
def sampling_list(request: HttpRequest) -> HttpResponse:
    _require_researcher(request)
    form = SamplingRunForm(request.POST or None)
    status = 200
    if request.method == "POST":
        status = 400
        if form.is_valid():
            try:
                run = sampling.request_sampling_run(
                    user=request.user,
                    purpose=form.cleaned_data["purpose"],
                    generator=form.generator,
                    settings=form.settings,
                    samples=form.cleaned_data["samples"],
                    problem_ids=form.problem_ids,
                    solution_ids=form.solution_ids,
                    then_select=form.then_select,
                    search=form.search,
                )
            except DomainError as exc:
                messages.error(request, str(exc))
                status = http_status(exc)
            else:
                return redirect("sampling-detail", run_id=run.pk)
    return render(
        request,
        "trainer/sampling_list.html",
        {**job_views.table_context(_recent_runs()), "form": form},
        status=status,
    )


@login_required
def sampling_table(request: HttpRequest) -> HttpResponse:
    """The runs table alone, polled by htmx while a run is live."""
    _require_researcher(request)
    return render(request, "trainer/_sampling_table.html", job_views.table_context(_recent_runs()))


def _context(run: SamplingRun) -> dict:
    solutions = run.solutions.select_related("problem").order_by("pk")
    return {
        "run": run,
        "job": run,
        "progress": sampling.progress(run),
        "solutions": solutions[:SOLUTIONS_SHOWN],
        "solution_count": solutions.count(),
        "rollout_label_count": run.rollout_labels.count(),
        "implied_label_count": run.rollout_labels.filter(implied_by__isnull=False).count(),
        "search_agreement": search_agreement(run=run),
        # A run at a researcher's own server resumes with their key again, never stored.
        "own_server": run.generator.get("backend") == "openai"
        and not outbound.is_operator_url(run.generator.get("base_url") or ""),
    }


PAGES = job_views.JobPages(
    allowed=_require_researcher,
    get=_run_or_404,
    context=_context,
    page_template="trainer/sampling_detail.html",
    progress_template="trainer/_sampling_progress.html",
    page_url="sampling-detail",
    cancel_job=sampling.cancel_sampling_run,
    stops="after its current item",
)
sampling_detail = login_required(PAGES.page)
sampling_progress = login_required(PAGES.progress)
sampling_cancel = login_required(require_POST(PAGES.cancel))


@login_required
@require_POST
def sampling_resume(request: HttpRequest, run_id: int) -> HttpResponse:
    _require_researcher(request)
    _run_or_404(run_id)
    try:
        api_key = request.POST.get("api_key", "")
        outbound.check_api_key(api_key)
        sampling.resume_sampling_run(run_id=run_id, api_key=api_key)
    except DomainError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Sampling run {run_id} is queued again.")
    return redirect("sampling-detail", run_id=run_id)
