"""Researcher pages of judge runs: start one, watch it, cancel or resume it, read its labels
per solution, download them.

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
from trainer.judging import services as judging
from trainer.judging.api import export_response
from trainer.judging.forms import JudgeRunForm
from trainer.judging.models import JudgeRun

SOLUTIONS_SHOWN = 50


_require_researcher = partial(require_researcher, refusal="Judging is for researchers and admins.")


def _recent_runs() -> list[JudgeRun]:
    recent = list(JudgeRun.objects.select_related("requested_by")[:100])
    for run in recent:
        run.progress = judging.progress(run)
    return recent


def _run_or_404(run_id: int) -> JudgeRun:
    run = JudgeRun.objects.select_related("requested_by").filter(pk=run_id).first()
    if run is None:
        raise Http404("No such judge run.")
    return run


@login_required
def judge_list(request: HttpRequest) -> HttpResponse:
    _require_researcher(request)
    form = JudgeRunForm(request.POST or None)
    status = 200
    if request.method == "POST":
        status = 400
        if form.is_valid():
            try:
                run = judging.request_judge_run(
                    user=request.user,
                    generator=form.generator,
                    settings=form.settings,
                    params=form.params,
                    solution_ids=form.cleaned_data["solution_ids"],
                )
            except DomainError as exc:
                messages.error(request, str(exc))
                status = http_status(exc)
            else:
                return redirect("judge-detail", run_id=run.pk)
    return render(
        request,
        "trainer/judge_list.html",
        {**job_views.table_context(_recent_runs()), "form": form},
        status=status,
    )


@login_required
def judge_table(request: HttpRequest) -> HttpResponse:
    """The runs table alone, polled by htmx while a run is live."""
    _require_researcher(request)
    return render(request, "trainer/_judge_table.html", job_views.table_context(_recent_runs()))


def _context(run: JudgeRun) -> dict:
    return {
        "run": run,
        "job": run,
        "progress": judging.progress(run),
        "judged": judging.judged_solutions(run=run, limit=SOLUTIONS_SHOWN),
        "shown": SOLUTIONS_SHOWN,
        # A run at a researcher's own server resumes with their key again, never stored.
        "own_server": run.generator.get("backend") == "openai"
        and not outbound.is_operator_url(run.generator.get("base_url") or ""),
    }


PAGES = job_views.JobPages(
    allowed=_require_researcher,
    get=_run_or_404,
    context=_context,
    page_template="trainer/judge_detail.html",
    progress_template="trainer/_judge_progress.html",
    page_url="judge-detail",
    cancel_job=judging.cancel_judge_run,
    stops="after its current solution",
)
judge_detail = login_required(PAGES.page)
judge_progress = login_required(PAGES.progress)
judge_cancel = login_required(require_POST(PAGES.cancel))


@login_required
@require_POST
def judge_resume(request: HttpRequest, run_id: int) -> HttpResponse:
    _require_researcher(request)
    _run_or_404(run_id)
    try:
        api_key = request.POST.get("api_key", "")
        outbound.check_api_key(api_key)
        judging.resume_judge_run(run_id=run_id, api_key=api_key)
    except DomainError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Judge run {run_id} is queued again.")
    return redirect("judge-detail", run_id=run_id)


@login_required
def judge_export(request: HttpRequest, run_id: int) -> HttpResponse:
    _require_researcher(request)
    return export_response(_run_or_404(run_id))
