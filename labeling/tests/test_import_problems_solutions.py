"""MATH-style problem import and candidate solution import."""

import io
import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from labeling.models import Problem, Solution

pytestmark = pytest.mark.django_db

PROBLEMS = [
    {
        "problem": "What is $\\frac{1}{2} + \\frac{1}{4}$?",
        "solution": "We get $\\frac{2}{4} + \\frac{1}{4} = \\boxed{\\frac{3}{4}}$.",
        "answer": "\\frac{3}{4}",
        "subject": "Prealgebra",
        "level": 1,
        "unique_id": "test/prealgebra/1.json",
    },
    {
        "problem": "How many positive divisors does 12 have?",
        "solution": "1, 2, 3, 4, 6, 12: $\\boxed{6}$.",
        "answer": "6",
        "subject": "Number Theory",
        "level": "Level 2",
        "unique_id": "test/number_theory/2.json",
    },
]


def write_jsonl(path: Path, objects: list) -> Path:
    path.write_text("".join((o if isinstance(o, str) else json.dumps(o)) + "\n" for o in objects))
    return path


def run(command: str, path: Path) -> str:
    out = io.StringIO()
    call_command(command, str(path), stdout=out)
    return out.getvalue()


def test_import_problems_is_idempotent_on_unique_id(tmp_path):
    path = write_jsonl(tmp_path / "problems.jsonl", PROBLEMS)
    assert "2 created" in run("import_problems", path)
    assert "2 unchanged" in run("import_problems", path)
    assert Problem.objects.count() == 2
    problem = Problem.objects.get(unique_id="test/number_theory/2.json")
    assert (problem.level, problem.subject, problem.answer) == (2, "Number Theory", "6")

    changed = dict(PROBLEMS[1], answer="7", level=3)
    assert "1 updated" in run("import_problems", write_jsonl(tmp_path / "v2.jsonl", [changed]))
    problem.refresh_from_db()
    assert (problem.answer, problem.level) == ("7", 3)
    assert Problem.objects.count() == 2


def test_changing_a_ground_truth_regrades_its_solutions(tmp_path):
    run("import_problems", write_jsonl(tmp_path / "p.jsonl", PROBLEMS))
    solution = {"unique_id": PROBLEMS[1]["unique_id"], "steps": ["# Answer\n\n7"], "answer": "7"}
    run("import_solutions", write_jsonl(tmp_path / "s.jsonl", [solution]))
    assert Solution.objects.get().is_correct is False
    run("import_problems", write_jsonl(tmp_path / "p2.jsonl", [dict(PROBLEMS[1], answer="7")]))
    assert Solution.objects.get().is_correct is True


@pytest.mark.parametrize(
    "line,message",
    [
        ('{"problem": "x", "answer": "1"', "not valid JSON"),
        ({"answer": "1", "unique_id": "a"}, "missing required field 'problem'"),
        ({"problem": "What?", "unique_id": "a"}, "missing required field 'answer'"),
        ({"problem": "What?", "answer": 3}, "'answer' must be a string"),
        ({"problem": "What?", "answer": "3", "level": "hard"}, "'level' must be an integer"),
        (["not", "an", "object"], "expected a JSON object"),
    ],
)
def test_bad_problem_line_names_file_and_line_and_imports_nothing(tmp_path, line, message):
    path = write_jsonl(tmp_path / "problems.jsonl", [PROBLEMS[0], PROBLEMS[1], line])
    with pytest.raises(CommandError) as failure:
        run("import_problems", path)
    assert str(failure.value).startswith(f"{path}:3: {message}")
    assert Problem.objects.count() == 0


SOLUTIONS = [
    {
        "unique_id": "test/prealgebra/1.json",
        "steps": ["Common denominator: $\\frac{2}{4} + \\frac{1}{4}$.", "# Answer\n\n0.75"],
        "answer": "0.75",
        "source": "demo-model",
        "score": 0.91,
    },
    {
        "unique_id": "test/prealgebra/1.json",
        "steps": ["Add tops and bottoms: $\\frac{2}{6}$.", "# Answer\n\n\\frac{1}{3}"],
        "source": "demo-model",
        "first_error": 0,
    },
    {
        "problem": "How many positive divisors does 12 have?",
        "steps": ["The divisors are 1, 2, 3, 4, 6, 12.", "# Answer\n\n6"],
        "answer": "6",
    },
]


def test_import_solutions_grades_on_the_way_in_and_is_idempotent(tmp_path):
    run("import_problems", write_jsonl(tmp_path / "p.jsonl", PROBLEMS))
    path = write_jsonl(tmp_path / "s.jsonl", SOLUTIONS)
    assert "3 created" in run("import_solutions", path)
    assert "3 unchanged" in run("import_solutions", path)

    decimal, wrong, by_text = Solution.objects.order_by("id")
    assert decimal.is_correct and decimal.source_score == 0.91 and decimal.source == "demo-model"
    # The answer is taken from the "# Answer" step when the line has none.
    assert wrong.answer == "\\frac{1}{3}" and not wrong.is_correct
    assert wrong.meta == {"first_error": 0}
    assert by_text.problem.unique_id == "test/number_theory/2.json" and by_text.is_correct


def test_a_large_import_grades_on_worker_processes_with_the_same_verdicts(tmp_path, settings):
    settings.IMPORT_GRADING_PROCESSES = 2
    run("import_problems", write_jsonl(tmp_path / "p.jsonl", PROBLEMS))
    # More distinct answers than GradingPool.MIN_PAIRS, written the ways models write them.
    answers = [f"{form.format(k)}" for k in range(12) for form in ("\\frac{{{}}}{{4}}", "{}/4")]
    answers += [f"{k / 4}" for k in range(12)]
    lines = [
        {"unique_id": "test/prealgebra/1.json", "steps": [f"# Answer\n\n{a}"], "answer": a}
        for a in answers
    ]
    assert f"{len(lines)} created" in run(
        "import_solutions", write_jsonl(tmp_path / "s.jsonl", lines)
    )

    correct = set(Solution.objects.filter(is_correct=True).values_list("answer", flat=True))
    assert correct == {"\\frac{3}{4}", "3/4", "0.75"}
    assert Solution.objects.count() == 36


@pytest.mark.parametrize(
    "line,message",
    [
        ({"unique_id": "nope", "steps": ["a"]}, "no problem with unique_id 'nope'"),
        ({"steps": ["a"]}, "needs 'unique_id' or 'problem'"),
        ({"unique_id": "test/prealgebra/1.json", "steps": "a"}, "'steps' must be a non-empty"),
        ({"unique_id": "test/prealgebra/1.json", "steps": ["a", 2]}, "'steps[1]' must be"),
        ({"unique_id": "test/prealgebra/1.json", "steps": ["a"], "score": "hi"}, "'score'"),
    ],
)
def test_bad_solution_line_names_file_and_line_and_imports_nothing(tmp_path, line, message):
    run("import_problems", write_jsonl(tmp_path / "p.jsonl", PROBLEMS))
    path = write_jsonl(tmp_path / "s.jsonl", [SOLUTIONS[0], line])
    with pytest.raises(CommandError) as failure:
        run("import_solutions", path)
    assert str(failure.value).startswith(f"{path}:2: {message}")
    assert Solution.objects.count() == 0


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(CommandError, match="no such file"):
        run("import_problems", tmp_path / "absent.jsonl")


def test_imported_solutions_are_scored_by_the_active_version_as_they_arrive(
    tmp_path, monkeypatch, django_capture_on_commit_callbacks
):
    # Issue 30, point 9: solutions added after an activation stayed unscored until the next
    # activation while the model versions page said the scoring "updates on its own".
    from trainer import pipeline
    from trainer.models import ModelVersion

    queued = []
    monkeypatch.setattr(pipeline, "send_task", lambda name, args, **kw: queued.append((name, args)))
    run("import_problems", write_jsonl(tmp_path / "p.jsonl", PROBLEMS))
    path = write_jsonl(tmp_path / "s.jsonl", SOLUTIONS)
    with django_capture_on_commit_callbacks(execute=True):
        run("import_solutions", path)
    assert queued == []  # no active version: nothing to score with
    version = ModelVersion.objects.create(name="v", checkpoint="/m/v", is_active=True)
    more = write_jsonl(
        tmp_path / "more.jsonl", [{**SOLUTIONS[0], "steps": ["Other.", "# Answer\n\n0.75"]}]
    )
    with django_capture_on_commit_callbacks(execute=True):
        run("import_solutions", more)
    assert queued == [(pipeline.SCORE_TASK, (version.pk,))]
    # An import that adds nothing queues nothing.
    with django_capture_on_commit_callbacks(execute=True):
        run("import_solutions", more)
    assert len(queued) == 1
