"""A labeler corrects a label they submitted, until it is used (issue 30, point 5): in the
workbench, under its rules, the label still counted as submitted, the version it replaced kept."""

import re

import pytest
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from labeling.models import LabelingSession, Problem, Solution, StepRating
from labeling.services import corrections, overlap
from labeling.services.workbench import (
    LabelingRefused,
    next_session,
    rate_step,
    recount_labels,
    skip_session,
    submit_session,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def problem():
    return Problem.objects.create(text="Compute $\\frac{1}{2} + \\frac{1}{3}$.", answer="\\frac56")


def label(labeler, *, ratings=(1, 1, 1, 1), finish_reason="solution") -> LabelingSession:
    session = next_session(labeler=labeler).session
    for index, rating in enumerate(ratings):
        rate_step(session_id=session.pk, labeler=labeler, step_index=index, rating=rating)
    return submit_session(session_id=session.pk, labeler=labeler, finish_reason=finish_reason)


def own(session) -> list[int]:
    return list(
        StepRating.objects.filter(step__session=session, completion_index=0)
        .order_by("step__index")
        .values_list("rating", flat=True)
    )


def test_a_corrected_label_keeps_its_place_its_count_and_the_version_it_replaced(
    problem, make_solution, make_labeler
):
    solution = make_solution(problem, labels_wanted=1)
    ann, bob = make_labeler("ann"), make_labeler("bob")
    session = label(ann)
    submitted_at = session.submitted_at

    corrections.reopen_label(session_id=session.pk, labeler=ann)
    # Reopened, it still holds the solution's one place: nobody else is served it, and the
    # count the queues read is unchanged, before and after a recount.
    assert next_session(labeler=bob) is None
    assert Solution.objects.get(pk=solution.pk).labels_submitted == 1
    recount_labels()
    assert Solution.objects.get(pk=solution.pk).labels_submitted == 1

    # The workbench's rules hold: a -1 at step 2 ends the label there.
    rate_step(session_id=session.pk, labeler=ann, step_index=1, rating=-1)
    with pytest.raises(LabelingRefused, match="not reached"):
        rate_step(session_id=session.pk, labeler=ann, step_index=2, rating=1)
    with pytest.raises(LabelingRefused, match="Rate every step"):
        submit_session(session_id=session.pk, labeler=ann, finish_reason="solution")
    submit_session(session_id=session.pk, labeler=ann, finish_reason="found_error")

    session.refresh_from_db()
    assert own(session) == [1, -1]
    assert (session.finish_reason, session.submitted_at) == ("found_error", submitted_at)
    assert session.edited_at is not None and not session.is_being_corrected
    assert Solution.objects.get(pk=solution.pk).labels_submitted == 1
    # What it was is kept, not lost.
    (kept,) = session.extra["corrections"]
    assert kept["previous"]["finish_reason"] == "solution"
    assert [s["ratings"][0]["rating"] for s in kept["previous"]["steps"]] == [1, 1, 1, 1]
    assert "saved_at" in kept


def test_cancelling_a_correction_puts_the_label_back(problem, make_solution, make_labeler):
    make_solution(problem)
    ann = make_labeler("ann")
    session = label(ann)
    corrections.reopen_label(session_id=session.pk, labeler=ann)
    rate_step(session_id=session.pk, labeler=ann, step_index=0, rating=-1)
    with pytest.raises(LabelingRefused, match="not skipped"):
        skip_session(session_id=session.pk, labeler=ann)

    corrections.cancel_correction(session_id=session.pk, labeler=ann)

    session.refresh_from_db()
    assert own(session) == [1, 1, 1, 1]
    assert session.finish_reason == "solution" and session.edited_at is None
    assert not session.is_being_corrected and "corrections" not in session.extra


def test_a_used_label_is_not_reopened_and_says_why(problem, make_solution, make_labeler):
    solution = make_solution(problem, labels_wanted=2)
    gold = make_solution(problem, 1, is_quality_control=True)
    ann, bob = make_labeler("ann"), make_labeler("bob")
    qc_label = label(ann)  # quality control is served first
    assert qc_label.solution_id == gold.pk
    label(bob)  # bob's quality-control label
    trained, settled = label(ann), label(bob)
    assert trained.solution_id == settled.solution_id == solution.pk

    overlap.adjudicate(solution_id=solution.pk, session_id=settled.pk, by=None)
    # Settling on bob's label ends corrections of ann's label of the same solution too.
    with pytest.raises(LabelingRefused, match="reviewer settled"):
        corrections.reopen_label(session_id=trained.pk, labeler=ann)


def test_a_label_a_model_was_trained_on_is_not_corrected(problem, make_solution, make_labeler):
    from trainer.models import TrainingRun
    from trainer.pipeline import freeze_trained_labels

    make_solution(problem)
    make_solution(problem, 1)
    ann = make_labeler("ann")
    session = label(ann)
    corrections.reopen_label(session_id=session.pk, labeler=ann)
    # A run reads the labels while this one is reopened; its model version is recorded.
    run = TrainingRun.objects.create(params={"label_source": "human"}, snapshot_at=timezone.now())
    later = label(ann)
    # What trainer.pipeline does once that run records its model version.
    freeze_trained_labels(run_id=run.pk)

    with pytest.raises(LabelingRefused, match="used meanwhile"):
        rate_step(session_id=session.pk, labeler=ann, step_index=0, rating=-1)
    corrections.cancel_correction(session_id=session.pk, labeler=ann)
    with pytest.raises(LabelingRefused, match="model was trained"):
        corrections.reopen_label(session_id=session.pk, labeler=ann)
    # A label submitted after the run's snapshot was not read by it.
    corrections.reopen_label(session_id=later.pk, labeler=ann)


def test_pages_and_api_correct_a_label_or_say_why_not(problem, make_solution, make_labeler, client):
    make_solution(problem)
    ann = make_labeler("ann")
    session = label(ann)
    client.force_login(ann.user)

    page = client.get(reverse("my-labels")).content.decode()
    assert reverse("my-label-correct", args=[session.pk]) in page
    answer = client.post(reverse("my-label-correct", args=[session.pk]))
    assert answer.url == reverse("label-session", args=[session.pk])
    workbench = client.get(answer.url).content.decode()
    assert "Save correction" in workbench or "Correcting your label" in workbench
    client.post(reverse("label-rate", args=[session.pk]), {"step_index": 3, "rating": 0})
    saved = client.post(
        reverse("label-submit", args=[session.pk]), {"finish_reason": "solution"}, follow=True
    )
    assert "corrected label replaces" in saved.content.decode()
    assert own(session) == [1, 1, 1, 0]

    LabelingSession.objects.filter(pk=session.pk).update(used_at=timezone.now())
    refused = client.post(reverse("my-label-correct", args=[session.pk]), follow=True)
    assert "Not reopened: A model was trained on this label" in refused.content.decode()
    assert "A model was trained on this label" in client.get(reverse("my-labels")).content.decode()

    api = APIClient()
    api.force_authenticate(ann.user)
    assert api.post(reverse("api-correct", args=[session.pk])).status_code == 409
    LabelingSession.objects.filter(pk=session.pk).update(used_at=None)
    reopened = api.post(reverse("api-correct", args=[session.pk]))
    assert reopened.status_code == 200 and reopened.json()["reopened_at"] is not None
    api.post(reverse("api-rate", args=[session.pk]), {"step_index": 3, "rating": 1})
    done = api.post(reverse("api-submit", args=[session.pk]), {"finish_reason": "solution"})
    assert done.status_code == 200 and done.json()["reopened_at"] is None
    assert own(session) == [1, 1, 1, 1]


def test_what_a_run_reads_is_what_it_used(problem, make_solution, make_labeler):
    # Issue 41, item 8: snapshot semantics from the moment a run reads.
    from trainer.models import TrainingRun
    from trainer.pipeline import freeze_trained_labels
    from trainer.training.dataset import build_examples

    make_solution(problem)
    make_solution(problem, 1)
    ann = make_labeler("ann")
    corrected = label(ann)
    reopened = label(ann, ratings=(1, 1, -1), finish_reason="found_error")
    corrections.reopen_label(session_id=reopened.pk, labeler=ann)
    rate_step(session_id=reopened.pk, labeler=ann, step_index=2, rating=1)  # half-edited

    # A run reads: the label being corrected is read as it was submitted, not half-edited.
    read = {e.solution_id: e.labels for e in build_examples() if e.solution_id}
    assert read[reopened.solution_id] == [1, 1, -1]
    run = TrainingRun.objects.create(params={"label_source": "human"}, snapshot_at=timezone.now())

    # After it read, before its model version is recorded, a correction is saved.
    corrections.reopen_label(session_id=corrected.pk, labeler=ann)
    rate_step(session_id=corrected.pk, labeler=ann, step_index=3, rating=0)
    submit_session(session_id=corrected.pk, labeler=ann, finish_reason="solution")
    freeze_trained_labels(run_id=run.pk)

    # The corrected label was not read in its new form: it is not frozen in it.
    corrected.refresh_from_db()
    assert corrected.used_at is None
    corrections.reopen_label(session_id=corrected.pk, labeler=ann)
    # The one being corrected was read as submitted: that version is used, and cancelling
    # the correction puts it back.
    reopened.refresh_from_db()
    assert reopened.used_at is not None
    corrections.cancel_correction(session_id=reopened.pk, labeler=ann)
    assert own(reopened) == [1, 1, -1]


def _blind(text: str) -> str:
    """A page as the labeler reads it, its numbers (ids, times) and tokens made alike."""
    return re.sub(r"\d+", "#", re.sub(r"[A-Za-z0-9+/_-]{20,}", "token", text))


def test_quality_control_stays_blind_after_the_fact(problem, make_solution, make_labeler, client):
    # Two labels of the same steps, one of them gold: the labels list, each label's page, the
    # correction's answers (page and API) and the agreement on the home page say nothing that
    # tells them apart (issue 41, item 11).
    make_solution(problem, 1, is_quality_control=True, gold_ratings=[1, 1, 1, 1])
    make_solution(problem, 2)  # the same steps but for their number
    ann = make_labeler("ann")
    gold, plain = label(ann), label(ann)
    assert gold.is_quality_control and not plain.is_quality_control
    client.force_login(ann.user)
    api = APIClient()
    api.force_authenticate(ann.user)

    listed = client.get(reverse("my-labels")).content.decode()
    rows = re.findall(r"<tr[^>]*>.*?</tr>", listed, re.S)
    mine = [
        row
        for row in rows
        if f"/labels/mine/{gold.pk}/" in row or f"/labels/mine/{plain.pk}/" in row
    ]
    assert len(mine) == 2 and _blind(mine[0]) == _blind(mine[1])
    pages = [client.get(reverse("my-label", args=[s.pk])).content.decode() for s in (gold, plain)]
    assert _blind(pages[0]) == _blind(pages[1])
    for session in (gold, plain):
        answer = client.post(reverse("my-label-correct", args=[session.pk]))
        assert answer.status_code == 302
        assert answer.url == reverse("label-session", args=[session.pk])
    workbenches = [client.get(reverse("label-session", args=[s.pk])) for s in (gold, plain)]
    assert _blind(workbenches[0].content.decode()) == _blind(workbenches[1].content.decode())
    apis = [api.post(reverse("api-correct", args=[s.pk])) for s in (gold, plain)]
    assert [a.status_code for a in apis] == [200, 200]
    assert _blind(str(apis[0].json())) == _blind(str(apis[1].json()))
    for seen in (listed, *pages, str(apis[0].json())):
        assert not re.search(r"quality|screening|gold|reference", seen, re.I)

    # The gold label corrected to -1 on its last step: agreement reads it as first submitted.
    client.post(reverse("label-rate", args=[gold.pk]), {"step_index": 3, "rating": -1})
    client.post(reverse("label-submit", args=[gold.pk]), {"finish_reason": "solution"})
    assert own(gold) == [1, 1, 1, -1]
    from labeling import quality

    (agreement,) = quality.gold_agreement_by_labeler(labeler_ids=[ann.pk]).values()
    assert (agreement.exact_agreed, agreement.steps_agreed) == (1, 4)
