"""A constraint the database refuses is a 409 with a sentence, never a 500 (issue 41, item 9).

core.errors.refusal is the one mapping, asked by DRF's handler (/api/) and by the pages'
middleware. The unit tests raise IntegrityError from an API view and a page view through the
real stack; the race tests fire two identical creates at once at every unique constraint that
HTTP can reach, on PostgreSQL, forced to meet just before the INSERT (Meeting).
"""

import pytest
from django.apps import apps
from django.db import IntegrityError
from django.db.models import UniqueConstraint
from django.db.models.signals import pre_save
from django.http import HttpResponse
from django.test import Client
from django.urls import include, path
from rest_framework.response import Response
from rest_framework.views import APIView

from core.errors import CONSTRAINT_CONFLICT
from labeling.tests.interleave import Meeting, require_postgresql, run_in_threads


class _RefusedAPIView(APIView):
    permission_classes = []

    def post(self, request):
        raise IntegrityError('duplicate key value violates unique constraint "x_key"')

    def get(self, request):
        return Response({})


def _refused_page(request):
    raise IntegrityError('new row violates check constraint "x_check"')


def _fine_page(request):
    return HttpResponse("fine")


urlpatterns = [
    path("api/refused/", _RefusedAPIView.as_view()),
    path("refused/", _refused_page),
    path("fine/", _fine_page),
    # The error page links the site's pages by name.
    path("", include("annotate.urls")),
]


@pytest.fixture
def refusing_urls(settings):
    settings.ROOT_URLCONF = __name__


def test_an_api_view_that_hits_a_constraint_answers_409_with_a_message(db, refusing_urls):
    response = Client(raise_request_exception=False).post("/api/refused/", {})
    assert response.status_code == 409, response.content
    assert response.json() == {"detail": CONSTRAINT_CONFLICT}


def test_a_page_that_hits_a_constraint_answers_409_with_the_error_page(db, refusing_urls):
    client = Client(raise_request_exception=False)
    page = client.get("/refused/")
    assert page.status_code == 409
    assert CONSTRAINT_CONFLICT.split("(")[0].strip() in page.content.decode()
    assert "constraint" not in page.content.decode().lower().replace(
        CONSTRAINT_CONFLICT.lower(), ""
    ), "the constraint's name is for the log, not the page"
    htmx = client.get("/refused/", headers={"HX-Request": "true"})
    assert (htmx.status_code, htmx.content.decode()) == (409, CONSTRAINT_CONFLICT)


# --- the race over every unique constraint that HTTP reaches -----------------------------------


def _unique_models() -> set[str]:
    """Every model of the project with a unique field, unique_together or UniqueConstraint."""
    found = set()
    for model in apps.get_models():
        meta = model._meta
        if (
            any(f.unique and not f.primary_key for f in meta.local_fields)
            or meta.unique_together
            or any(isinstance(c, UniqueConstraint) for c in meta.constraints)
        ):
            found.add(meta.label)
    return found


# Not raced here, each for a reason a reviewer can check. A new model with a unique
# constraint fails `test_every_unique_model_is_raced_or_has_a_reason` until it is placed.
NOT_RACED_HERE = {
    "auth.Permission": "written by migrate only",
    "auth.Group": "written by migrate only (core.roles syncs the role groups)",
    "contenttypes.ContentType": "written by migrate only",
    "axes.AccessAttempt": "django-axes' own login handler writes it, no create endpoint",
    "django_celery_beat.SolarSchedule": "only the admin's generic add form; a refusal there is "
    "the page middleware's 409 (test_a_page_that_hits_a_constraint_...)",
    "django_celery_beat.PeriodicTask": "as SolarSchedule",
    "generators.LocalModel": "registered by a management command (local models), not HTTP",
    "labeling.Problem": "imports write with ON CONFLICT on text_hash/unique_id (idempotent)",
    "labeling.Solution": "imports write with ON CONFLICT on (problem, content_hash)",
    "labeling.Labeler": "get_or_create, which reads the winner's row on IntegrityError",
    "labeling.LabelingSession": "raced in labeling/tests/test_races.py (next session, slots)",
    "labeling.StepLabel": "written under the session's row lock (select_for_update)",
    "labeling.StepRating": "written under the session's row lock (select_for_update)",
    "labeling.ProblemReport": "one per session, written under the session's row lock",
    "labeling.AnswerReview": "decide_answer locks the solution row (select_for_update) and "
    "maps its own IntegrityError to a Conflict",
    "labeling.Generation": "numbered by the selection worker (Celery), not by a request",
    "trainer.TrainingRun": "a request queues it; the one-live constraint is decided in "
    "trainer's own race tests",
    "trainer.ModelVersion": "written by the training worker",
    "trainer.Evaluation": "written by the evaluation worker",
    "trainer.JudgeRunItem": "written by the judge worker",
    "trainer.JudgeLabel": "written by the judge worker",
    "trainer.SamplingRunItem": "written by the sampling worker",
    "trainer.RolloutLabel": "written by the sampling worker",
    "trainer.ImportedLabel": "written by import_labels (a management command)",
    "trainer.ScoringChunk": "written by the scoring worker",
}


def _admin_client(make_user) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(make_user("root", role=None, is_staff=True, is_superuser=True))
    return client


def _race_admin_add_user(make_user, names):
    client = _admin_client(make_user)

    def add(name):
        return lambda: client.post(
            "/admin/auth/user/add/",
            {"username": name, "usable_password": "false"},
        )

    return "auth.User", [add(name) for name in names]


def _race_user(make_user, make_problem):
    return _race_admin_add_user(make_user, ["ann", "ann"])


def _race_username_skeleton(make_user, make_problem):
    # Two names that read the same: both pass the form's check, the skeleton's constraint
    # decides (issue 41, item 3).
    model, racers = _race_admin_add_user(make_user, ["admin", "\u0430dmin"])
    return "auth.User", racers


def _race_evaluation_set(make_user, make_problem):
    client = Client(raise_request_exception=False)
    client.force_login(make_user("rita", role="researcher"))
    problem = make_problem()

    def create():
        return client.post(
            "/api/evaluation-sets/",
            {"name": "held out", "problems": [problem.pk]},
            content_type="application/json",
        )

    return "trainer.EvaluationSet", [create, create]


# Model label -> a function that sets up and returns (the model whose INSERT the racers meet
# before, the two identical requests).
RACED = {
    "auth.User": _race_user,
    "labeling.UsernameSkeleton": _race_username_skeleton,
    "trainer.EvaluationSet": _race_evaluation_set,
}


def test_every_unique_model_is_raced_or_has_a_reason():
    found = _unique_models()
    unplaced = found - RACED.keys() - NOT_RACED_HERE.keys()
    assert not unplaced, f"models with a unique constraint neither raced nor excused: {unplaced}"
    stale = (RACED.keys() | NOT_RACED_HERE.keys()) - found
    assert not stale, f"the tables name models with no unique constraint: {stale}"


@pytest.fixture
def make_problem():
    from labeling.models import Problem

    return lambda: Problem.objects.create(text="What is 2+2?", answer="4")


@pytest.mark.parametrize("label", sorted(RACED))
def test_two_identical_creates_at_once_answer_one_success_and_one_refusal(
    label, transactional_db, make_user, make_problem
):
    require_postgresql()
    model_label, racers = RACED[label](make_user, make_problem)
    model = apps.get_model(model_label)
    meeting = Meeting(2, timeout=20)

    def meet_before_insert(sender, instance, raw=False, **kwargs):
        if instance._state.adding and not raw:
            meeting.arrive()

    pre_save.connect(meet_before_insert, sender=model, dispatch_uid="race-meeting")
    try:
        responses = run_in_threads(*racers)
    finally:
        pre_save.disconnect(sender=model, dispatch_uid="race-meeting")

    codes = sorted(r.status_code for r in responses)
    bodies = [r.content.decode()[:300] for r in responses]
    assert all(code < 500 for code in codes), (codes, bodies)
    # A refusal: the 409 of a refused constraint, the service's own 400, or the admin's form
    # shown again with its error (200).
    refused = [r for r in responses if r.status_code in (400, 409) or b"errorlist" in r.content]
    assert len(refused) == 1, (codes, bodies)
    assert meeting.outcomes in (["met", "met"], ["blocked"]), meeting.outcomes
