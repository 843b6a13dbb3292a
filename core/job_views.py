"""What the pages of every kind of job share: the cancel button's answer and the lists' polling.

Their templates share `templates/jobs/_progress.html` (a job's live section: status, cancel,
times, error, log; polled while the job is live) and `templates/jobs/_table.html` (a list of
jobs, polled while one is live); each kind's page extends them with its own progress and
columns. The ground floor: imports nothing of an app.
"""

from collections.abc import Callable, Iterable

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect

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
