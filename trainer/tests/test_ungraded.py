"""Ungraded solutions (no readable final answer, is_correct None) are not wrong answers: the
wrong-answer selection and best-of-N leave them out, and the pages count them apart."""

import io
import json

import pytest
from django.core.management import call_command
from django.urls import reverse

from labeling.models import Generation, Problem, Solution
from trainer.evaluation.best_of_n import (
    Sample,
    estimate_best_of_n,
    majority_vote,
    samples_from_solutions,
)
from trainer.selection.services import choose
from trainer.selection.strategies import Candidate


def test_convincing_wrong_answers_never_include_the_ungraded():
    candidates = [
        Candidate(1, 1, 0.99, None),  # "The numbers are 1 and 19." scored highest
        Candidate(2, 1, 0.40, False),
        Candidate(3, 2, 0.95, None),
        Candidate(4, 2, 0.30, False),
        Candidate(5, 2, 0.90, True),
    ]
    picks = choose(candidates=candidates, batch_size=3, per_problem_cap=2, wrong_share=0.67)

    wrong = [p.candidate.solution_id for p in picks if p.reason == "wrong_answer_convincing"]
    assert wrong == [2, 4]
    # Ungraded ones still compete with the right ones for the rest of the batch.
    assert [p.candidate.solution_id for p in picks if p.reason == "convincing"] == [1]


def _problem_with_an_ungraded_favourite() -> list[Sample]:
    # The PRM likes the unreadable one best; the right one is second.
    return [
        Sample(problem="p", answer="1 and 19", is_correct=None, scores={"prm_score": 0.9}),
        Sample(problem="p", answer="19", is_correct=True, scores={"prm_score": 0.8}),
        Sample(problem="p", answer="20", is_correct=False, scores={"prm_score": 0.1}),
    ]


def test_best_of_n_leaves_the_ungraded_out_and_says_how_many():
    samples = _problem_with_an_ungraded_favourite()

    best = estimate_best_of_n(samples=samples, n=2, trials=50)
    votes = majority_vote(samples=samples, n=2, trials=50, same_answer=str.__eq__)

    assert (best.mean, best.problems, best.ungraded) == (1.0, 1, 1)  # was about 1/3
    assert votes.ungraded == 1 and votes.problems == 1


def test_a_problem_with_only_ungraded_samples_is_not_counted_unsolved():
    samples = [
        *_problem_with_an_ungraded_favourite(),
        Sample(problem="q", answer="", is_correct=None, scores={"prm_score": 0.7}),
    ]
    estimate = estimate_best_of_n(samples=samples, n=1, trials=200, pool_size=3)
    assert (estimate.problems, estimate.ungraded) == (1, 2)


def test_a_scored_samples_file_may_mark_samples_ungraded(tmp_path):
    path = tmp_path / "scored.jsonl"
    lines = [
        {"problem": "p", "answer": "1 and 19", "is_correct": None, "prm_score": 0.9},
        {"problem": "p", "answer": "19", "is_correct": True, "prm_score": 0.8},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = io.StringIO()
    call_command("evaluate", str(path), "--n", "1", "--methods", "prm", stdout=out)
    assert "1 samples (1 ungraded left out) of 1 problems" in out.getvalue()


@pytest.mark.django_db
def test_stored_ungraded_solutions_are_left_out_of_best_of_n():
    solved = Problem.objects.create(text="Sum 20, product 19: the larger number?", answer="19")
    Solution.objects.create(
        problem=solved, steps=["# Answer\n\n19"], answer="19", is_correct=True, prm_score=0.5
    )
    # Imported without a ground truth: its solutions' answers cannot be graded.
    no_truth = Problem.objects.create(text="Compute $\\tan 225^\\circ$.", answer="")
    Solution.objects.create(
        problem=no_truth, steps=["# Answer\n\n1"], answer="1", is_correct=None, prm_score=0.9
    )
    estimate = estimate_best_of_n(samples=samples_from_solutions(), n=1, trials=5)
    assert (estimate.mean, estimate.problems, estimate.ungraded) == (1.0, 1, 1)


@pytest.mark.django_db
def test_pages_show_ungraded_and_count_them(client, make_user):
    generation = Generation.objects.create(number=5, params={"strategy": "uniform"})
    problem = Problem.objects.create(text="What is 3+4?", answer="7")
    for n, (answer, correct) in enumerate([("", None), ("", None), ("8", False), ("7", True)]):
        Solution.objects.create(
            problem=problem,
            steps=[f"Attempt {n}."],
            answer=answer,
            is_correct=correct,
            generation=generation,
        )
    client.force_login(make_user("researcher", "researcher"))

    page = client.get(reverse("generation-detail", args=[generation.pk])).content.decode()
    inspect = client.get(
        reverse("solution-inspect", args=[Solution.objects.first().pk])
    ).content.decode()

    assert "25% of the batch (1); 2 ungraded" in page
    assert 'class="verdict ungraded"' in inspect and 'class="verdict wrong"' not in inspect


@pytest.mark.django_db
def test_a_runs_best_of_n_problems_leave_the_ungraded_out():
    """The end-of-epoch best-of-N of a training run (dataset.best_of_n_problems) reads no
    ungraded solution: one would have no verdict to count (it failed the run with a
    TypeError), and a problem with a single graded solution has no choice to make."""
    from trainer.training.dataset import Example, best_of_n_problems

    two = Problem.objects.create(text="What is $3^2$?", answer="9")
    one = Problem.objects.create(text="What is $\\sqrt{16}$?", answer="4")
    for problem, verdicts in ((two, (True, False, None)), (one, (True, None, None))):
        for n, verdict in enumerate(verdicts):
            Solution.objects.create(
                problem=problem,
                steps=[f"Try {n}.", f"# Answer\n\n{n}"],
                answer=str(n),
                is_correct=verdict,
            )
    examples = [
        Example(
            problem_id=p.pk, solution_id=p.solutions.first().pk, problem="", steps=[], labels=[]
        )
        for p in (two, one)
    ]
    problems = best_of_n_problems(examples)
    assert [p.problem for p in problems] == [two.text]
    assert sorted(v for _, v in problems[0].solutions) == [False, True]


@pytest.mark.django_db
def test_training_on_imported_labels_when_there_are_none_says_so(make_user):
    from trainer.training import runs

    run = runs.request_training_run(
        user=make_user("res", "researcher"), params={"label_source": "imported", "epochs": 1}
    )
    run = runs.execute_training_run(run_id=run.pk, worker_hostname="celery@test")
    assert run.status == "failed"
    assert "no imported label" in run.error
