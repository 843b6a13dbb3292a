"""A kind of job declared once: `JobKind` holds a job model, its form and serializers and the
service callables (request, cancel, resume, execute, progress); from it come the pages' views
and URL patterns (list, table, detail, progress, cancel, resume), the API's viewset (list,
retrieve, create, cancel, resume), the admin registration and, with `JobCommand`, the
management command. Sampling runs and judge runs are kinds; a new one is one declaration.

Why a declaration rather than base classes to subclass: what differs between kinds is data
(names, templates, refusal text) and a few callables, and a frozen dataclass says which ones in
one place; the views stay plain functions that `login_required` and `require_POST` wrap, as the
other pages are. A kind with more (the judge run's export) adds its own views next to the
generated URL patterns and its own actions on the `base` it passes to `viewset`. URL names are
`<name>-list`, `<name>-detail` and so on, the names the pages had before; templates get `job`,
`run` and `progress` plus what `context` adds.

`JobCommand` is the base of a kind's management command: `--resume ID`, `--api-key-env`, the
job run in the foreground with a progress bar and its summary; the command adds its own options
and how they request a job.

The ground floor: imports nothing of an app (the page's key check comes in as `check_key`).
"""

import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.auth.decorators import login_required
from django.core.management.base import BaseCommand, CommandError
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import URLPattern, path
from django.views.decorators.http import require_POST
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.viewsets import ReadOnlyModelViewSet

from core import job_views
from core.errors import DomainError, http_status
from core.jobs import Job, JobOrigin, noun
from core.permissions import IsResearcher, require_researcher
from core.progress_bar import job_progress_bar

RECENT = 100  # jobs on a kind's list page


@dataclass(frozen=True)
class JobKind:
    """One kind of job: what its pages, API and admin are made from.

    `request` is called with user, origin and the kind's parameters, from the form
    (`form.request_kwargs()`) or from the API (the request serializer's validated data).
    """

    model: type[Job]
    name: str  # URL names: "sampling" gives "sampling-list", "sampling-detail", ...
    url_prefix: str  # "sampling/" gives /sampling/, /sampling/<id>/, ...
    refusal: str  # shown to a user who may not use the kind
    form: type[forms.Form]
    serializer: type[serializers.Serializer]
    request_serializer: type[serializers.Serializer]
    request: Callable[..., Job]
    cancel: Callable[..., Job]  # called with run_id
    progress: Callable[[Job], dict[str, Any]]
    stops: str  # when a running job stops once cancelled: "after its current item"
    # "trainer/sampling" gives trainer/sampling_list.html, _sampling_table.html, ...; None the
    # plain ones in templates/jobs/ (a new kind's pages before it needs its own).
    templates: str | None = None
    context: Callable[[Job], dict] = lambda job: {}
    resume: Callable[..., Job] | None = None  # called with run_id and api_key (and enqueue)
    execute: Callable[..., Job] | None = None  # run_id, worker_hostname, api_key: in the foreground
    resume_serializer: type[serializers.Serializer] | None = None
    check_key: Callable[[str], None] = lambda key: None  # a resumed page's key, else DomainError
    create_description: str = ""

    @property
    def noun(self) -> str:
        return noun(self.model)

    def _template(self, part: str) -> str:
        folder, _, base = (self.templates or "jobs/kind").rpartition("/")
        return f"{folder}/{part.format(base)}"

    @property
    def resumable(self) -> bool:
        return self.resume is not None

    @property
    def url_names(self) -> dict[str, str]:
        """The pages' URL names, for templates: `{% url kind.url_names.detail job.pk %}`."""
        pages = ["list", "table", "detail", "progress", "cancel", "resume"]
        return {page: f"{self.name}-{page}" for page in pages}

    # The pages.

    def allowed(self, request: HttpRequest) -> None:
        require_researcher(request, refusal=self.refusal)

    def get(self, run_id: int) -> Job:
        job = self.model.objects.select_related("requested_by").filter(pk=run_id).first()
        if job is None:
            raise Http404(f"No such {self.noun.lower()}.")
        return job

    def recent(self) -> list[Job]:
        jobs = list(self.model.objects.select_related("requested_by")[:RECENT])
        for job in jobs:
            job.progress = self.progress(job)
        return jobs

    def page_context(self, job: Job) -> dict:
        progress = self.progress(job)
        return {"run": job, "job": job, "kind": self, "progress": progress, **self.context(job)}

    def list_page(self, request: HttpRequest) -> HttpResponse:
        """The kind's jobs and the form that starts one; a refusal is shown on this page."""
        self.allowed(request)
        form = self.form(request.POST or None)
        code = 200
        if request.method == "POST":
            code = 400
            if form.is_valid():
                try:
                    job = self.request(user=request.user, **form.request_kwargs())
                except DomainError as exc:
                    messages.error(request, str(exc))
                    code = http_status(exc)
                else:
                    return redirect(f"{self.name}-detail", run_id=job.pk)
        context = {**job_views.table_context(self.recent()), "form": form, "kind": self}
        return render(request, self._template("{}_list.html"), context, status=code)

    def table(self, request: HttpRequest) -> HttpResponse:
        """The jobs table alone, polled by htmx while a job is live."""
        self.allowed(request)
        context = {**job_views.table_context(self.recent()), "kind": self}
        return render(request, self._template("_{}_table.html"), context)

    def resume_page(self, request: HttpRequest, run_id: int) -> HttpResponse:
        self.allowed(request)
        self.get(run_id)
        try:
            api_key = request.POST.get("api_key", "")
            self.check_key(api_key)
            self.resume(run_id=run_id, api_key=api_key)
        except DomainError as exc:
            messages.error(request, str(exc))
        else:
            messages.success(request, f"{self.noun} {run_id} is queued again.")
        return redirect(f"{self.name}-detail", run_id=run_id)

    @property
    def pages(self) -> job_views.JobPages:
        return job_views.JobPages(
            allowed=self.allowed,
            get=self.get,
            context=self.page_context,
            page_template=self._template("{}_detail.html"),
            progress_template=self._template("_{}_progress.html"),
            page_url=f"{self.name}-detail",
            cancel_job=self.cancel,
            stops=self.stops,
        )

    def urls(self) -> list[URLPattern]:
        """The pages' URL patterns, to include at the site's root."""
        pages, p, n = self.pages, self.url_prefix, self.name
        patterns = [
            path(p, login_required(self.list_page), name=f"{n}-list"),
            path(f"{p}table/", login_required(self.table), name=f"{n}-table"),
            path(f"{p}<int:run_id>/", login_required(pages.page), name=f"{n}-detail"),
            path(
                f"{p}<int:run_id>/progress/",
                login_required(pages.progress),
                name=f"{n}-progress",
            ),
            path(
                f"{p}<int:run_id>/cancel/",
                login_required(require_POST(pages.cancel)),
                name=f"{n}-cancel",
            ),
        ]
        if self.resume is not None:
            view = login_required(require_POST(self.resume_page))
            patterns.append(path(f"{p}<int:run_id>/resume/", view, name=f"{n}-resume"))
        return patterns

    # The admin.

    def register_admin(self, site: admin.AdminSite = admin.site, **options: Any) -> type:
        """Register the kind in the admin as a `JobAdmin` (a record to read, with the pages'
        cancel as an action); `options` are the ModelAdmin's (list_display, list_filter)."""
        attrs = {"cancel_job": staticmethod(self.cancel), "__module__": __name__, **options}
        model_admin = type(f"{self.model.__name__}Admin", (job_views.JobAdmin,), attrs)
        site.register(self.model, model_admin)
        return model_admin

    # The API.

    def viewset(self, base: type = ReadOnlyModelViewSet) -> type[ReadOnlyModelViewSet]:
        """The kind's API viewset; `base` may add actions of the kind's own."""
        return _viewset(self, base)


def _viewset(kind: JobKind, base: type) -> type[ReadOnlyModelViewSet]:
    out = kind.serializer

    def get_queryset(self) -> QuerySet:
        return kind.model.objects.select_related("requested_by")

    @extend_schema(
        request=kind.request_serializer,
        responses={201: out},
        description=kind.create_description or f"Queue a {kind.noun.lower()}.",
    )
    def create(self, request: Request) -> Response:
        body = kind.request_serializer(data=request.data)
        body.is_valid(raise_exception=True)
        job = kind.request(user=request.user, origin=JobOrigin.API, **body.validated_data)
        return Response(out(job).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses=out)
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str) -> Response:
        return Response(out(kind.cancel(run_id=self.get_object().pk)).data)

    attrs: dict[str, Any] = {
        "__doc__": base.__doc__
        if base is not ReadOnlyModelViewSet
        else f"{kind.noun}s: start, watch, cancel them.",
        "__module__": base.__module__,
        "serializer_class": out,
        "permission_classes": [IsResearcher],
        "get_queryset": get_queryset,
        "create": create,
        "cancel": cancel,
    }
    if kind.resume is not None:

        @extend_schema(request=kind.resume_serializer, responses=out)
        @action(detail=True, methods=["post"])
        def resume(self, request: Request, pk: str) -> Response:
            job = self.get_object()
            body = kind.resume_serializer(data=request.data)
            body.is_valid(raise_exception=True)
            job = kind.resume(run_id=job.pk, api_key=body.validated_data["api_key"])
            return Response(out(job).data)

        attrs["resume"] = resume
    return type(base.__name__, (base,), attrs)


class JobCommand(BaseCommand):
    """A kind's command: request a job from the options (or `--resume` one) and run it in the
    foreground, recorded like one started from the web, with a progress bar of its `unit`s.

    A subclass sets `kind` and `unit` and writes `add_job_arguments`, `request_job` (with
    origin COMMAND and enqueue=False) and `summary` (the last line, from the job and its
    progress)."""

    kind: JobKind
    unit: str  # what the progress bar counts: "item"
    api_key_help = (
        "the environment variable holding the --base-url server's own key (a key on the "
        "command line would show in ps and the shell's history)"
    )

    def add_job_arguments(self, parser) -> None:
        raise NotImplementedError

    def request_job(self, options: dict, *, api_key: str) -> Job:
        raise NotImplementedError

    def summary(self, job: Job, progress: dict[str, Any]) -> str:
        raise NotImplementedError

    def add_arguments(self, parser) -> None:
        self.add_job_arguments(parser)
        parser.add_argument("--api-key-env", metavar="VARIABLE", help=self.api_key_help)
        parser.add_argument("--resume", type=int, metavar="RUN_ID")

    def handle(self, *args, **options) -> None:
        kind, api_key = self.kind, self._api_key(options)
        try:
            if options["resume"]:
                job = kind.resume(run_id=options["resume"], enqueue=False, api_key=api_key)
            else:
                job = self.request_job(options, api_key=api_key)
            total = kind.progress(job)["total"]
            self.stdout.write(f"{kind.noun} {job.pk}: {total} {self.unit}s.")
            with job_progress_bar(read=self._done(job.pk), desc=f"run {job.pk}", unit=self.unit):
                job = kind.execute(
                    run_id=job.pk, worker_hostname=socket.gethostname(), api_key=api_key
                )
        except DomainError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(self.summary(job, kind.progress(job)))
        if job.error:
            raise CommandError(job.error)

    @staticmethod
    def _api_key(options: dict) -> str:
        name = options["api_key_env"]
        if not name:
            return ""
        if not os.environ.get(name):
            raise CommandError(f"--api-key-env {name}: that environment variable is not set.")
        return os.environ[name]

    def _done(self, pk: int) -> Callable[[], tuple[int, int]]:
        def read() -> tuple[int, int]:
            done = self.kind.progress(self.kind.model.objects.get(pk=pk))
            return done["done"], done["total"]

        return read
