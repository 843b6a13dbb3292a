"""What the labeler sees of the judge (labeling.judge_display): per generation hidden, revealed
or confirm; what each rating stores of it; the quality page's agreement with the judge per
display; how a generation is given its display; the PRM800K export untouched."""

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from core import prm800k
from labeling import judge_display
from labeling.export import ExportFilters, iter_prm800k_records
from labeling.models import (
    Generation,
    JudgeDisplay,
    LabelingSession,
    Problem,
    Solution,
    StepLabel,
    StepRating,
)
from labeling.services import workbench
from trainer.forms import GenerationForm
from trainer.judging.models import JudgeLabel, JudgeRun
from trainer.judging.selectors import newest_judge_labels
from trainer.selection.services import SelectionParams, publish_generation

pytestmark = pytest.mark.django_db

STEPS = ["Half of 8 is 4.", "So the answer is 5.", "# Answer\n\n5"]
OLD_REASON = "An older judge thought so."
REASONS = ["Halving 8 gives 4: right.", "4 is not 5: wrong.", "Follows the wrong step."]


def judge_run(*, solution, ratings, reasons=None, fmt=JudgeRun.Format.PER_STEP) -> JudgeRun:
    run = JudgeRun.objects.create(
        generator={"backend": "openai", "model": "judge"},
        sampling={},
        prompt_version="1",
        format=fmt,
        status="succeeded",
    )
    reasons = reasons or [""] * len(ratings)
    JudgeLabel.objects.bulk_create(
        JudgeLabel(solution=solution, index=i, run=run, rating=r, reason=reasons[i])
        for i, r in enumerate(ratings)
    )
    return run


def generation(number: int, display: str) -> Generation:
    return Generation.objects.create(number=number, judge_display=display)


@pytest.fixture
def solution():
    problem = Problem.objects.create(text="What is $8/2$?", answer="4")
    return Solution.objects.create(problem=problem, steps=STEPS, answer="5", is_correct=False)


def served(labeler, solution, display: str):
    solution.generation = generation(1, display)
    solution.save(update_fields=["generation"])
    judge_run(solution=solution, ratings=[-1, -1, -1], reasons=[OLD_REASON] * 3)
    run = judge_run(solution=solution, ratings=[1, -1, -1], reasons=REASONS)
    session = workbench.next_session(labeler=labeler).session
    assert session.solution_id == solution.pk
    return session, run


def signed_in(labeler) -> Client:
    client = Client()
    client.force_login(labeler.user)
    return client


def rate(client, session, step, rating):
    response = client.post(
        reverse("label-rate", args=[session.pk]), {"step_index": step, "rating": rating}
    )
    assert response.status_code == 200
    return response.content.decode()


def stored(session):
    return list(
        StepRating.objects.filter(step__session=session, completion_index=0)
        .order_by("step__index")
        .values_list("rating", "judge_display", "judge_rating", "judge_run_id")
    )


# --- which judge labels -------------------------------------------------------------------------


def test_the_newest_run_that_labeled_a_solution_gives_its_labels(solution):
    other = Solution.objects.create(problem=solution.problem, steps=["Other."], answer="4")
    judge_run(solution=solution, ratings=[1, 1, 1], reasons=["old"] * 3)
    newest = judge_run(solution=solution, ratings=[1, -1], fmt=JudgeRun.Format.FIRST_ERROR)
    # A newer run that did not label `solution` leaves the one before in force for it.
    later = judge_run(solution=other, ratings=[0], reasons=["fine"])

    found = newest_judge_labels(solution_ids=[solution.pk, other.pk])
    assert {i: (s.rating, s.reason, s.run_id) for i, s in found[solution.pk].items()} == {
        0: (1, "", newest.pk),
        1: (-1, "", newest.pk),
    }
    assert found[other.pk][0].run_id == later.pk
    # Labeling reads it through its registry (it cannot import the trainer).
    assert judge_display.newest_judge_labels(solution_ids=[solution.pk]) == {
        solution.pk: found[solution.pk]
    }


# --- what each display shows and stores ---------------------------------------------------------


def test_hidden_shows_nothing_in_the_page_or_the_api_and_stores_nothing_shown(
    solution, make_labeler
):
    me = make_labeler("me")
    session, _ = served(me, solution, JudgeDisplay.HIDDEN)
    client = signed_in(me)
    page = client.get(reverse("label-session", args=[session.pk])).content.decode()
    answer = rate(client, session, 0, 1)
    for html in (page, answer):
        assert REASONS[0] not in html and OLD_REASON not in html
        assert "Judge" not in html and "suggested" not in html
    api = APIClient()
    api.force_authenticate(me.user)
    state = api.post("/api/sessions/next/").json()["session"]["state"]
    assert state["judge_display"] == "hidden"
    assert [item["judge"] for item in state["items"]] == [None, None]
    assert REASONS[0] not in str(state)
    assert stored(session) == [(1, "hidden", None, None)]


def test_revealed_shows_the_judge_of_a_step_only_once_it_is_rated(solution, make_labeler):
    me = make_labeler("me")
    session, run = served(me, solution, JudgeDisplay.REVEALED)
    client = signed_in(me)
    page = client.get(reverse("label-session", args=[session.pk])).content.decode()
    assert REASONS[0] not in page and "Judge" not in page
    answer = rate(client, session, 0, 1)
    # Step 0's label beside it, step 1 (shown, not rated) still without.
    assert REASONS[0] in answer and REASONS[1] not in answer and OLD_REASON not in answer
    assert 'data-judge-rating="1"' in answer and "Judge rated" in answer
    answer = rate(client, session, 1, 0)
    assert REASONS[1] in answer and 'data-judge-rating="-1"' in answer
    assert stored(session) == [(1, "revealed", 1, run.pk), (0, "revealed", -1, run.pk)]


def test_confirm_suggests_before_rating_and_stores_the_suggestion_beside_the_rating(
    solution, make_labeler
):
    me = make_labeler("me")
    session, run = served(me, solution, JudgeDisplay.CONFIRM)
    client = signed_in(me)
    page = client.get(reverse("label-session", args=[session.pk])).content.decode()
    # The step to rate shows the suggestion, on its button too; the steps not shown do not.
    assert "Judge's suggestion" in page and REASONS[0] in page and REASONS[1] not in page
    assert 'class="good suggested"' in page
    # Shown is not rated: nothing is stored until the labeler rates.
    assert not StepRating.objects.exists()
    api = APIClient()
    api.force_authenticate(me.user)
    state = api.post("/api/sessions/next/").json()["session"]["state"]
    assert state["judge_display"] == "confirm"
    assert state["items"][0]["judge"] == {"rating": 1, "reason": REASONS[0]}
    assert state["items"][0]["rating"] is None
    rate(client, session, 0, 1)  # confirmed
    rate(client, session, 1, 0)  # changed: the judge suggested -1
    assert stored(session) == [(1, "confirm", 1, run.pk), (0, "confirm", -1, run.pk)]


@pytest.mark.parametrize("display", [JudgeDisplay.CONFIRM, JudgeDisplay.REVEALED])
def test_a_judge_run_finishing_mid_session_changes_neither_what_is_shown_nor_stored(
    solution, make_labeler, display
):
    me = make_labeler("me")
    session, run = served(me, solution, display)
    client = signed_in(me)
    page = client.get(reverse("label-session", args=[session.pk])).content.decode()
    if display == JudgeDisplay.CONFIRM:
        assert REASONS[0] in page  # the suggestion the labeler sees is `run`'s
    # A newer judge run of the same solution lands while they label.
    newer = judge_run(solution=solution, ratings=[-1, 1, 1], reasons=["Newer: wrong."] * 3)
    page = rate(client, session, 0, 1)
    # What they saw is what is stored, and what they go on seeing is the same run's.
    assert stored(session) == [(1, display, 1, run.pk)]
    assert REASONS[0] in page and "Newer: wrong." not in page
    page = rate(client, session, 1, 0)
    assert stored(session)[1] == (0, display, -1, run.pk)
    assert "Newer: wrong." not in page
    # The session keeps the run it was first shown.
    session.refresh_from_db()
    assert session.judge_run_id == run.pk != newer.pk


def test_a_deleted_judge_run_leaves_the_rating_and_the_rating_shown(solution, make_labeler):
    me = make_labeler("me")
    session, run = served(me, solution, JudgeDisplay.CONFIRM)
    rate(signed_in(me), session, 0, 0)
    run.delete()
    assert stored(session) == [(0, "confirm", 1, None)]


def test_the_database_refuses_a_rating_shown_under_hidden_and_an_unknown_display(solution):
    from django.db import IntegrityError, transaction

    with transaction.atomic(), pytest.raises(IntegrityError):
        Generation.objects.create(number=5, judge_display="never")
    with transaction.atomic(), pytest.raises(IntegrityError):
        Generation.objects.create(number=6, mode="live", judge_display="confirm")
    me_session = LabelingSession.objects.create(
        labeler=_labeler("db"), solution=solution, total_time=0
    )
    step = StepLabel.objects.create(session=me_session, index=0)
    with transaction.atomic(), pytest.raises(IntegrityError):
        StepRating.objects.create(step=step, text="x", rating=1, judge_rating=1)


def _labeler(name):
    from conftest import create_user
    from labeling.models import Labeler

    return Labeler.objects.create(user=create_user(name))


# --- the quality page: agreement with the judge per display -------------------------------------


def label(solution, *, display, rows, submitted=True, labeler="l", run=None):
    """A session of `solution` with (human, judge shown) per step under `display`."""
    session = LabelingSession.objects.create(
        labeler=_labeler(labeler),
        solution=solution,
        total_time=0,
        finish_reason="solution" if submitted else "",
        submitted_at=timezone.now() if submitted else None,
    )
    for index, (human, judge) in enumerate(rows):
        step = StepLabel.objects.create(session=session, index=index, chosen_completion=0)
        StepRating.objects.create(
            step=step,
            text=f"step {index}",
            rating=human,
            judge_display=display,
            judge_rating=judge,
            judge_run=run if judge is not None else None,
        )
    return session


def test_agreement_with_the_judge_per_display_worked_out_by_hand(solution):
    judge_run(solution=solution, ratings=[-1, -1, -1])
    newest = judge_run(solution=solution, ratings=[1, -1])  # what hidden is compared with
    other = Solution.objects.create(problem=solution.problem, steps=["a", "b", "c", "d"])
    # Hidden: (1, 1) agrees, (0, -1) does not; step 2 has no newest judge label.
    label(solution, display="hidden", rows=[(1, None), (0, None), (1, None)], labeler="h")
    # Revealed: 2 of 3 agree; a rating shown nothing (no judge label then) is not compared.
    label(
        other,
        display="revealed",
        rows=[(1, 1), (0, 1), (-1, -1), (1, None)],
        labeler="r",
        run=newest,
    )
    # Confirm: 3 of 4 suggestions confirmed, 1 changed; an unsubmitted label does not count.
    label(
        other, display="confirm", rows=[(1, 1), (1, 1), (0, 1), (-1, -1)], labeler="c", run=newest
    )
    label(other, display="confirm", rows=[(0, 1)], submitted=False, labeler="o", run=newest)

    figures = {f.display: f for f in judge_display.agreement_by_display()}
    assert list(figures) == ["hidden", "revealed", "confirm"]
    hidden, revealed, confirm = figures["hidden"], figures["revealed"], figures["confirm"]
    assert (hidden.ratings, hidden.steps, hidden.agreed) == (3, 2, 1)
    assert (revealed.ratings, revealed.steps, revealed.agreed) == (4, 3, 2)
    assert (confirm.ratings, confirm.steps, confirm.agreed) == (4, 4, 3)
    assert confirm.changed == 1 and confirm.changed_share == 0.25
    assert hidden.changed is None and revealed.changed_share is None
    assert revealed.agreement == pytest.approx(2 / 3)
    # Krippendorff's nominal alpha, human vs judge, 1 - D_o / D_e with
    # D_e = (n^2 - sum n_v^2) / (n (n - 1)) over the pooled values:
    # hidden: values 1,1,0,-1 (n=4): D_o = 1/2, D_e = (16 - 6) / 12 -> 1 - 0.6 = 0.4;
    # revealed: 1,1,0,1,-1,-1 (n=6): D_o = 1/3, D_e = (36 - 14) / 30 -> 6/11;
    # confirm: 1 x5, 0, -1 x2 (n=8): D_o = 1/4, D_e = (64 - 30) / 56 -> 10/17.
    assert hidden.alpha == pytest.approx(0.4)
    assert revealed.alpha == pytest.approx(6 / 11)
    assert confirm.alpha == pytest.approx(10 / 17)


def test_the_quality_page_and_its_api_show_the_figures_per_display(solution, make_user):
    run = judge_run(solution=solution, ratings=[1, -1])
    label(solution, display="confirm", rows=[(1, 1), (0, -1)], run=run)
    client = Client()
    client.force_login(make_user("rita", "researcher"))
    page = client.get(reverse("quality")).content.decode()
    assert 'data-judge-display="confirm"' in page
    assert "50% <small>(1/2)</small>" in page
    api = APIClient()
    api.force_authenticate(make_user("rob", "researcher"))
    rows = {row["display"]: row for row in api.get("/api/quality/judge/").json()}
    assert (rows["confirm"]["steps"], rows["confirm"]["agreed"], rows["confirm"]["changed"]) == (
        2,
        1,
        1,
    )
    assert rows["hidden"]["steps"] == 0 and rows["hidden"]["agreement"] is None
    annotator = APIClient()
    annotator.force_authenticate(make_user("ann", "annotator"))
    assert annotator.get("/api/quality/judge/").status_code == 403


# --- choosing the display where a generation is made ---------------------------------------------


def test_a_generation_is_published_with_the_judge_display_asked_for(solution, settings):
    settings.SELECTION_QUALITY_CONTROL_COUNT = 0
    params = SelectionParams.from_dict(
        {"strategy": "uniform", "batch_size": 1, "judge_display": "confirm"}
    )
    made = publish_generation(model_version=None, params=params)
    assert made.judge_display == "confirm" and made.params["judge_display"] == "confirm"
    # Left out, it takes the setting.
    settings.SELECTION_JUDGE_DISPLAY = "revealed"
    assert SelectionParams.from_dict({}).judge_display == "revealed"


def test_a_bad_judge_display_is_refused_by_the_api_the_form_and_the_params(make_user):
    sentence = "judge_display must be one of hidden, revealed, confirm."
    api = APIClient()
    api.force_authenticate(make_user("rita", "researcher"))
    response = api.post("/api/generations/", {"judge_display": "always"}, format="json")
    assert response.status_code == 400
    assert response.json()["judge_display"] == [sentence]
    form = GenerationForm(
        data={
            "strategy": "uniform",
            "batch_size": 1,
            "per_problem_cap": 1,
            "wrong_share": 0.8,
            "quality_control_count": 0,
            "seed": 0,
            "judge_display": "always",
        }
    )
    assert not form.is_valid() and "judge_display" in form.errors
    with pytest.raises(Exception, match=sentence):
        SelectionParams.from_dict({"judge_display": "always"})


# --- the PRM800K export: exactly its shape ------------------------------------------------------


def test_the_prm800k_export_carries_nothing_of_the_judge(solution, make_labeler):
    me = make_labeler("me")
    session, _ = served(me, solution, JudgeDisplay.CONFIRM)
    client = signed_in(me)
    rate(client, session, 0, 1)
    rate(client, session, 1, -1)
    workbench.submit_session(session_id=session.pk, labeler=me, finish_reason="found_error")
    assert StepRating.objects.filter(judge_rating__isnull=False).count() == 2
    (record,) = iter_prm800k_records(filters=ExportFilters())
    assert tuple(record) == prm800k.RECORD_KEYS
    assert tuple(record["question"]) == prm800k.QUESTION_KEYS
    assert tuple(record["label"]) == prm800k.LABEL_KEYS
    for step in record["label"]["steps"]:
        assert tuple(step) == prm800k.STEP_KEYS
        for completion in step["completions"]:
            assert tuple(completion) == prm800k.COMPLETION_KEYS
    assert "judge" not in str(record) and REASONS[0] not in str(record)
