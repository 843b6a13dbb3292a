"""The domain's invariants hold in the database itself, whatever code writes to it."""

import pytest
from django.contrib.auth.models import Group
from django.db import IntegrityError, transaction
from django.utils import timezone

from labeling.models import Labeler, LabelingSession, Problem, Solution, StepLabel, StepRating

pytestmark = pytest.mark.django_db


@pytest.fixture
def session(django_user_model):
    user = django_user_model.objects.create_user("ann", password="pw-ann-123")
    problem = Problem.objects.create(text="1+1?", answer="2")
    solution = Solution.objects.create(
        problem=problem, steps=["1+1=2", "# Answer\n\n2"], answer="2", is_correct=True
    )
    labeler = Labeler.objects.create(user=user)
    return LabelingSession.objects.create(labeler=labeler, solution=solution)


def test_roles_exist_after_migrations():
    assert set(Group.objects.values_list("name", flat=True)) >= {"annotator", "researcher", "admin"}
    admin = Group.objects.get(name="admin")
    admin_perms = set(admin.permissions.values_list("codename", flat=True))
    assert {"change_solution", "view_labelingsession", "delete_problem"} <= admin_perms
    researcher = set(
        Group.objects.get(name="researcher").permissions.values_list("codename", flat=True)
    )
    assert "view_steprating" in researcher and "change_solution" not in researcher


def test_rating_outside_domain_is_refused_by_the_database(session):
    step = StepLabel.objects.create(session=session, index=0)
    with pytest.raises(IntegrityError), transaction.atomic():
        StepRating.objects.create(step=step, completion_index=0, text="x", rating=2)
    # Bypassing the ORM's choices does not help either: the CHECK is in the schema.
    with pytest.raises(IntegrityError), transaction.atomic():
        StepRating.objects.bulk_create([StepRating(step=step, text="x", rating=-2)])


def test_one_rating_per_session_step_and_completion(session):
    step = StepLabel.objects.create(session=session, index=0)
    StepRating.objects.create(step=step, completion_index=0, text="x", rating=1)
    StepRating.objects.create(step=step, completion_index=1, text="alt", rating=-1)
    with pytest.raises(IntegrityError), transaction.atomic():
        StepRating.objects.create(step=step, completion_index=0, text="x", rating=0)
    with pytest.raises(IntegrityError), transaction.atomic():
        StepLabel.objects.create(session=session, index=0)


def test_one_open_session_per_labeler_and_solution(session):
    with pytest.raises(IntegrityError), transaction.atomic():
        LabelingSession.objects.create(labeler=session.labeler, solution=session.solution)
    # Once submitted, the same labeler may be served the solution again (QC re-checks).
    session.submitted_at = timezone.now()
    session.finish_reason = "solution"
    session.save()
    LabelingSession.objects.create(labeler=session.labeler, solution=session.solution)


def test_same_solution_is_stored_once_per_problem(session):
    with pytest.raises(IntegrityError), transaction.atomic():
        Solution.objects.create(
            problem=session.solution.problem,
            steps=["1+1=2", "# Answer\n\n2"],
            answer="2",
            is_correct=True,
        )


def test_labeler_uuid_is_stable_and_unique(django_user_model, session):
    other = Labeler.objects.create(user=django_user_model.objects.create_user("b"))
    assert other.uuid != session.labeler.uuid
    before = session.labeler.uuid
    session.labeler.refresh_from_db()
    assert session.labeler.uuid == before
