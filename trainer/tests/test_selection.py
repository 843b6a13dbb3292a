"""Active-learning selection: the exact composition of a generation, what it records, how it is
served, and how it is requested (on demand and after a retrain)."""

from collections import Counter
from datetime import timedelta
from unittest import mock

import pytest
from django.db import transaction
from django.utils import timezone
from kombu.exceptions import OperationalError

from annotate.celery import app
from conftest import create_user
from labeling.models import Generation, LabelingSession, Problem, Solution
from labeling.services import workbench
from labeling.services.labelers import get_or_create_labeler
from trainer import pipeline, tasks
from trainer.models import ModelVersion, TrainingRun
from trainer.selection import services as selection
from trainer.selection.services import InvalidSelection, SelectionConflict, choose
from trainer.selection.strategies import Candidate
from trainer.tests.labels import label_demo_solutions

pytestmark = pytest.mark.django_db


# --- the strategies on in-memory candidates ---------------------------------------------------


def grid(problems: int, wrong: int, right: int) -> list[Candidate]:
    """Per problem p: wrong answers scored 0.9-0.02p-0.001i, right ones 0.95-0.02p-0.001i."""
    out = []
    for p in range(problems):
        for i in range(wrong):
            out.append(Candidate(100 * p + i, p, round(0.9 - 0.02 * p - 0.001 * i, 4), False))
        for i in range(right):
            out.append(Candidate(100 * p + 50 + i, p, round(0.95 - 0.02 * p - 0.001 * i, 4), True))
    return out


def ids(picks) -> list[int]:
    return [pick.candidate.solution_id for pick in picks]


def test_eighty_percent_convincing_wrong_answers_then_the_most_convincing_of_the_rest():
    picks = choose(candidates=grid(5, 4, 4), batch_size=10, per_problem_cap=3, wrong_share=0.8)

    reasons = Counter(pick.reason for pick in picks)
    assert reasons == {"wrong_answer_convincing": 8, "convincing": 2}
    # Wrong answers by score, at most 3 per problem: problems 0 and 1 fill their cap, then
    # the best wrong answers of problems 2 and 3.
    assert ids(picks[:8]) == [0, 1, 2, 100, 101, 102, 200, 201]
    # The rest: the highest scores left, right or wrong, skipping problems that have 3
    # already: problem 2's best right answer fills its cap, then problem 3's.
    assert ids(picks[8:]) == [250, 350]
    assert all(count <= 3 for count in Counter(p.candidate.problem_id for p in picks).values())


def test_the_per_problem_cap_holds_across_both_parts_of_the_batch():
    picks = choose(candidates=grid(2, 5, 5), batch_size=20, per_problem_cap=2, wrong_share=0.5)
    assert Counter(p.candidate.problem_id for p in picks) == {0: 2, 1: 2}
    assert [p.reason for p in picks] == ["wrong_answer_convincing"] * 4


def test_too_few_wrong_answers_leave_their_share_to_the_most_convincing():
    candidates = grid(1, 1, 6)
    picks = choose(candidates=candidates, batch_size=5, per_problem_cap=10, wrong_share=0.8)
    assert ids(picks) == [0, 50, 51, 52, 53]
    assert [p.reason for p in picks] == ["wrong_answer_convincing"] + ["convincing"] * 4


def test_wrong_share_rounds_half_up_and_zero_or_one_are_pure():
    candidates = grid(4, 5, 5)
    for share, wrong in ((0.5, 3), (0.0, 0), (1.0, 5)):
        picks = choose(candidates=candidates, batch_size=5, per_problem_cap=5, wrong_share=share)
        assert Counter(p.reason for p in picks)["wrong_answer_convincing"] == wrong


def test_uncertainty_takes_the_scores_nearest_one_half_and_unscored_last():
    candidates = [
        Candidate(1, 1, 0.85, False),
        Candidate(2, 1, 0.52, True),
        Candidate(3, 2, 0.45, False),
        Candidate(4, 2, None, False),
        Candidate(5, 3, 0.1, True),
    ]
    picks = choose(candidates=candidates, strategy="uncertainty", batch_size=5, per_problem_cap=5)
    assert ids(picks) == [2, 3, 1, 5, 4]
    assert {p.reason for p in picks} == {"uncertainty"}


def test_uniform_is_a_seeded_sample_within_the_caps():
    candidates = grid(10, 5, 5)
    first = choose(
        candidates=candidates, strategy="uniform", batch_size=30, per_problem_cap=3, seed=7
    )
    again = choose(
        candidates=candidates, strategy="uniform", batch_size=30, per_problem_cap=3, seed=7
    )
    other = choose(
        candidates=candidates, strategy="uniform", batch_size=30, per_problem_cap=3, seed=8
    )
    assert ids(first) == ids(again)
    assert ids(first) != ids(other)
    assert max(Counter(p.candidate.problem_id for p in first).values()) == 3
    assert {p.reason for p in first} == {"uniform"}
    # Not the score order: uniform ignores scores.
    assert ids(first) != ids(choose(candidates=candidates, batch_size=30, per_problem_cap=3))


def test_ties_are_broken_by_the_seed_the_same_way_every_time():
    tied = [Candidate(i, i, 0.7, False) for i in range(20)]

    def order(seed):
        return ids(choose(candidates=tied, batch_size=20, per_problem_cap=1, seed=seed))

    assert order(3) == order(3)
    assert order(3) != order(4)
    assert sorted(order(3)) == list(range(20))
    # The order of the input does not matter.
    assert ids(choose(candidates=tied[::-1], batch_size=20, per_problem_cap=1, seed=3)) == order(3)


@pytest.mark.parametrize(
    "params,message",
    [
        ({"strategy": "best"}, "strategy must be one of"),
        ({"batch_size": -1}, "cannot be negative"),
        ({"per_problem_cap": 0}, "per_problem_cap must be at least 1"),
        ({"wrong_share": 1.5}, "wrong_share must be between 0 and 1"),
    ],
)
def test_bad_parameters_are_refused_by_name(params, message):
    with pytest.raises(InvalidSelection, match=message):
        choose(candidates=[], **{"batch_size": 1, "per_problem_cap": 1, **params})


# --- publishing a generation ------------------------------------------------------------------


@pytest.fixture
def version() -> ModelVersion:
    return ModelVersion.objects.create(name="v1", checkpoint="/nowhere", is_active=True)


def make_pool(version, *, problems: int = 3, wrong: int = 3, right: int = 2) -> dict:
    """Scored solutions; returns {(problem index, 'w'|'r', i): solution}."""
    out = {}
    for p in range(problems):
        problem = Problem.objects.create(text=f"Problem {p}?", answer="7")
        for kind, count, base in (("w", wrong, 0.9), ("r", right, 0.6)):
            for i in range(count):
                out[(p, kind, i)] = Solution.objects.create(
                    problem=problem,
                    steps=[f"Step of {p}{kind}{i}.", f"So {p}{kind}{i}."],
                    answer="7" if kind == "r" else f"{p}{i}",
                    is_correct=kind == "r",
                    prm_score=round(base - 0.1 * p - 0.01 * i, 4),
                    prm_step_scores=[0.9, 0.9],
                    prm_model_version=version,
                )
    return out


def submit(solution: Solution, username: str = "ann") -> LabelingSession:
    user = create_user(username, "annotator")
    labeler = get_or_create_labeler(user=user)
    now = timezone.now()
    return LabelingSession.objects.create(
        labeler=labeler,
        solution=solution,
        started_at=now,
        submitted_at=now,
        total_time=1000,
        finish_reason="solution",
    )


def select(version, **params) -> Generation:
    return selection.select_generation(
        model_version=version,
        **{
            "batch_size": 4,
            "per_problem_cap": 2,
            "wrong_share": 0.5,
            "quality_control_count": 0,
            **params,
        },
    )


def members(generation) -> dict[int, Solution]:
    return {s.pk: s for s in Solution.objects.filter(generation=generation)}


def test_a_generation_records_generation_version_score_and_reason_on_each_solution(version):
    pool = make_pool(version)

    generation = select(version)

    assert generation.number == 1 and generation.model_version == version
    picked = members(generation)
    # 2 convincing wrong answers (problem 0's best two), then the 2 most convincing of the
    # rest: problem 0 is capped, so problem 1's best wrong answers (0.8 > 0.6 right ones).
    want = [pool[(0, "w", 0)], pool[(0, "w", 1)], pool[(1, "w", 0)], pool[(1, "w", 1)]]
    assert set(picked) == {s.pk for s in want}
    reasons = ["wrong_answer_convincing"] * 2 + ["convincing"] * 2
    for solution, reason in zip(want, reasons, strict=True):
        stored = picked[solution.pk]
        assert stored.selection_reason == reason
        assert stored.selection_model_version == version
        assert stored.selection_score == solution.prm_score
    # Served in selection order: priority falls with the rank.
    ordered = sorted(picked.values(), key=lambda s: -s.priority)
    assert [s.pk for s in ordered] == [s.pk for s in want]
    assert generation.params["selected"] == {"wrong_answer_convincing": 2, "convincing": 2}
    assert generation.params["strategy"] == "convincing_wrong_answer"
    assert generation.params["pool"] == 15 and generation.params["scored"] == 0


def test_labeled_bad_qc_and_screening_solutions_are_never_selected(version):
    pool = make_pool(version)
    submit(pool[(0, "w", 0)])
    Problem.objects.filter(pk=pool[(1, "w", 0)].problem_id).update(is_bad=True)
    Solution.objects.filter(pk=pool[(0, "w", 1)].pk).update(is_quality_control=True)
    Solution.objects.filter(pk=pool[(0, "w", 2)].pk).update(is_screening=True)

    generation = select(version, batch_size=100, per_problem_cap=100)

    picked = members(generation)
    assert pool[(0, "w", 0)].pk not in picked  # labeled
    assert pool[(0, "w", 1)].pk not in picked and pool[(0, "w", 2)].pk not in picked
    assert not any(s.problem_id == pool[(1, "w", 0)].problem_id for s in picked.values())
    # Everything else of problems 0 and 2.
    assert len(picked) == 2 + 5


def test_quality_control_is_reserved_on_top_gold_first(version):
    pool = make_pool(version)
    gold = pool[(2, "r", 1)]
    Solution.objects.filter(pk=gold.pk).update(gold_ratings=[1, 1])

    generation = select(version, batch_size=4, quality_control_count=3, seed=5)

    picked = members(generation)
    qc = [s for s in picked.values() if s.is_quality_control]
    batch = [s for s in picked.values() if not s.is_quality_control]
    assert len(qc) == 3 and len(batch) == 4
    assert gold.pk in {s.pk for s in qc}
    assert {s.selection_reason for s in qc} == {"quality_control"}
    assert generation.params["selected"]["quality_control"] == 3
    # QC comes from what the batch left over.
    assert not {s.pk for s in qc} & {s.pk for s in batch}


def test_the_same_seed_selects_the_same_generation(version):
    make_pool(version, problems=6)
    Solution.objects.update(prm_score=0.5)  # all tied: the seed decides

    def picked(seed):
        with transaction.atomic():
            chosen = members(
                select(version, batch_size=5, quality_control_count=2, seed=seed)
            ).values()
            batch = [s.pk for s in sorted(chosen, key=lambda s: -s.priority)]
            qc = sorted(s.pk for s in chosen if s.is_quality_control)
            transaction.set_rollback(True)
        return batch, qc

    assert picked(1) == picked(1)
    assert picked(1) != picked(2)


def test_unlabeled_solutions_of_an_older_generation_can_be_selected_again(version):
    pool = make_pool(version, problems=1)
    first = select(version, batch_size=2)
    submit(pool[(0, "w", 0)])

    second = select(version, batch_size=2)

    assert second.number == 2
    assert pool[(0, "w", 0)].pk in members(first)  # labeled: stays where it was
    assert set(members(second)) == {pool[(0, "w", 1)].pk, pool[(0, "w", 2)].pk}


def test_the_labeling_queue_serves_the_newest_generation_first(version):
    make_pool(version, problems=2)
    older = select(version, batch_size=6, per_problem_cap=3, quality_control_count=0)
    newest = select(version, batch_size=1, quality_control_count=1, seed=3)
    # The older generation keeps solutions with a higher priority than the newest's.
    assert Solution.objects.filter(generation=older, priority__gt=1).exists()
    qc = Solution.objects.get(generation=newest, is_quality_control=True)
    top = Solution.objects.filter(generation=newest, is_quality_control=False).order_by(
        "-priority"
    )[0]
    labeler = get_or_create_labeler(user=create_user("lab", "annotator"))

    first = workbench.next_session(labeler=labeler)
    assert (first.queue, first.session.solution_id) == ("quality_control", qc.pk)
    workbench.submit_session(
        session_id=first.session.pk,
        labeler=labeler,
        finish_reason="give_up",
        finish_reason_text="x",
    )
    second = workbench.next_session(labeler=labeler)
    assert (second.queue, second.session.solution_id) == ("generation", top.pk)
    assert second.session.generation == newest


def test_a_first_generation_can_be_selected_without_a_model(version):
    pool = make_pool(version, problems=2)
    generation = select(None, strategy="uniform", batch_size=3, seed=2)
    again = [
        p.candidate.solution_id
        for p in choose(
            candidates=[Candidate(s.pk, s.problem_id, None, s.is_correct) for s in pool.values()],
            strategy="uniform",
            batch_size=3,
            per_problem_cap=2,
            seed=2,
        )
    ]
    picked = members(generation)
    assert generation.model_version is None and set(picked) == set(again)
    assert {(s.selection_score, s.selection_model_version_id) for s in picked.values()} == {
        (None, None)
    }


def test_a_repeated_request_id_returns_the_generation_it_made(version):
    make_pool(version)
    made = select(version, request_id="task-1")
    again = select(version, request_id="task-1")
    assert again.pk == made.pk
    assert Generation.objects.count() == 1


def test_nothing_to_select_is_refused_without_a_generation(version):
    pool = make_pool(version, problems=1, wrong=1, right=0)
    submit(pool[(0, "w", 0)])
    with pytest.raises(SelectionConflict, match="Nothing to select"):
        select(version)
    assert not Generation.objects.exists()


def test_solutions_this_version_has_not_scored_are_scored_first(version):
    from trainer.training.ml.prm import PRM, PRMSettings

    pool = make_pool(version, problems=2, wrong=2, right=1)
    old = ModelVersion.objects.create(name="old", checkpoint="/old")
    stale = pool[(1, "w", 0)]
    Solution.objects.filter(pk=stale.pk).update(prm_score=0.99, prm_model_version=old)
    unscored = pool[(1, "r", 0)]
    Solution.objects.filter(pk=unscored.pk).update(prm_score=None, prm_model_version=None)
    corpus = [text for s in Solution.objects.all() for text in s.steps] * 3
    prm = PRM.build(base_model=None, corpus=corpus, settings=PRMSettings(), seed=1)

    generation = select(version, batch_size=6, per_problem_cap=6, prm=prm)

    assert generation.params["scored"] == 2
    for solution in (stale, unscored):
        solution.refresh_from_db()
        assert solution.prm_model_version == version
        assert solution.prm_score != 0.99 and solution.prm_score is not None
        assert solution.selection_score == solution.prm_score
    # Solutions the version had already scored keep their scores.
    kept = Solution.objects.get(pk=pool[(0, "w", 0)].pk)
    assert kept.prm_score == pool[(0, "w", 0)].prm_score


# --- requesting a selection -------------------------------------------------------------------


def test_selection_params_default_to_the_settings(settings):
    settings.SELECTION_STRATEGY = "uncertainty"
    settings.SELECTION_BATCH_SIZE = 12
    settings.SELECTION_PER_PROBLEM_CAP = 3
    settings.SELECTION_WRONG_SHARE = 0.6
    settings.SELECTION_QUALITY_CONTROL_COUNT = 2
    settings.SELECTION_OVERLAP_SHARE = 0.1
    settings.SELECTION_OVERLAP_LABELERS = 3
    assert selection.selection_params({"batch_size": 5, "seed": None}) == {
        "strategy": "uncertainty",
        "batch_size": 5,
        "per_problem_cap": 3,
        "wrong_share": 0.6,
        "quality_control_count": 2,
        "overlap_share": 0.1,
        "overlap_labelers": 3,
        "seed": 0,
        "judge_display": "hidden",
        "ensemble_members": 8,
        "ensemble_dropout": 0.1,
    }
    with pytest.raises(InvalidSelection, match="Unknown selection parameter"):
        selection.selection_params({"size": 3})


def test_a_request_needs_an_active_model_version():
    ModelVersion.objects.create(checkpoint="/x")
    with (
        mock.patch("trainer.tasks.select_generation_task.apply_async") as apply_async,
        pytest.raises(pipeline.NoActiveModelVersion),
    ):
        pipeline.request_generation(params={})
    apply_async.assert_not_called()


def test_a_request_queues_the_task_with_the_version_and_every_parameter(version):
    with mock.patch("trainer.tasks.select_generation_task.apply_async") as apply_async:
        queued = pipeline.request_generation(params={"batch_size": 7})
    assert queued.model_version == version and queued.params["batch_size"] == 7
    apply_async.assert_called_once_with((version.pk, queued.params), task_id=queued.task_id)


def test_a_broker_that_is_down_is_reported(version):
    down = OperationalError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")
    with (
        mock.patch("trainer.tasks.select_generation_task.apply_async", side_effect=down),
        pytest.raises(pipeline.BrokerUnavailable, match="broker is unreachable"),
    ):
        pipeline.request_generation(params={})


def test_the_task_runs_on_the_gpu_queue_and_selects_once_per_message(version):
    make_pool(version)
    route = app.amqp.router.route({}, "trainer.tasks.select_generation_task")
    assert route["queue"].name == "gpu"
    params = selection.selection_params({"batch_size": 3, "quality_control_count": 1})

    first = tasks.select_generation_task.apply(args=(version.pk, params), task_id="t-1").get()
    again = tasks.select_generation_task.apply(args=(version.pk, params), task_id="t-1").get()

    assert first == again == 1
    generation = Generation.objects.get()
    assert generation.params["request_id"] == "t-1"
    assert Solution.objects.filter(generation=generation).count() == 4


def finished_run(*, user=None) -> TrainingRun:
    return TrainingRun.objects.create(status="succeeded", requested_by=user)


@pytest.mark.parametrize(
    "mode,scheduled,queued",
    [
        ("scheduled", True, True),
        ("scheduled", False, False),
        ("always", False, True),
        ("never", True, False),
    ],
)
def test_a_retrain_chains_into_selection_as_the_setting_says(
    settings, version, mode, scheduled, queued
):
    settings.SELECTION_AFTER_RETRAIN = mode
    run = finished_run(user=None if scheduled else create_user("rita", "researcher"))
    with mock.patch("trainer.tasks.select_generation_task.apply_async") as apply_async:
        task_id = pipeline.select_after_retrain(run_id=run.pk, model_version_id=version.pk)
    assert (task_id is not None) == queued
    assert apply_async.called == queued


def test_a_version_that_did_not_become_active_does_not_select(settings, version):
    settings.SELECTION_AFTER_RETRAIN = "always"
    other = ModelVersion.objects.create(checkpoint="/y")
    with mock.patch("trainer.tasks.select_generation_task.apply_async") as apply_async:
        assert (
            pipeline.select_after_retrain(run_id=finished_run().pk, model_version_id=other.pk)
            is None
        )
    apply_async.assert_not_called()


@pytest.mark.django_db(transaction=True)
def test_a_scheduled_retrain_scores_the_pool_and_publishes_a_generation_with_its_model(
    settings, tmp_path, monkeypatch
):
    # The whole chain, each task run eagerly as the one before queues it: the periodic task
    # queues a run, the run trains the tiny PRM and activates it, scoring rescores the pool
    # with it, and selection publishes the next generation with it.
    settings.SELECTION_AFTER_RETRAIN = "scheduled"
    settings.SELECTION_BATCH_SIZE = 6
    settings.SELECTION_PER_PROBLEM_CAP = 2
    settings.SELECTION_QUALITY_CONTROL_COUNT = 1
    settings.PRM_RETRAIN_MIN_NEW_LABELS = 1
    settings.PRM_AUTO_PROMOTE = True
    # No trivial baseline to clear: the one-epoch demo model does not beat random scoring,
    # and this test is about what follows a promotion, not about that floor.
    settings.PRM_PROMOTE_METRIC = "step_accuracy"
    settings.PRM_MODEL_DIR = tmp_path / "models"
    settings.PRM_HEARTBEAT_SECONDS = 3600
    monkeypatch.setattr(app.conf, "task_always_eager", True)
    monkeypatch.setattr(app.conf, "task_eager_propagates", True)
    label_demo_solutions(problems=4)
    TrainingRun.objects.create(
        status="succeeded",
        snapshot_at=timezone.now() - timedelta(days=1),
        params={"epochs": 1, "batch_size": 8, "eval_fraction": 0.3},
    )

    run = TrainingRun.objects.get(pk=tasks.periodic_retrain_task())

    assert run.status == "succeeded" and run.requested_by is None, run.error
    version = ModelVersion.objects.get(training_run=run)
    assert version.is_active
    assert not Solution.objects.exclude(prm_model_version=version).exists()
    generation = Generation.objects.get()
    assert generation.model_version == version
    # Scoring ran before selection: selection found the whole pool scored by the new model.
    assert generation.params["scored"] == 0
    assert generation.params["quality_control_count"] == 1
    picked = Solution.objects.filter(generation=generation)
    assert picked.count() == 6 + 1
    assert {s.selection_model_version_id for s in picked} == {version.pk}
    assert all(s.selection_score == s.prm_score for s in picked if not s.is_quality_control)
