"""A toy kind of job, declared in this one module, gets its form page, table, job page, live
part, cancel, resume, API, command and admin from core.job_kinds with no other edit.

The toy's model is made and registered (in the trainer app, for its migrations-free table)
only while a test runs, and its table created then and dropped after: nothing of it reaches
the schema, the migrations or the other tests, which walk every registered model.
"""

from typing import Any

import pytest
from django import forms
from django.apps import apps
from django.contrib.admin import AdminSite
from django.core.management import call_command
from django.db import connection, models
from django.urls import include, path
from rest_framework import serializers
from rest_framework.routers import SimpleRouter

from core import jobs
from core.job_kinds import JobCommand, JobKind
from core.jobs import Job, JobOrigin, JobStatus

urlpatterns: list = []  # the toy's URLs beside the site's, set by the `toy` fixture


def declare_toy() -> tuple[type[Job], JobKind, type[JobCommand]]:
    """The whole of a new kind: its model, services, form, serializers, kind and command."""

    class ToyJob(Job):
        size = models.PositiveIntegerField()
        done = models.PositiveIntegerField(default=0)

        class Meta:
            app_label = "trainer"
            ordering = ["-pk"]

    def request_toy(*, user, size: int, origin: str = JobOrigin.PAGE, enqueue=True) -> ToyJob:
        return ToyJob.objects.create(requested_by=user, size=size, origin=origin)

    def cancel_toy(*, run_id: int) -> ToyJob:
        return jobs.request_cancel(model=ToyJob, pk=run_id, stops="at its next square")

    def resume_toy(*, run_id: int, api_key: str = "", enqueue: bool = True) -> ToyJob:
        jobs.reopen(model=ToyJob, pk=run_id)
        return ToyJob.objects.get(pk=run_id)

    def execute_toy(*, run_id: int, worker_hostname: str, api_key: str) -> ToyJob:
        job = ToyJob.objects.get(pk=run_id)
        job.done, job.status = job.size, JobStatus.SUCCEEDED
        job.save()
        return job

    def progress(job: ToyJob) -> dict[str, Any]:
        return {"done": job.done, "total": job.size, "percent": 100 * job.done // job.size}

    class ToyForm(forms.Form):
        size = forms.IntegerField(min_value=1, label="Squares to colour")

        def request_kwargs(self) -> dict:
            return {"size": self.cleaned_data["size"]}

    class ToySerializer(serializers.ModelSerializer):
        progress = serializers.SerializerMethodField()

        class Meta:
            model = ToyJob
            fields = ["id", "status", "size", "progress"]

        def get_progress(self, job: ToyJob) -> dict:
            return progress(job)

    class ToyRequestSerializer(serializers.Serializer):
        size = serializers.IntegerField(min_value=1)

    class ToyResumeSerializer(serializers.Serializer):
        api_key = serializers.CharField(required=False, default="", allow_blank=True)

    kind = JobKind(
        model=ToyJob,
        name="toy",
        url_prefix="toys/",
        refusal="Toys are for researchers.",
        form=ToyForm,
        serializer=ToySerializer,
        request_serializer=ToyRequestSerializer,
        resume_serializer=ToyResumeSerializer,
        request=request_toy,
        cancel=cancel_toy,
        resume=resume_toy,
        execute=execute_toy,
        progress=progress,
        stops="at its next square",
    )

    class Command(JobCommand):
        help = "Colour squares in the foreground."
        unit = "square"

        def add_job_arguments(self, parser) -> None:
            parser.add_argument("--size", type=int, default=2)

        def request_job(self, options: dict, *, api_key: str) -> ToyJob:
            return request_toy(user=None, size=options["size"], origin=JobOrigin.COMMAND)

        def summary(self, job: ToyJob, done: dict) -> str:
            return f"Toy job {job.pk} {job.status}: {done['done']}/{done['total']} squares."

    Command.kind = kind
    return ToyJob, kind, Command


@pytest.fixture
def toy(transactional_db, settings):
    model, kind, command = declare_toy()
    with connection.schema_editor() as editor:
        editor.create_model(model)
    router = SimpleRouter()
    router.register("toy-jobs", kind.viewset(), basename="toy-job")
    urlpatterns[:] = [
        *kind.urls(),
        path("api/", include(router.urls)),
        path("", include(settings.ROOT_URLCONF)),
    ]
    settings.ROOT_URLCONF = __name__
    yield model, kind, command
    with connection.schema_editor() as editor:
        editor.delete_model(model)
    del apps.all_models["trainer"][model._meta.model_name]
    apps.clear_cache()


@pytest.fixture
def rita(client, make_user):
    user = make_user("rita", "researcher")
    client.force_login(user)
    return user


def test_the_toy_kind_has_a_form_page_that_starts_a_job_and_pages_that_watch_it(toy, client, rita):
    model, kind, _ = toy
    page = client.get("/toys/")
    assert page.status_code == 200
    assert b"Squares to colour" in page.content and b"No toy jobs yet." in page.content

    started = client.post("/toys/", {"size": 3})
    job = model.objects.get()
    assert started.status_code == 302 and started["Location"] == f"/toys/{job.pk}/"
    assert (job.size, job.requested_by, job.origin) == (3, rita, JobOrigin.PAGE)

    detail = client.get(f"/toys/{job.pk}/").content.decode()
    assert f"Toy job #{job.pk}" in detail and "0 of 3 done" in detail
    assert "Cancel run" in client.get(f"/toys/{job.pk}/progress/").content.decode()
    assert f"/toys/{job.pk}/" in client.get("/toys/table/").content.decode()

    assert client.post("/toys/", {"size": 0}).status_code == 400
    assert model.objects.count() == 1


def test_the_toy_kind_cancels_and_resumes_from_its_page(toy, client, rita):
    model, _, _ = toy
    job = model.objects.create(size=2)
    client.post(f"/toys/{job.pk}/cancel/")
    job.refresh_from_db()
    assert job.status == JobStatus.CANCELLED
    assert "Resume run" in client.get(f"/toys/{job.pk}/").content.decode()
    client.post(f"/toys/{job.pk}/resume/")
    job.refresh_from_db()
    assert job.status == JobStatus.QUEUED


def test_the_toy_kind_is_for_researchers_only(toy, client, make_user):
    client.force_login(make_user("ann", "annotator"))
    assert client.get("/toys/").status_code == 403
    assert client.get("/api/toy-jobs/").status_code == 403


def test_the_toy_kind_has_an_api(toy, client, rita):
    model, _, _ = toy
    created = client.post("/api/toy-jobs/", {"size": 4}, content_type="application/json")
    assert created.status_code == 201
    body = created.json()
    assert body["size"] == 4 and body["progress"] == {"done": 0, "total": 4, "percent": 0}
    assert model.objects.get().origin == JobOrigin.API
    assert [job["id"] for job in client.get("/api/toy-jobs/").json()["results"]] == [body["id"]]
    cancelled = client.post(f"/api/toy-jobs/{body['id']}/cancel/")
    assert cancelled.json()["status"] == JobStatus.CANCELLED
    resumed = client.post(
        f"/api/toy-jobs/{body['id']}/resume/", {}, content_type="application/json"
    )
    assert resumed.json()["status"] == JobStatus.QUEUED
    bad = client.post("/api/toy-jobs/", {"size": 0}, content_type="application/json")
    assert bad.status_code == 400


def test_the_toy_kind_has_a_command(toy, capsys):
    model, _, command = toy
    call_command(command(), "--size", "5")
    job = model.objects.get()
    assert (job.status, job.done, job.origin) == (JobStatus.SUCCEEDED, 5, JobOrigin.COMMAND)
    out = capsys.readouterr().out
    assert f"Toy job {job.pk}: 5 squares." in out
    assert f"Toy job {job.pk} succeeded: 5/5 squares." in out


def test_the_toy_kind_is_in_the_admin_with_a_cancel_action(toy, rf, rita):
    model, kind, _ = toy
    site = AdminSite()
    model_admin = kind.register_admin(site=site, list_display=["id", "status", "size"])
    assert site.is_registered(model)
    job = model.objects.create(size=1)
    request = rf.post("/")
    request.user = rita
    admin = site._registry[model]
    assert admin.has_add_permission(request) is False
    admin.cancel_jobs.__func__(admin, request, model.objects.all())  # the action, undecorated
    job.refresh_from_db()
    assert job.status == JobStatus.CANCELLED and isinstance(admin, model_admin)
