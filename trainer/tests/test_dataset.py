"""Training examples from submitted sessions: what is supervised, and which sessions count."""

from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from labeling.models import (
    Generation,
    LabelingSession,
    Problem,
    Solution,
    StepLabel,
    StepRating,
)
from labeling.services.prm800k_import import import_prm800k
from trainer.training.dataset import Example, build_examples, snapshot_hash, split_by_problem

FIXTURES = Path(__file__).resolve().parents[2] / "labeling" / "tests" / "fixtures"

pytestmark = pytest.mark.django_db


@pytest.fixture
def solution_of(make_solution):
    """`solution_of(problem_text, steps, **fields)`: a solution of that problem (answer 5)."""

    def make(problem_text: str, steps: list[str], **fields) -> Solution:
        problem, _ = Problem.objects.get_or_create(text=problem_text, defaults={"answer": "5"})
        return make_solution(problem, steps=steps, **fields)

    return make


def label(labeler, solution, ratings, *, submitted=True, alternatives=None, **fields):
    """A session rating the solution's own steps; alternatives: {step: [(text, rating)]}."""
    now = timezone.now()
    session = LabelingSession.objects.create(
        labeler=labeler,
        solution=solution,
        started_at=now - timedelta(minutes=1),
        submitted_at=now if submitted else None,
        **fields,
    )
    for index, rating in enumerate(ratings):
        step = StepLabel.objects.create(
            session=session, index=index, chosen_completion=None if rating == -1 else 0
        )
        StepRating.objects.create(
            step=step, completion_index=0, text=solution.steps[index], rating=rating
        )
        for k, (text, alt_rating) in enumerate((alternatives or {}).get(index, []), start=1):
            StepRating.objects.create(step=step, completion_index=k, text=text, rating=alt_rating)
    return session


def test_steps_stop_at_the_first_error_and_alternatives_become_examples(make_labeler, solution_of):
    labeler = make_labeler()
    solution = solution_of("What is $2+3$?", ["Add.", "Get $6$.", "So $6$.", "# Answer 6"])
    label(
        labeler,
        solution,
        [1, -1],
        alternatives={1: [("Get $5$.", 1), ("Get $7$.", -1), ("Shown, never rated.", None)]},
    )
    # Unsubmitted work is not training data.
    label(make_labeler("other"), solution, [1, 1, 1, 1], submitted=False)

    examples = build_examples()

    problem_id = solution.problem_id
    assert examples == [
        Example(problem_id, solution.pk, "What is $2+3$?", ["Add.", "Get $6$."], [1, -1]),
        Example(problem_id, None, "What is $2+3$?", ["Add.", "Get $5$."], [1, 1]),
        Example(problem_id, None, "What is $2+3$?", ["Add.", "Get $7$."], [1, -1]),
    ]


def test_phase2_import_gives_one_example_per_solution_plus_rated_alternatives():
    import_prm800k(path=FIXTURES / "prm800k_phase2.jsonl")

    examples = build_examples()

    # Lines 1-8 minus the screening line 5, and lines 3 and 4 (two labelers' labels of one
    # quality-control solution) give one; line 2 adds 4 alternatives, line 8 adds 2.
    assert len(examples) == 12
    own = [e for e in examples if e.solution_id is not None]
    assert len(own) == 6
    for example in examples:
        assert len(example.steps) == len(example.labels) >= 1
        assert -1 not in example.labels[:-1]  # nothing is supervised past the first error
    give_up = next(e for e in own if e.problem.startswith("Find the remainder when $2^{10"))
    assert give_up.labels == [1, 0]  # only what was rated before giving up
    error = [e for e in examples if e.problem.startswith("What is the least common multi")]
    assert sorted(e.labels[-1] for e in error) == [-1, 1, 1]


def test_phase1_import_uses_the_chosen_path_and_unchosen_completions():
    import_prm800k(path=FIXTURES / "prm800k_phase1.jsonl")
    problem = Problem.objects.get(text__startswith="What is the value of $\\frac{2}{3}")

    examples = [e for e in build_examples() if e.problem_id == problem.pk]

    own = [e for e in examples if e.solution_id is not None]
    assert len(own) == 1
    assert own[0].labels == [1, 1, 1]
    assert own[0].steps[0] == "The least common denominator of $3$ and $4$ is $12$."
    alternatives = sorted((len(e.steps), e.labels[-1], e.steps[-1]) for e in examples[1:])
    assert alternatives == [
        (1, -1, "Let's multiply the two fractions together."),
        (1, 1, "We need a common denominator, which is $12$."),
        (3, -1, "So the answer is $\\frac{17}{24}$.\n\n# Answer\n\n\\frac{17}{24}"),
        (3, 1, "Then the sum is $\\frac{17}{12}$.\n\n# Answer\n\n\\frac{17}{12}"),
    ]
    # A step the labeler wrote themselves is supervised as a good step.
    notebook = Problem.objects.get(text__startswith="Two notebooks and a pen")
    written = next(e for e in build_examples() if e.problem_id == notebook.pk and e.solution_id)
    assert written.steps[1] == "In cents, $2n + p = 410$ and $3n + p = 565$."
    assert written.labels[1] == 1


def test_quality_control_screening_and_generation_filters(make_labeler, solution_of):
    labeler = make_labeler()
    generations = {n: Generation.objects.create(number=n) for n in (-1, 1, 2, 3)}

    def session(name, generation, **flags):
        solution = solution_of(f"Problem {name}", [f"{name} step"], **flags)
        label(labeler, solution, [1], generation=generations.get(generation), **flags)

    session("phase1", None)
    session("g1", 1)
    session("g2", 2)
    session("g3", 3)
    session("qc", 2, is_quality_control=True)
    session("screening", -1, is_screening=True)

    def names(**filters):
        return sorted(e.problem.removeprefix("Problem ") for e in build_examples(**filters))

    assert names() == ["g1", "g2", "g3", "phase1", "qc"]
    assert names(include_quality_control=False) == ["g1", "g2", "g3", "phase1"]
    assert names(include_screening=True) == ["g1", "g2", "g3", "phase1", "qc", "screening"]
    assert names(generation_min=2) == ["g2", "g3", "qc"]
    assert names(generation_min=2, generation_max=2, include_quality_control=False) == ["g2"]
    assert names(generation_max=1) == ["g1"]


def test_split_keeps_every_problem_on_one_side():
    examples = [
        Example(problem_id=p, solution_id=s, problem=f"p{p}", steps=["a"], labels=[1])
        for p in range(20)
        for s in range(3)
    ]

    train, held_out = split_by_problem(examples, eval_fraction=0.2, seed=7)

    train_problems = {e.problem_id for e in train}
    held_problems = {e.problem_id for e in held_out}
    assert not train_problems & held_problems
    assert len(held_problems) == 4
    assert len(train) + len(held_out) == len(examples)
    assert split_by_problem(examples, eval_fraction=0.2, seed=7) == (train, held_out)
    assert split_by_problem(examples, eval_fraction=0.2, seed=8)[1] != held_out
    # One problem cannot be split into two sides.
    assert split_by_problem(examples[:3], eval_fraction=0.5) == (examples[:3], [])


def test_snapshot_hash_changes_exactly_when_the_data_does():
    a = Example(problem_id=1, solution_id=2, problem="p", steps=["x", "y"], labels=[1, -1])
    b = Example(problem_id=1, solution_id=2, problem="p", steps=["x", "y"], labels=[1, 0])
    assert snapshot_hash([a, b]) == snapshot_hash([a, b])
    assert len(snapshot_hash([a])) == 64
    assert snapshot_hash([a]) != snapshot_hash([b])
    assert snapshot_hash([a, b]) != snapshot_hash([b, a])
