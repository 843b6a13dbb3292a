"""Overlap and agreement: a share of a generation labeled by several labelers, agreement
between them computed as a researcher would by hand, and one label per solution for training."""

import io
import json
from datetime import timedelta

import pytest
from django.db import IntegrityError, transaction
from django.urls import reverse
from django.utils import timezone

from labeling import agreement
from labeling.agreement import Label, krippendorff_alpha, training_label
from labeling.export import ExportFilters, write_prm800k
from labeling.models import Generation, LabelingSession, Problem, Solution
from labeling.services import overlap
from labeling.services.workbench import LEASE, next_session, rate_step, submit_session
from trainer.training.dataset import build_examples

pytestmark = pytest.mark.django_db


@pytest.fixture
def generation():
    return Generation.objects.create(number=1)


@pytest.fixture
def four_steps(generation, make_solution):
    problem = Problem.objects.create(text="What is $2+3$?", answer="5")
    steps = ["Add $2$ and $3$.", "That is $6$.", "Check: $6-3=3$.", "# Answer\n\n6"]
    return make_solution(problem, steps=steps, answer="6", is_correct=False, generation=generation)


def label(labeler, ratings: list[int], finish_reason: str, *, now=None) -> LabelingSession:
    """Serve the labeler their next session and label it as a labeler would, step by step."""
    served = next_session(labeler=labeler, now=now)
    assert served is not None, f"{labeler} was served nothing"
    for index, rating in enumerate(ratings):
        rate_step(session_id=served.session.pk, labeler=labeler, step_index=index, rating=rating)
    return submit_session(
        session_id=served.session.pk, labeler=labeler, finish_reason=finish_reason
    )


def test_two_labelers_on_one_overlapping_solution_give_the_figures_computed_by_hand(
    client, make_labeler, make_user, generation, four_steps
):
    assert overlap.set_overlap(generation=generation, share=1.0, labelers=2) == 1
    ann, bob = make_labeler("ann"), make_labeler("bob")
    label(ann, [1, 1, -1], "found_error")
    label(bob, [1, 0, 1, -1], "found_error")
    # Its two places are taken: a third labeler is served nothing.
    assert next_session(labeler=make_labeler("cy")) is None

    # By hand: first errors at step 3 and step 4, so 0 of 1 pair agrees; steps 1-3 were
    # rated by both and only step 1 matches: 1 of 3. Alpha (nominal) pairs the values
    # (+1,+1), (+1,0), (-1,+1): n = 6 values, four +1, one 0, one -1, so the expected
    # disagreement is (36 - 16 - 1 - 1) / (6 * 5) = 18/30; two of three units disagree,
    # observed 4/6; alpha = 1 - (4/6) / (18/30) = -1/9.
    figures = agreement.figures(agreement.overlapping_labels(generation=generation))
    assert (figures.solutions, figures.first_error_pairs, figures.first_error_agreed) == (1, 1, 0)
    assert (figures.step_pairs, figures.steps_agreed) == (3, 1)
    assert figures.alpha == pytest.approx(-1 / 9)
    by_labeler = agreement.peer_agreement_by_labeler()
    assert by_labeler[ann.pk].alpha == pytest.approx(-1 / 9)  # two labelers: the same figure
    assert by_labeler[bob.pk].per_step_agreement == pytest.approx(1 / 3)

    client.force_login(make_user("rita", "researcher"))
    html = client.get(reverse("quality")).content.decode()
    generation_row = html.split('<tr data-generation="1">')[1].split("</tr>")[0]
    assert '"first-error">0% <small>(0/1)' in generation_row
    assert '"per-step">33% <small>(1/3)' in generation_row
    assert '"alpha">-0.111' in generation_row
    ann_row = html.split(f'data-labeler="{ann.uuid}"')[1].split("</tr>")[0]
    assert '"others-alpha">-0.111' in ann_row
    detail = client.get(reverse("generation-detail", args=[generation.pk])).content.decode()
    assert '"alpha">-0.111' in detail and "1 solution goes to 2 labelers each" in detail


def test_krippendorffs_own_example_gives_his_alpha():
    # Krippendorff (2011), "Computing Krippendorff's alpha-reliability": four observers,
    # twelve units, some values missing; nominal alpha = 0.743.
    data = [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
        [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
    ]
    units = [
        [(observer, row[u]) for observer, row in enumerate(data) if row[u] is not None]
        for u in range(12)
    ]
    assert krippendorff_alpha(units) == pytest.approx(0.743, abs=5e-4)
    assert krippendorff_alpha([[(0, 1), (1, 1)]]) is None  # one value only: undefined
    assert krippendorff_alpha([[(0, 1), (1, -1)], [(0, 0), (1, 0)]]) < 0.5


def test_overlap_places_are_shared_while_leases_run_and_freed_when_one_lapses(
    make_labeler, generation, four_steps
):
    overlap.set_overlap(generation=generation, share=1.0, labelers=2)
    now = timezone.now()
    ann, bob, cy = make_labeler("ann"), make_labeler("bob"), make_labeler("cy")
    first = next_session(labeler=ann, now=now).session
    second = next_session(labeler=bob, now=now + timedelta(minutes=10)).session
    assert first.solution_id == second.solution_id == four_steps.pk
    assert {first.slot, second.slot} == {0, 1}
    assert next_session(labeler=cy, now=now) is None

    # Ann's lease lapses while Bob's runs: her place goes to Cy, and her session ends.
    later = now + LEASE + timedelta(seconds=1)
    third = next_session(labeler=cy, now=later).session
    assert third.solution_id == four_steps.pk and third.slot == first.slot
    first.refresh_from_db()
    assert first.abandoned_at is not None

    # The database refuses a third live session in a taken place, whatever the code path.
    with pytest.raises(IntegrityError), transaction.atomic():
        LabelingSession.objects.create(
            labeler=make_labeler("dee"), solution=four_steps, slot=second.slot
        )


def test_without_overlap_a_solution_goes_to_one_labeler(make_labeler, generation, four_steps):
    label(make_labeler("ann"), [1, 1, -1], "found_error")
    assert next_session(labeler=make_labeler("bob")) is None


def test_the_overlap_share_grows_without_changing_its_solutions_and_skips_quality_control(
    generation, make_solution
):
    problem = Problem.objects.create(text="Q", answer="1")
    solutions = [make_solution(problem, n, generation=generation) for n in range(20)]
    qc = make_solution(problem, 99, generation=generation, is_quality_control=True)

    assert overlap.set_overlap(generation=generation, share=0.25, labelers=3) == 5
    quarter = set(Solution.objects.filter(labels_wanted=3).values_list("pk", flat=True))
    assert overlap.set_overlap(generation=generation, share=0.5, labelers=3) == 10
    half = set(Solution.objects.filter(labels_wanted=3).values_list("pk", flat=True))
    assert quarter < half <= {s.pk for s in solutions}
    qc.refresh_from_db()
    assert qc.labels_wanted == 1
    generation.refresh_from_db()
    assert generation.params["overlap_share"] == 0.5
    assert overlap.set_overlap(generation=generation, share=0, labelers=2) == 0
    assert not Solution.objects.filter(labels_wanted__gt=1).exists()


def test_the_api_and_the_generation_page_set_the_overlap(client, make_user, generation):
    url = f"/api/generations/{generation.pk}/overlap/"
    client.force_login(make_user("ann", "annotator"))
    assert client.post(url, {"share": 0.5, "labelers": 2}).status_code == 403

    client.force_login(make_user("rita", "researcher"))
    response = client.post(url, {"share": 0.5, "labelers": 3}, content_type="application/json")
    assert response.status_code == 200
    assert response.json() == {"share": 0.5, "labelers": 3, "overlapping": 0}
    bad = client.post(url, {"share": 1.5, "labelers": 1}, content_type="application/json")
    assert bad.status_code == 400 and set(bad.json()) >= {"share", "labelers"}

    page = reverse("generation-overlap", args=[generation.pk])
    assert client.post(page, {"share": "0.2", "labelers": "4"}).status_code == 302
    generation.refresh_from_db()
    assert (generation.params["overlap_share"], generation.params["overlap_labelers"]) == (0.2, 4)
    refused = client.post(page, {"share": "2", "labelers": "4"})
    assert refused.status_code == 400 and "Set overlap" in refused.content.decode()


def _label(session_id, labeler_id, ratings, reason="found_error", minutes=0, adjudicated=False):
    return Label(
        session_id=session_id,
        solution_id=1,
        labeler_id=labeler_id,
        generation_id=None,
        finish_reason=reason,
        submitted_at=timezone.now() + timedelta(minutes=minutes),
        adjudicated=adjudicated,
        ratings=dict(enumerate(ratings)),
    )


def test_training_uses_the_adjudicated_label_else_gold_else_the_majority_else_the_earlier_error():
    early = _label(1, 1, [1, -1], minutes=0)
    late = _label(2, 2, [1, 1, -1], minutes=1)
    late_too = _label(3, 3, [1, 1, -1], minutes=2)
    clean = _label(4, 4, [1, 1, 1], reason="solution", minutes=3)
    gave_up = _label(5, 5, [1], reason="give_up", minutes=-1)

    assert training_label([early, late, late_too]) is late  # two of three agree
    assert training_label([early, clean]) is early  # a tie goes to the earlier error
    assert training_label([late, early]) is early
    assert training_label([clean, late]) is late
    assert training_label([early, late, late_too], gold=[1, -1]) is early  # gold decides
    settled = _label(6, 6, [1, 1, 1], reason="solution", minutes=9, adjudicated=True)
    assert training_label([early, late, late_too, settled], gold=[1, -1]) is settled
    assert training_label([gave_up, early]) is early  # a complete label before a partial one
    assert training_label([gave_up]) is gave_up


def test_labels_are_exported_one_line_each_and_trained_on_once(
    client, make_labeler, make_user, generation, four_steps
):
    overlap.set_overlap(generation=generation, share=1.0, labelers=3)
    ann = label(make_labeler("ann"), [1, -1], "found_error")
    bob = label(make_labeler("bob"), [1, 1, -1], "found_error")
    cy = label(make_labeler("cy"), [1, 1, -1], "found_error")

    out = io.StringIO()
    assert write_prm800k(out=out, filters=ExportFilters()) == 3
    assert len([json.loads(line) for line in out.getvalue().splitlines()]) == 3

    (example,) = [e for e in build_examples() if e.solution_id == four_steps.pk]
    assert example.labels == [1, 1, -1]  # Bob's and Cy's first error, the majority

    # A researcher settles on Ann's label on the side-by-side page: training follows.
    client.force_login(make_user("rita", "researcher"))
    page = client.get(reverse("labeler-disagreement-list")).content.decode()
    assert f'data-solution="{four_steps.pk}" data-disagree="yes"' in page
    assert page.count("data-session=") == 3
    response = client.post(
        reverse("adjudicate", args=[four_steps.pk]),
        {"session": ann.pk, "next": "https://elsewhere.example/"},
    )
    assert response.status_code == 302 and response["Location"].startswith("/quality/")
    (example,) = [e for e in build_examples() if e.solution_id == four_steps.pk]
    assert example.labels == [1, -1]
    page = client.get(reverse("labeler-disagreement-list")).content.decode()
    header = page.split(f'data-session="{ann.pk}"')[1].split("</th>")[0]
    assert "used for training" in header and "(settled)" in header

    # Only a submitted label of this solution can be settled on; annotators cannot.
    other = client.post(reverse("adjudicate", args=[four_steps.pk]), {"session": 10**6})
    assert other.status_code == 409
    client.force_login(make_user("ann2", "annotator"))
    assert (
        client.post(reverse("adjudicate", args=[four_steps.pk]), {"session": bob.pk}).status_code
        == 403
    )
    assert client.get(reverse("labeler-disagreement-list")).status_code == 403
    assert cy.pk


def test_a_generation_selected_with_an_overlap_gives_that_share_to_several_labelers():
    from trainer.selection.services import select_generation

    problem = Problem.objects.create(text="Q", answer="1")
    for n in range(8):
        Solution.objects.create(problem=problem, steps=[f"s{n}"], answer="1", is_correct=True)
    generation = select_generation(
        model_version=None,
        strategy="uniform",
        batch_size=8,
        per_problem_cap=8,
        overlap_share=0.5,
        overlap_labelers=2,
    )
    assert generation.params["overlap_share"] == 0.5
    assert Solution.objects.filter(generation=generation, labels_wanted=2).count() == 4
