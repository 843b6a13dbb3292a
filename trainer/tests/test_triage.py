"""The triage simulation (issue 31, item 7): a judge with a set error and bias, labelers who
follow a shown suggestion, the search's cost, and strategies and label sources compared at
equal human budget (`manage.py simulate --triage`)."""

import random

import pytest
from django.core.management import CommandError, call_command

from trainer.evaluation.simulation import triage, triage_report
from trainer.evaluation.simulation.domain import Generator, make_problems
from trainer.evaluation.simulation.judge import SimulatedJudge
from trainer.evaluation.simulation.labelers import suggested_ratings
from trainer.evaluation.simulation.rollouts_vs_humans import search_cost


def _samples(count: int, *, seed: int = 0):
    generator = Generator(seed=seed)
    problems = make_problems(count, seed=seed, namespace="triage-test")
    return generator, [s for p in problems for s in generator.samples(p, 4)]


def test_a_judge_without_error_rates_every_step_as_its_truth_up_to_the_first_error():
    _, samples = _samples(20)
    judge = SimulatedJudge(error=0.0, bias=0.5)
    for sample in samples:
        assert judge.ratings(sample, rng=random.Random(1)) == sample.gold_ratings


def test_a_lenient_judge_misses_wrong_steps_and_never_flags_right_ones():
    _, samples = _samples(60)
    judge = SimulatedJudge(error=0.3, bias=1.0)  # miss 0.6, false alarm 0
    assert (judge.miss, judge.false_alarm) == (0.6, 0.0)
    rng = random.Random(0)
    missed = wrong = 0
    for sample in samples:
        given = judge.ratings(sample, rng=rng)
        for rating, step in zip(given, sample.steps, strict=False):
            if step.rating != -1:
                assert rating == step.rating  # a right step is never flagged
            else:
                wrong += 1
                missed += rating == 1
    assert wrong > 50
    assert 0.45 < missed / wrong < 0.75


def test_labelers_follow_a_shown_suggestion_with_the_set_probability():
    truth = [1, 1, 0, 1, 1, -1]
    suggestion = [1, -1]  # the judge flags step 1, wrongly, and stops there
    rng = random.Random(3)
    assert suggested_ratings(truth, suggestion, noise=0.0, follow=1.0, rng=rng) == [1, -1]
    assert suggested_ratings(truth, suggestion, noise=0.0, follow=0.0, rng=rng) == truth
    followed = sum(
        suggested_ratings(truth, suggestion, noise=0.0, follow=0.3, rng=rng) == [1, -1]
        for _ in range(2000)
    )
    assert 0.25 < followed / 2000 < 0.35


def test_the_search_costs_less_than_every_step_rollouts_and_finds_the_same_first_error():
    generator, samples = _samples(40)
    costs = [search_cost(generator, s, rollouts=4) for s in samples]
    for sample, cost in zip(samples, costs, strict=True):
        if sample.is_correct:
            assert cost.search == 0  # the answer step reaches: nothing to roll out
        assert cost.search <= 4 * max(1, (len(sample.steps) - 1).bit_length())
        assert cost.every_step == 4 * (len(sample.steps) - 1)
    assert sum(c.search for c in costs) < sum(c.every_step_stopping for c in costs) / 2
    assert sum(c.same_first_error for c in costs) / len(costs) > 0.9


SMALL = dict(
    seeds=(0,),
    pool_problems=24,
    per_problem=4,
    first=24,
    rounds=1,
    batch=16,
    test_problems=8,
    test_samples=8,
    best_of=(2, 8),
    trials=10,
    epochs=2,
)


@pytest.mark.slow
def test_every_strategy_and_source_is_compared_at_equal_human_budget(tmp_path):
    result = triage.compare(triage.TriageConfig(**SMALL))
    rows = {(r["kind"], r["arm"]): r for r in result["runs"]}
    for name in triage.STRATEGIES:
        assert rows[("strategy", name)]["solutions"] == 24 + 16  # the same human budget
    # Human-only is the uniform strategy's labels; the machine arms label the whole pool.
    assert rows[("source", "rollout")]["solutions"] == 96
    assert rows[("source", "judge")]["solutions"] == 96
    assert rows[("source", "human+rollout")]["solutions"] == 96
    assert rows[("source", "consensus")]["solutions"] <= 96
    assert rows[("display", "confirm")]["solutions"] == 40
    assert {s["display"] for s in result["suggestions"]} == {"hidden", "confirm"}
    hidden, confirm = result["suggestions"]
    # Labelers shown the judge agree with it more than labelers who saw nothing.
    assert confirm["judge_agreement"] > hidden["judge_agreement"]
    assert result["search"][0]["search"] < result["search"][0]["every_step"]
    text = triage_report.table(result)
    assert "consensus" in text and "ensemble_uncertainty" in text
    assert triage_report.plot(result, tmp_path / "triage.png").stat().st_size > 10_000


def test_the_command_refuses_a_budget_larger_than_the_pool():
    with pytest.raises(CommandError, match="exceeds the pool"):
        call_command("simulate", "--triage", "--pool-problems", "2", "--per-problem", "2")
    with pytest.raises(CommandError, match="strategies must be one of"):
        call_command("simulate", "--triage", "--strategies", "uniform,psychic")
    with pytest.raises(CommandError, match="judge_bias"):
        call_command("simulate", "--triage", "--judge-bias", "2")
