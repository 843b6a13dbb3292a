"""Rollout labels in the simulation: Math-Shepherd's estimates from the exact generator, the
equal-cost accounting, and `manage.py simulate --label-sources`."""

import io
import json
import math
from itertools import islice

import pytest
from django.core.management import CommandError, call_command

from trainer.evaluation.simulation import rollouts_vs_humans as ls
from trainer.evaluation.simulation.domain import (
    ADD,
    ANSWER_MARKER,
    MUL,
    Generator,
    GeneratorConfig,
    Misconception,
    Problem,
    Sample,
    Step,
    evaluate,
)

# A generator that never errs: from any state, every rollout reaches that state's value.
EXACT = GeneratorConfig(misconceptions=0, slip_rate=0.0, forget_distribute_rate=0.0)


def hand_sample(problem: Problem, facts: list[tuple[str, int, object]]) -> Sample:
    """A solution written by hand: (fact text, its own rating, the state after it)."""
    steps = [Step(text, "fact", rating) for text, rating, _ in facts]
    answer = facts[-1][2]
    steps.append(Step(f"{ANSWER_MARKER}{answer}", "answer", 1))
    states = (*(state for _, _, state in facts), answer)
    return Sample(problem=problem, steps=tuple(steps), answer=answer, states=states)


SUM = Problem(key="sim-hand-sum", expression=(ADD, (3, 4, 5)), leaves=3)  # 2


def test_a_wrong_step_that_no_rollout_recovers_from_is_labeled_minus_one_and_stops():
    generator = Generator(seed=0, config=EXACT)
    # 3 + 4 = 8 is wrong; from 8 + 5 an exact generator reaches 3, never the answer 2.
    wrong = hand_sample(SUM, [("3 + 4 = 8.", -1, (ADD, (8, 5))), ("8 + 5 = 3.", 1, 3)])
    labels = ls.rollout_labels(generator, wrong, rollouts=4)
    assert labels.reached == (0,)
    assert labels.hard == [-1] and labels.soft == [0.0]
    assert labels.completions == 4  # one step rolled out, then labeling stops at the -1

    right = hand_sample(SUM, [("3 + 4 = 7.", 1, (ADD, (7, 5))), ("7 + 5 = 2.", 1, 2)])
    labels = ls.rollout_labels(generator, right, rollouts=4)
    assert labels.hard == [1, 1, 1] and labels.soft == [1.0, 1.0, 1.0]
    # Two prefixes rolled out; the answer step's prefix is the whole (right) solution.
    assert labels.completions == 8


def test_rollout_labels_are_not_step_correctness_where_the_domain_says_so():
    # Modulo 10, × 5 absorbs the error: (3 + 4) × 5 = 5 and (wrong) 9 × 5 = 5 too.
    absorbing = Problem(key="sim-hand-absorb", expression=(MUL, ((ADD, (3, 4)), 5)), leaves=3)
    assert absorbing.answer == 5
    wrong = hand_sample(absorbing, [("3 + 4 = 9.", -1, (MUL, (9, 5))), ("9 × 5 = 5.", 1, 5)])
    labels = ls.rollout_labels(Generator(seed=0, config=EXACT), wrong, rollouts=3)
    assert labels.hard == [1, 1, 1]  # the wrong step is labeled +1: it still reaches 5

    # A right step followed by a generator that always believes 7 + 5 = 3 is labeled -1.
    generator = Generator(seed=0, config=EXACT)
    generator.misconceptions = {(ADD, 5, 7): Misconception(ADD, 5, 7, wrong=3, rate=1.0)}
    right = hand_sample(SUM, [("3 + 4 = 7.", 1, (ADD, (7, 5))), ("7 + 5 = 2.", 1, 2)])
    assert ls.rollout_labels(generator, right, rollouts=8).hard == [-1]

    # Believed half the time: the soft label is the share of rollouts that get it right.
    generator.misconceptions = {(ADD, 5, 7): Misconception(ADD, 5, 7, wrong=3, rate=0.5)}
    soft = ls.rollout_labels(generator, right, rollouts=400).soft
    assert 0.4 < soft[0] < 0.6
    assert soft[1:] == [1.0, 1.0]


def test_rollouts_start_from_what_the_generator_wrote():
    generator = Generator(seed=5)
    exact = Generator(seed=5, config=EXACT)
    for sample in islice(ls.training_stream(generator, seed=5, per_problem=4), 200):
        assert len(sample.states) == len(sample.steps)
        assert sample.states[-1] == sample.answer
        for index, state in enumerate(sample.states):
            reached = exact.finish(sample.problem, state, salt=f"t{index}")
            assert reached == evaluate(state)
        # The exact generator's rollouts say exactly whether each prefix still leads to the
        # answer, and that is +1 up to the first error (an error is rarely absorbed).
        labels = ls.rollout_labels(exact, sample, rollouts=1).hard
        if sample.first_error is None:
            assert labels == [1] * len(sample.steps)


# --- equal cost -------------------------------------------------------------------------------


def test_a_budget_buys_exactly_what_the_cost_model_says():
    generator = Generator(seed=1)
    cost = ls.CostModel(human_cost=64, rollouts=4)
    budget = 1000.0

    human = ls.buy_labels(
        source="human", budget=budget, cost=cost, generator=generator, seed=1, noise=0.0
    )
    assert human.human_solutions == 15 and human.rollout_solutions == 0  # 15 × 64 = 960
    assert human.completions == 960
    # A labeler without noise gives each solution's exact ratings up to the first -1.
    samples = list(islice(ls.training_stream(generator, seed=1, per_problem=4), 400))
    assert [e.labels for e in human.examples] == [s.gold_ratings for s in samples[:15]]
    assert human.label_accuracy == 1.0

    rollout = ls.buy_labels(
        source="rollout", budget=budget, cost=cost, generator=generator, seed=1, noise=0.0
    )
    spent, count = 0, 0
    for sample in samples:
        completions = ls.rollout_labels(generator, sample, rollouts=4).completions
        if spent + completions > budget:
            break
        spent, count = spent + completions, count + 1
    assert (rollout.rollout_solutions, rollout.completions) == (count, spent)
    assert rollout.human_solutions == 0 and count > 15
    assert all(set(e.labels) <= {-1, 1} for e in rollout.examples)

    mixed = ls.buy_labels(
        source="mixed", budget=budget, cost=cost, generator=generator, seed=1, noise=0.0
    )
    assert mixed.human_solutions == math.floor(500 / 64) == 7
    assert mixed.completions <= budget
    assert mixed.examples[:7] == human.examples[:7]
    # Its rollouts label the solutions after the human-labeled ones, with what is left.
    left, expected = budget - 7 * 64, []
    for sample in samples[7:]:
        rolled = ls.rollout_labels(generator, sample, rollouts=4)
        if rolled.completions > left:
            break
        left -= rolled.completions
        expected.append(rolled.hard)
    assert [e.labels for e in mixed.examples[7:]] == expected


def test_noisy_labelers_and_rollouts_disagree_with_the_truth_on_some_steps():
    generator = Generator(seed=2)
    cost = ls.CostModel(human_cost=10, rollouts=8)
    noisy = ls.buy_labels(
        source="human", budget=3000, cost=cost, generator=generator, seed=2, noise=0.2
    )
    assert 0.7 < noisy.label_accuracy < 0.95
    # Rollouts are noisy too: a later misconception turns a right prefix's label to -1.
    rolled = ls.buy_labels(
        source="rollout", budget=3000, cost=cost, generator=generator, seed=2, noise=0.2
    )
    assert 0.8 < rolled.label_accuracy < 1.0


# --- the command ------------------------------------------------------------------------------

TINY = [
    "--label-sources",
    "--budget=600",
    "--human-cost=64",
    "--rollouts=2",
    "--seeds=0",
    "--ls-test-problems=4",
    "--ls-test-samples=4",
    "--best-of=1,4",
    "--trials=5",
    "--epochs=1",
]


def test_the_comparison_prints_a_row_per_source(tmp_path):
    out = io.StringIO()
    call_command(
        "simulate", *TINY, f"--out={tmp_path / 'sources.json'}", stdout=out, stderr=io.StringIO()
    )
    lines = out.getvalue().splitlines()
    assert "Budget 600 completions" in lines[0]
    header = lines[1].split()
    assert header[:2] == ["source", "human"]
    rows = {line.split()[0]: line.split() for line in lines[2:5]}
    assert list(rows) == ["human", "rollout", "mixed"]
    assert rows["human"][1:3] == ["9", "0"]  # 600 // 64 human-labeled solutions, no rollouts
    assert rows["rollout"][1] == "0" and int(rows["rollout"][2]) > 9
    assert rows["mixed"][1] == "4" and int(rows["mixed"][2]) > 0  # 300 // 64
    payload = json.loads((tmp_path / "sources.json").read_text())
    assert {r["source"] for r in payload["runs"]} == {"human", "rollout", "mixed"}
    for run in payload["runs"]:
        assert run["completions"] <= 600
        assert 0.0 <= run["step_auroc"] <= 1.0
        assert set(run["best_of_n"]) == {"prm", "majority"}


@pytest.mark.parametrize(
    "bad",
    [["--best-of=1,8"], ["--sources=human,crowd"], ["--budget=10"], ["--human-cost=0"]],
)
def test_the_comparison_refuses_what_it_cannot_measure(bad):
    with pytest.raises(CommandError):
        call_command("simulate", *TINY, *bad, stdout=io.StringIO(), stderr=io.StringIO())
