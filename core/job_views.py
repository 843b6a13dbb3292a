"""What the pages of every kind of job share: the page, its live part and the cancel button
(`JobPages`), the lists' polling and the admin (`JobAdmin`).

Their templates share `templates/jobs/_progress.html` (a job's live section: status, cancel,
times, error, log; polled while the job is live) and `templates/jobs/_table.html` (a list of
jobs, polled while one is live); each kind's page extends them with its own progress and
columns. The ground floor: imports nothing of an app.
"""

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from django.contrib import admin, messages
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


class JobAdmin(admin.ModelAdmin):
    """A kind of job in the admin: a record to read, never to add or edit by hand, with the
    cancel the pages offer (`cancel_job`, a staticmethod called with run_id)."""

    cancel_job: Callable[..., Job]
    actions = ["cancel_jobs"]
    date_hierarchy = "created_at"
    list_filter = ["status"]

    def get_readonly_fields(self, request, obj=None) -> list[str]:
        return [field.name for field in self.model._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False

    @admin.action(description="Cancel the selected jobs")
    def cancel_jobs(self, request, queryset):
        for job in queryset.filter(status__in=self.model.LIVE):
            try:
                self.cancel_job(run_id=job.pk)
            except DomainError as exc:
                self.message_user(request, str(exc), messages.WARNING)
