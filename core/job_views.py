"""What the pages of every kind of job share: the page, its live part and the cancel button
(`JobPages`), and the lists' polling.

Their templates share `templates/jobs/_progress.html` (a job's live section: status, cancel,
times, error, log; polled while the job is live) and `templates/jobs/_table.html` (a list of
jobs, polled while one is live); each kind's page extends them with its own progress and
columns. The ground floor: imports nothing of an app.
"""

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from core.errors import DomainError
from core.jobs import Job, JobStatus, noun


def cancel(
    request: HttpRequest, *, cancel_job: Callable[[], Job], stops: str, then: str
) -> HttpResponse:
    """Answer a cancel button: run `cancel_job`, say what happened, go to `then` (a URL)."""
    try:
        job = cancel_job()
    except DomainError as exc:
        messages.error(request, str(exc))
    else:
        name = f"{noun(type(job))} {job.pk}"
        if job.status == JobStatus.CANCELLED:
            messages.success(request, f"{name} is cancelled.")
        else:
            messages.info(request, f"{name} stops {stops}.")
    return redirect(then)


def table_context(jobs: Iterable[Job]) -> dict:
    """A list of jobs as `jobs/_table.html` shows it: it polls while one of them is live."""
    jobs = list(jobs)
    return {"jobs": jobs, "live": any(job.is_live for job in jobs)}


@dataclass(frozen=True)
class JobPages:
    """A kind of job's page, its live part (polled by htmx every 2 s while the job is live) and
    its cancel button, as views taking the job's id; the caller wraps them in its login and
    method decorators."""

    allowed: Callable[[HttpRequest], None]  # raises PermissionDenied
    get: Callable[[int], Job]  # the job, or Http404
    context: Callable[[Job], dict]
    page_template: str
    progress_template: str
    page_url: str  # the page's URL name
    cancel_job: Callable[..., Job]  # called with run_id
    stops: str  # when a running job stops once cancelled: "at its next step"

    def page(self, request: HttpRequest, run_id: int) -> HttpResponse:
        self.allowed(request)
        return render(request, self.page_template, self.context(self.get(run_id)))

    def progress(self, request: HttpRequest, run_id: int) -> HttpResponse:
        self.allowed(request)
        return render(request, self.progress_template, self.context(self.get(run_id)))

    def cancel(self, request: HttpRequest, run_id: int) -> HttpResponse:
        self.allowed(request)
        self.get(run_id)
        return cancel(
            request,
            cancel_job=lambda: self.cancel_job(run_id=run_id),
            stops=self.stops,
            then=reverse(self.page_url, args=[run_id]),
        )
