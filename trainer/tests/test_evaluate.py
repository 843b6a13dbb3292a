"""Best-of-N and majority voting under PRM800K's protocol, on cases computable by hand."""

import io
import json
from math import comb

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from trainer.evaluation import best_of_n as evaluate
from trainer.evaluation.best_of_n import Sample, estimate_best_of_n, majority_vote


def s(problem, answer, correct, prm=None, orm=None) -> Sample:
    scores = {k: v for k, v in (("prm_score", prm), ("orm_score", orm)) if v is not None}
    return Sample(problem=problem, answer=answer, is_correct=correct, scores=scores)


def exact_best_of_n(samples: list[Sample], *, n: int, pool: int) -> float:
    """The expectation the trials estimate, for distinct scores: sample r-th best is picked
    when it is drawn and none of the r above it is, C(pool-1-r, n-1) / C(pool, n)."""
    by_problem = {}
    for sample in samples:
        by_problem.setdefault(sample.problem, []).append(sample)
    total = 0.0
    for group in by_problem.values():
        ranked = sorted(
            (x for x in group if x.answer is not None), key=lambda x: -x.scores["prm_score"]
        )
        total += sum(
            comb(pool - 1 - r, n - 1) / comb(pool, n) for r, x in enumerate(ranked) if x.is_correct
        )
    return total / len(by_problem)


def test_drawing_the_whole_pool_always_picks_the_top_score():
    samples = [
        s("p", "5", True, prm=0.9),
        s("p", "6", False, prm=0.1),
        s("q", "1", False, prm=0.8),
        s("q", "2", True, prm=0.3),
    ]
    estimate = estimate_best_of_n(samples=samples, n=2, trials=50)
    assert (estimate.mean, estimate.std) == (0.5, 0.0)
    assert (estimate.problems, estimate.trials, estimate.method) == (2, 50, "prm_score")


def test_one_draw_of_two_is_right_half_the_time():
    samples = [s("p", "5", True, prm=0.9), s("p", "6", False, prm=0.1)]
    estimate = estimate_best_of_n(samples=samples, n=1, trials=4000, seed=1)
    assert estimate.mean == pytest.approx(0.5, abs=0.03)
    # One problem: each trial is 0 or 1, so the std is that of a fair coin.
    assert estimate.std == pytest.approx(0.5, abs=0.01)


def test_padding_to_the_pool_makes_draws_come_up_empty():
    samples = [s("p", "5", True, prm=0.9)]
    assert estimate_best_of_n(samples=samples, n=1, pool_size=4, trials=4000).mean == pytest.approx(
        0.25, abs=0.03
    )
    assert estimate_best_of_n(samples=samples, n=4, pool_size=4, trials=10).mean == 1.0


def test_a_sample_without_an_answer_is_never_picked():
    samples = [s("p", None, True, prm=0.99), s("p", "6", False, prm=0.5)]
    assert estimate_best_of_n(samples=samples, n=2, trials=10).mean == 0.0
    # Unscored samples rank below scored ones.
    unscored = [s("p", "5", True), s("p", "6", False, prm=0.01)]
    assert estimate_best_of_n(samples=unscored, n=2, trials=10).mean == 0.0


def test_the_trial_mean_converges_to_the_exact_expectation():
    samples = [
        s("p", str(i), correct, prm=score)
        for i, (score, correct) in enumerate(
            [(0.9, False), (0.8, True), (0.7, False), (0.6, True), (0.5, True), (0.4, False)]
        )
    ] + [s("q", "1", True, prm=0.2), s("q", "2", False, prm=0.7)]
    for n in (1, 3, 6):
        want = exact_best_of_n(samples, n=n, pool=6)
        got = estimate_best_of_n(samples=samples, n=n, trials=3000, seed=n).mean
        assert got == pytest.approx(want, abs=0.02), n


def test_each_score_ranks_on_its_own():
    samples = [s("p", "5", True, prm=0.9, orm=0.1), s("p", "6", False, prm=0.2, orm=0.8)]
    assert estimate_best_of_n(samples=samples, n=2, score="prm_score", trials=5).mean == 1.0
    assert estimate_best_of_n(samples=samples, n=2, score="orm_score", trials=5).mean == 0.0


def test_the_same_seed_gives_the_same_estimate():
    samples = [s(p, str(i), i % 3 == 0, prm=(7 * i % 11) / 11) for p in "abc" for i in range(9)]
    first = estimate_best_of_n(samples=samples, n=3, trials=30, seed=5)
    assert first == estimate_best_of_n(samples=samples, n=3, trials=30, seed=5)
    assert first != estimate_best_of_n(samples=samples, n=3, trials=30, seed=6)


def test_bad_sizes_are_refused():
    samples = [s("p", "5", True, prm=0.9)]
    with pytest.raises(ValueError, match="N must be between 1 and the pool size"):
        estimate_best_of_n(samples=samples, n=2)
    with pytest.raises(ValueError, match="pool_size 0 is below"):
        estimate_best_of_n(samples=samples, n=1, pool_size=0)


# --- majority voting --------------------------------------------------------------------------


def test_majority_groups_equivalent_answers():
    samples = [
        s("p", "\\frac{1}{2}", True),
        s("p", "0.5", True),
        s("p", "1/2", True),
        s("p", "3", False),
        s("p", "3", False),
    ]
    # By equivalence the right answer has 3 votes against 2.
    assert majority_vote(samples=samples, n=5, trials=5).mean == 1.0
    # Compared as plain strings "3" wins with 2 votes against 1, 1, 1.
    assert majority_vote(samples=samples, n=5, trials=5, same_answer=str.__eq__).mean == 0.0
    # A precomputed answer key does the grouping without the grader.
    key = {"\\frac{1}{2}": "1/2", "0.5": "1/2"}
    assert majority_vote(samples=samples, n=5, trials=5, answer_key=key).mean == 1.0


def test_majority_ties_go_either_way():
    samples = [s("p", "5", True), s("p", "6", False)]
    estimate = majority_vote(samples=samples, n=2, trials=4000, seed=2)
    assert estimate.mean == pytest.approx(0.5, abs=0.03)
    assert estimate.method == "majority"


def test_majority_of_draws_is_exact_on_a_small_case():
    # Answers a, a, b with a right: 2 of 3 draws hold at least one a and the single-vote
    # tie a/b resolves by coin: P(right) with n=2 is 1/3 * 1 + 2/3 * 1/2 = 2/3.
    samples = [s("p", "a", True), s("p", "a", True), s("p", "b", False)]
    got = majority_vote(samples=samples, n=2, trials=6000, seed=3, same_answer=str.__eq__)
    assert got.mean == pytest.approx(2 / 3, abs=0.02)
    assert majority_vote(samples=samples, n=3, trials=5, same_answer=str.__eq__).mean == 1.0


def test_problems_without_answers_count_as_unsolved():
    samples = [s("p", None, True), s("q", "1", True)]
    assert majority_vote(samples=samples, n=1, trials=5).mean == 0.5


# --- files and the command --------------------------------------------------------------------


LINES = [
    {"problem": "p", "answer": "5", "is_correct": True, "prm_score": 0.9, "orm_score": 0.2},
    {"problem": "p", "given_answer": "6", "is_correct": False, "prm_score": 0.3, "orm_score": 0.7},
    {"problem": "p", "answer": None, "is_correct": False, "prm_score": 0.99},
    {"problem": "q", "answer": "1", "is_correct": True, "prm_score": 0.6, "orm_score": 0.6},
]


@pytest.fixture
def scored_file(tmp_path):
    path = tmp_path / "scored.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in LINES) + "\n")
    return path


def test_a_scored_samples_file_is_read_with_given_answer_and_null_answers(scored_file):
    samples = evaluate.read_scored_samples(path=scored_file)
    assert [x.answer for x in samples] == ["5", "6", None, "1"]
    assert samples[1].scores == {"prm_score": 0.3, "orm_score": 0.7}
    assert samples[2].scores == {"prm_score": 0.99}


@pytest.mark.parametrize(
    "line,message",
    [
        ("not json", "not valid JSON"),
        ('{"answer": "1", "is_correct": true}', "'problem' must be"),
        ('{"problem": "p", "is_correct": "yes"}', "'is_correct' must be"),
        ('{"problem": "p", "is_correct": true, "prm_score": "high"}', "'prm_score' must be"),
    ],
)
def test_a_bad_line_names_file_and_line(tmp_path, line, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(LINES[0]) + "\n" + line + "\n")
    with pytest.raises(ValueError, match=f"bad.jsonl:2: {message}"):
        evaluate.read_scored_samples(path=path)


def test_evaluate_runs_every_method_present_at_every_n(scored_file):
    samples = evaluate.read_scored_samples(path=scored_file)
    estimates = evaluate.evaluate(
        samples=samples, ns=[1, 3], methods=["prm_score", "orm_score", "rm_score", "majority"]
    )
    assert [(e.method, e.n) for e in estimates] == [
        ("prm_score", 1),
        ("prm_score", 3),
        ("orm_score", 1),
        ("orm_score", 3),
        ("majority", 1),
        ("majority", 3),
    ]
    by = {(e.method, e.n): e.mean for e in estimates}
    # N=3 draws all of p: the PRM picks "5" (the unanswered 0.99 is skipped), the ORM "6".
    assert by[("prm_score", 3)] == 1.0
    assert by[("orm_score", 3)] == 0.5


def test_the_command_prints_a_table(scored_file):
    out = io.StringIO()
    call_command("evaluate", str(scored_file), n="1,3", trials=20, stdout=out, stderr=io.StringIO())
    text = out.getvalue()
    assert "4 samples of 2 problems, 20 trials" in text
    header, rule, *rows = text.splitlines()[1:]
    assert header.split() == ["N", "prm_score", "orm_score", "majority"]
    assert rows[1].split()[:4] == ["3", "100.0", "±", "0.0"]


def test_the_command_refuses_bad_input(tmp_path, scored_file):
    with pytest.raises(CommandError, match="cannot read"):
        call_command("evaluate", str(tmp_path / "missing.jsonl"))
    with pytest.raises(CommandError, match="--n takes"):
        call_command("evaluate", str(scored_file), n="a,b")
    with pytest.raises(CommandError, match="N must be between"):
        call_command("evaluate", str(scored_file), n="5")


@pytest.mark.django_db
def test_stored_solutions_are_samples_by_problem():
    from labeling.models import Problem, Solution

    problem = Problem.objects.create(text="1+1?", answer="2")
    for answer, score in (("2", 0.4), ("3", None), ("", None)):
        Solution.objects.create(
            problem=problem,
            steps=[f"So {answer or '?'}."],
            answer=answer,
            is_correct=answer == "2",
            prm_score=score,
        )
    samples = evaluate.samples_from_solutions()
    assert [(x.problem, x.answer, x.scores) for x in samples] == [
        (problem.pk, "2", {"prm_score": 0.4}),
        (problem.pk, "3", {}),
        (problem.pk, None, {}),
    ]
    assert estimate_best_of_n(samples=samples, n=3, trials=3).mean == 1.0
