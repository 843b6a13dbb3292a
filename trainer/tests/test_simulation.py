"""The simulation: the synthetic domain's exact labels, simulated labelers through the real
services, and `manage.py simulate` running the whole loop."""

import io
import json
import re
from collections import Counter

import pytest
from django.core.management import CommandError, call_command

from labeling.models import Generation, LabelingSession, Problem, Solution, StepRating
from trainer.evaluation.simulation import evaluation, loop, pool
from trainer.evaluation.simulation.domain import (
    ANSWER_MARKER,
    MODULUS,
    Generator,
    apply,
    evaluate,
    make_problems,
)
from trainer.evaluation.simulation.labelers import label_generation, make_labelers
from trainer.models import ModelVersion, TrainingRun

FACT = re.compile(r"(\d) ([+×]) (\d) = (\d)\.$")


@pytest.fixture(scope="module")
def generated():
    generator = Generator(seed=7)
    problems = make_problems(60, seed=7)
    return generator, problems, {p.key: generator.samples(p, 32) for p in problems}


# --- the domain -------------------------------------------------------------------------------


def test_the_same_seed_gives_the_same_problems_and_samples():
    a, b = Generator(seed=3), Generator(seed=3)
    problems = make_problems(5, seed=3)
    assert [p.text for p in problems] == [p.text for p in make_problems(5, seed=3)]
    assert [a.sample(p, 4).texts for p in problems] == [b.sample(p, 4).texts for p in problems]
    other = {p.text for p in make_problems(50, seed=3, namespace="test")}
    assert not other & {p.text for p in make_problems(50, seed=3)}
    assert Generator(seed=4).misconceptions != a.misconceptions


def test_every_step_rating_is_exactly_right(generated):
    _, problems, samples = generated
    for problem in problems:
        assert evaluate(problem.expression) == problem.answer
        for sample in samples[problem.key]:
            value = None
            for step in sample.steps:
                fact = FACT.search(step.text)
                if step.kind == "fact":
                    a, op, b, r = fact.groups()
                    right = apply(op, int(a), int(b)) == int(r)
                    assert step.rating == (1 if right else -1), step.text
                    value = int(r)
                elif step.kind == "filler":
                    assert step.rating == 0
                elif step.kind == "answer":
                    assert step.text == f"{ANSWER_MARKER}{sample.answer}"
                    assert step.rating == 1
            assert sample.steps[-1].kind == "answer"
            assert value is None or value == sample.answer
            assert sample.is_correct == (sample.answer == problem.answer)
            gold = sample.gold_ratings
            assert -1 not in gold[:-1]
            assert len(gold) == (sample.first_error + 1 if -1 in gold else len(sample.steps))
            if sample.first_error is None:
                assert sample.is_correct  # no wrong step, right answer


def test_the_generator_fails_like_a_model_not_like_dice(generated):
    _, problems, samples = generated
    everything = [s for group in samples.values() for s in group]
    wrong = [s for s in everything if s.first_error is not None]
    assert 0.2 < len(wrong) / len(everything) < 0.6
    # Errors cluster on misconceptions, not on independent slips.
    assert sum(s.from_misconception for s in wrong) / len(wrong) > 0.7
    # After a wrong step the solution carries on from the wrong value: mostly a wrong answer,
    # yet sometimes (× 2, × 5 modulo 10) the right one.
    right_anyway = [s for s in wrong if s.is_correct]
    assert 0 < len(right_anyway) < 0.3 * len(wrong)
    # Majority voting can be fooled: some problems' most frequent answer is wrong.
    fooled = [
        p
        for p in problems
        if Counter(s.answer for s in samples[p.key]).most_common(1)[0][0] != p.answer
    ]
    assert 0 < len(fooled) < len(problems) / 2
    # Correct solutions vary: different routes, orders and wording to the same answer.
    varied = [
        p
        for p in problems
        if len({tuple(s.texts) for s in samples[p.key] if s.first_error is None}) >= 4
    ]
    assert len(varied) > 0.8 * len(problems)
    kinds = Counter(step.kind for s in everything for step in s.steps)
    assert {"fact", "distribute", "filler", "answer"} <= set(kinds)
    assert all(0 <= int(s.final_answer) < MODULUS for s in everything)


def test_best_of_n_curves_pick_the_top_score_and_majority_the_most_frequent_answer():
    def scored(answer, correct, prm):
        return evaluation.Scored(answer=answer, is_correct=correct, scores={"prm": prm})

    # The PRM ranks the one right answer first; majority voting follows the crowd.
    group = [scored("3", True, 0.9)] + [scored("5", False, 0.1) for _ in range(7)]
    result = evaluation.best_of_n_curves(
        [group], sizes=[1, 8], trials=400, seed=0, verifiers=["prm"]
    )
    assert result["prm"]["8"] == {"mean": 1.0, "std": 0.0}
    assert result["majority"]["8"] == {"mean": 0.0, "std": 0.0}
    # One sample drawn: no choice left, right one time in eight (0.05 is three sigma).
    assert result["prm"]["1"]["mean"] == pytest.approx(1 / 8, abs=0.05)


# Calibration with seed 0: 1,000 perfectly labeled solutions, 4 epochs, 50 held-out problems:
# measured 0.68, 0.74, 0.78, 0.80 step AUROC after each epoch (chance is 0.5).
CALIBRATED_MIN_STEP_AUROC = 0.72


@pytest.mark.django_db
def test_calibration_shows_the_tiny_prm_learning_the_domain():
    from trainer.evaluation.simulation.calibrate import calibrate

    points = calibrate(label_counts=[1000], epochs=4, seed=0, held_out_problems=50)
    assert [(p.labels, p.epoch) for p in points] == [(1000, e) for e in (1, 2, 3, 4)]
    assert points[-1].optimizer_steps == 4 * 32  # batches of 32
    assert points[-1].tokens > points[0].tokens > 0
    assert points[-1].step_auroc >= CALIBRATED_MIN_STEP_AUROC
    assert points[-1].step_auroc > points[0].step_auroc


def test_training_seeds_train_on_the_same_data_and_give_the_run_to_run_spread():
    from trainer.evaluation.simulation.calibrate import (
        CalibrationPoint,
        calibrate,
        run_to_run_spread,
    )

    points = calibrate(
        label_counts=[96], epochs=2, seed=0, held_out_problems=12, train_seeds=(3, 4)
    )
    assert [(p.train_seed, p.epoch) for p in points] == [(3, 1), (3, 2), (4, 1), (4, 2)]
    # The same examples (tokens seen), other initial weights: other results.
    assert points[1].tokens == points[3].tokens
    assert points[1].step_auroc != points[3].step_auroc

    def point(labels, seed, epoch, auroc):
        return CalibrationPoint(labels, seed, epoch, 1.0, 1, 1, auroc, None, None)

    # Only each seed's last epoch counts: 0.80 and 0.90 at 2,000 labels.
    spread = run_to_run_spread(
        [point(2000, 0, 1, 0.5), point(2000, 0, 2, 0.8), point(2000, 1, 2, 0.9)]
    )
    assert spread[2000]["per_seed"] == {0: 0.8, 1: 0.9}
    assert spread[2000]["mean"] == pytest.approx(0.85)
    assert spread[2000]["std"] == pytest.approx(0.1 / 2**0.5)


# --- simulated labelers through the services --------------------------------------------------


def _pool(size: int = 48, quality_control: int = 0) -> loop.SimulationConfig:
    config = loop.SimulationConfig(
        pool_size=size, samples_per_problem=8, quality_control=quality_control, seed=5
    )
    samples = pool.pool_samples(
        size=size, samples_per_problem=8, seed=5, generator=Generator(seed=5)
    )
    pool.import_pool(samples, quality_control=quality_control, seed=5)
    return config


def _session_ratings(session) -> list[int]:
    return list(
        StepRating.objects.filter(step__session=session, completion_index=0)
        .order_by("step__index")
        .values_list("rating", flat=True)
    )


@pytest.mark.django_db
def test_exact_labelers_give_the_gold_labels_through_the_services():
    config = _pool(quality_control=2)
    generation = loop.initial_generation(config=config, batch_size=12)
    labelers = make_labelers(count=2, noise=0.0, seed=0)
    assert label_generation(labelers=labelers, generation=generation, budget=100) == 16
    sessions = LabelingSession.objects.filter(submitted_at__isnull=False)
    # 12 shared solutions once each, 2 quality-control ones by both labelers; nothing else.
    assert Counter(sessions.values_list("queue", flat=True)) == {
        "generation": 12,
        "quality_control": 4,
    }
    for session in sessions.select_related("solution"):
        gold = session.solution.meta["simulation"]["gold_ratings"]
        assert _session_ratings(session) == gold
        assert session.finish_reason == ("found_error" if -1 in gold else "solution")
    assert not Solution.objects.filter(gold_ratings__isnull=False, is_quality_control=False)


@pytest.mark.django_db
def test_noisy_labelers_disagree_with_the_truth_and_stop_at_their_own_first_minus_one():
    config = _pool()
    generation = loop.initial_generation(config=config, batch_size=10)
    labelers = make_labelers(count=1, noise=1.0, seed=0)
    assert label_generation(labelers=labelers, generation=generation, budget=5) == 5
    for session in LabelingSession.objects.filter(submitted_at__isnull=False):
        truth = session.solution.meta["simulation"]["step_ratings"]
        given = _session_ratings(session)
        assert all(g != t for g, t in zip(given, truth, strict=False))
        assert -1 not in given[:-1]


@pytest.mark.django_db
def test_the_simulation_refuses_a_database_with_other_data():
    Problem.objects.create(text="What is 2+2?", answer="4")
    with pytest.raises(CommandError, match="empty database"):
        call_command("simulate", "--generations", "1", stdout=io.StringIO())


# --- the whole loop ---------------------------------------------------------------------------


@pytest.mark.django_db
def test_simulate_runs_generations_through_the_real_services(settings, tmp_path):
    settings.PRM_MODEL_DIR = tmp_path / "models"
    settings.PRM_HEARTBEAT_SECONDS = 3600
    out = tmp_path / "results.json"
    stdout = io.StringIO()
    call_command(
        "simulate",
        *("--generations", "2", "--labels-per-generation", "40"),
        *("--pool-size", "240", "--samples-per-problem", "8", "--quality-control", "2"),
        *("--labelers", "2", "--noise", "0.05", "--seed", "3"),
        *("--test-problems", "8", "--test-samples", "16", "--best-of", "1,4,16"),
        *("--trials", "10", "--epochs", "2", "--out", str(out)),
        stdout=stdout,
        stderr=io.StringIO(),
    )

    # Labels went through the workbench: next session, ratings and submission.
    sessions = LabelingSession.objects.filter(submitted_at__isnull=False)
    assert sessions.count() == 80
    assert not LabelingSession.objects.filter(submitted_at__isnull=True).exists()
    assert set(sessions.values_list("queue", flat=True)) == {"generation", "quality_control"}
    assert set(sessions.values_list("finish_reason", flat=True)) <= {"found_error", "solution"}
    assert StepRating.objects.filter(step__session__in=sessions).count() >= 80

    # Two generations; the second was selected by the first model version.
    generations = list(Generation.objects.order_by("number"))
    assert [g.number for g in generations] == [1, 2]
    runs = list(TrainingRun.objects.order_by("pk"))
    assert [r.status for r in runs] == ["succeeded", "succeeded"]
    versions = list(ModelVersion.objects.order_by("pk"))
    assert len(versions) == 2 and versions[-1].is_active
    assert generations[1].model_version == versions[0]
    assert generations[1].params["strategy"] == "convincing_wrong_answer"
    second = Solution.objects.filter(generation=generations[1], is_quality_control=False)
    assert set(second.values_list("selection_reason", flat=True)) <= {
        "wrong_answer_convincing",
        "convincing",
    }
    assert set(second.values_list("selection_model_version", flat=True)) == {versions[0].pk}
    assert sessions.filter(generation=generations[1]).count() == 40

    # Per generation: labels used, step metrics, best-of-N of PRM, ORM and majority voting.
    result = json.loads(out.read_text())["strategies"]["convincing_wrong_answer"]
    rows = result["generations"]
    assert [(r["generation"], r["labels"]) for r in rows] == [(1, 40), (2, 80)]
    for row in rows:
        assert isinstance(row["step_auroc"], float)
        assert "first_error_f1" in row
        # The PRM under its own rule (product) and the min rule, the ORM, majority voting.
        assert set(row["best_of_n"]) == {"prm", "prm_min", "orm", "majority"}
        assert set(row["best_of_n"]["prm"]) == {"1", "4", "16"}
        # Every method sees the same draws: with one sample drawn there is nothing to choose.
        assert len({json.dumps(by_n["1"]) for by_n in row["best_of_n"].values()}) == 1
    assert "convincing_wrong_answer" in stdout.getvalue()


def test_compare_reports_labels_needed_to_reach_the_baselines_auroc():
    def result(points):
        rows = [
            {
                "generation": k + 1,
                "labels": labels,
                "wrong_answer_share": 0.5,
                "step_auroc": auroc,
                "first_error_f1": 0.5,
                "best_of_n": {"prm": {"4": {"mean": 0.8, "std": 0.0}}},
            }
            for k, (labels, auroc) in enumerate(points)
        ]
        return loop.SimulationResult(config={"best_of": [4]}, pool={}, generations=rows)

    results = {
        "convincing_wrong_answer": result([(500, 0.7), (1000, 0.9), (1500, 0.95)]),
        "uniform": result([(500, 0.7), (1000, 0.8), (1500, 0.9)]),
    }
    efficiency = loop.data_efficiency(results)
    assert efficiency["target_auroc"] == 0.9
    assert efficiency["labels_needed"] == {"convincing_wrong_answer": 1000.0, "uniform": 1500.0}
    assert efficiency["efficiency_vs_uniform"]["convincing_wrong_answer"] == 1.5
    text = loop.table(results)
    assert "prm@4" in text and len(text.splitlines()) == 7


def test_the_averaged_efficiency_is_the_slope_ratio_of_straight_learning_curves():
    def result(slope):
        # AUROC = 0.5 + slope * labels: to reach any level a strategy needs (level - 0.5) /
        # slope labels, so the ratio to uniform is the slopes' ratio at every level.
        rows = [
            {"generation": k + 1, "labels": labels, "step_auroc": 0.5 + slope * labels}
            for k, labels in enumerate([500, 1000, 1500])
        ]
        return loop.SimulationResult(config={}, pool={}, generations=rows)

    results = {"selected": result(0.0003), "uniform": result(0.0002)}

    efficiency = loop.mean_efficiency(results)

    # Levels from the highest first AUROC (0.65) to the lowest final one (0.8).
    assert efficiency["auroc_levels"] == [0.65, 0.6875, 0.725, 0.7625, 0.8]
    assert efficiency["mean_efficiency_vs_uniform"]["selected"] == pytest.approx(1.5, abs=1e-3)
    assert efficiency["mean_efficiency_vs_uniform"]["uniform"] == 1.0
    # Curves that share no AUROC range give no figure rather than an extrapolated one.
    results["selected"].generations[0]["step_auroc"] = 0.85
    assert loop.mean_efficiency(results) == {}


def test_the_table_shows_an_orm_trained_at_the_final_label_count_only():
    def row(generation: int, labels: int, verifiers: dict) -> dict:
        return {
            "generation": generation,
            "labels": labels,
            "wrong_answer_share": 0.5,
            "step_auroc": 0.8,
            "first_error_f1": 0.5,
            "best_of_n": {
                name: {"4": {"mean": mean, "std": 0.0}} for name, mean in verifiers.items()
            },
        }

    rows = [row(1, 500, {"prm": 0.7}), row(2, 1000, {"prm": 0.8, "orm": 0.75})]
    results = {"uniform": loop.SimulationResult(config={"best_of": [4]}, pool={}, generations=rows)}

    header, first, last = (line.split() for line in loop.table(results).splitlines())
    assert header[-2:] == ["prm@4", "orm@4"]
    assert first[-2:] == ["0.700", "-"]
    assert last[-2:] == ["0.800", "0.750"]


def test_samples_stay_what_the_documented_figures_were_measured_on():
    # Rollouts made the generator record its states; the samples themselves must not move.
    generator = Generator(seed=0)
    problem = make_problems(3, seed=0)[2]
    assert problem.text == "Work modulo 10. Evaluate 7 × 5 + 2 + 4."
    first, second = generator.sample(problem, 0), generator.sample(problem, 1)
    assert first.texts == ["Then 7 × 5 = 5.", "4 + 5 = 9.", "Then 9 + 2 = 1.", "# Answer\n\n1"]
    assert second.texts == [
        "7 × 5 = 5.",
        "Then 2 + 4 = 8.",
        "Let me look at the expression again.",
        "Then 8 + 5 = 3.",
        "# Answer\n\n3",
    ]
    assert second.states == (("+", (5, 2, 4)), ("+", (5, 8)), ("+", (5, 8)), 3, 3)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.django_db
def test_simulate_shows_generations_done_and_time_left_on_a_terminal(
    settings, tmp_path, monkeypatch
):
    """Issue 30, point 12: a simulation runs for hours and said only a line per generation."""
    settings.PRM_MODEL_DIR = tmp_path / "models"
    settings.PRM_HEARTBEAT_SECONDS = 3600
    terminal = _Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    call_command(
        "simulate",
        *("--generations", "2", "--labels-per-generation", "20"),
        *("--pool-size", "120", "--samples-per-problem", "4", "--quality-control", "1"),
        *("--labelers", "1", "--seed", "5", "--test-problems", "4", "--test-samples", "8"),
        *("--best-of", "1,4", "--trials", "4", "--epochs", "1"),
        stdout=io.StringIO(),
    )
    shown = terminal.getvalue()
    assert "simulation" in shown and "2/2" in shown and "generation" in shown
    # The simulation's own lines come above the bar, on the same stream.
    assert "Generation 1:" in shown
