"""A solution whose final answer cannot be read is ungraded (is_correct None), not wrong; a
regrade after the answer or the ground truth is fixed grades it."""

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command

from labeling.models import Problem, Solution

pytestmark = pytest.mark.django_db

# MATH test/algebra/1265 ("two numbers whose sum is 20 and product 19"): answer 19 (the larger).
PROBLEM = {
    "problem": "The sum of two numbers is 20 and their product is 19. What is the larger number?",
    "answer": "19",
    "unique_id": "test/algebra/ungraded.json",
}
STEPS_BOXED = ["They are the roots of $x^2 - 20x + 19 = 0$.", "So the larger is $\\boxed{19}$."]
STEPS_FREE_TEXT = ["They are the roots of $x^2 - 20x + 19 = 0$.", "The numbers are 1 and 19."]


def _import(tmp_path, kind: str, objects: list[dict]) -> str:
    path = tmp_path / f"{kind}.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in objects))
    out = io.StringIO()
    call_command(f"import_{kind}", str(path), stdout=out)
    return out.getvalue()


def _regrade() -> str:
    out = io.StringIO()
    call_command("regrade", stdout=out)
    return out.getvalue()


def test_imported_solutions_without_a_readable_answer_are_ungraded_not_wrong(tmp_path):
    _import(tmp_path, "problems", [PROBLEM])
    uid = PROBLEM["unique_id"]
    _import(
        tmp_path,
        "solutions",
        [
            {"unique_id": uid, "steps": STEPS_BOXED},
            {"unique_id": uid, "steps": STEPS_FREE_TEXT},
            {"unique_id": uid, "steps": ["Half of 20 is 10.", "The answer is $10$."]},
        ],
    )
    verdicts = {s.steps[-1]: (s.answer, s.is_correct) for s in Solution.objects.all()}
    assert verdicts == {
        STEPS_BOXED[-1]: ("19", True),
        STEPS_FREE_TEXT[-1]: ("", None),
        "The answer is $10$.": ("10", False),
    }


def test_regrade_grades_ungraded_solutions_once_the_answer_is_fixed(tmp_path):
    # A problem imported without its ground truth: nothing of it can be graded.
    problem = Problem.objects.create(text=PROBLEM["problem"], answer="")
    boxed = Solution.objects.create(problem=problem, steps=STEPS_BOXED, answer="19")
    free = Solution.objects.create(problem=problem, steps=STEPS_FREE_TEXT, answer="")
    # Stored with no answer by an older extraction, though its steps box one.
    older = Solution.objects.create(
        problem=problem, steps=["Its double is $\\boxed{38}$."], answer="", is_correct=False
    )
    report = _regrade()
    assert "1 answers read from steps" in report
    assert "0 correct, 0 wrong, 3 ungraded" in report
    older.refresh_from_db()
    assert (older.answer, older.is_correct) == ("38", None)

    problem.answer = "19"
    problem.save()
    free.answer = "19"  # the researcher reads "1 and 19" and writes the larger
    free.save()
    report = _regrade()

    assert "2 correct, 1 wrong, 0 ungraded" in report
    assert [s.is_correct for s in Solution.objects.order_by("pk")] == [True, True, False]
    assert boxed.pk < free.pk < older.pk


def test_importing_the_ground_truth_grades_the_ungraded(tmp_path):
    _import(tmp_path, "problems", [dict(PROBLEM, answer="")])
    _import(tmp_path, "solutions", [{"unique_id": PROBLEM["unique_id"], "steps": STEPS_BOXED}])
    assert Solution.objects.get().is_correct is None
    _import(tmp_path, "problems", [PROBLEM])
    assert Solution.objects.get().is_correct is True


def test_the_api_says_null_for_ungraded_and_filters_on_it(client, make_user):
    problem = Problem.objects.create(text=PROBLEM["problem"], answer="19")
    Solution.objects.create(problem=problem, steps=STEPS_FREE_TEXT, answer="", is_correct=None)
    Solution.objects.create(problem=problem, steps=STEPS_BOXED, answer="19", is_correct=True)
    client.force_login(make_user("researcher", "researcher"))

    ungraded = client.get("/api/solutions/?is_correct=null").json()
    every = client.get("/api/solutions/").json()

    assert [s["is_correct"] for s in ungraded["results"]] == [None]
    assert sorted(s["is_correct"] is None for s in every["results"]) == [False, True]


def test_a_prm800k_solution_without_an_answer_is_ungraded_and_exports_unchanged(tmp_path):
    fixture = Path(__file__).parent / "fixtures" / "prm800k_phase2.jsonl"
    line = json.loads(fixture.read_text().splitlines()[0])
    # The sampler never reached "# Answer": no answer given and none in the steps (an answer
    # in the steps is read at import, as regrade reads it: test_prm800k_io.py).
    line["question"]["pre_generated_answer"] = None
    line["question"]["pre_generated_steps"] = [
        step for step in line["question"]["pre_generated_steps"] if "# Answer" not in step
    ]
    path = tmp_path / "phase2.jsonl"
    path.write_text(json.dumps(line) + "\n")

    call_command("import_prm800k", str(path), stdout=io.StringIO())
    out = tmp_path / "out.jsonl"
    call_command("export_prm800k", "--out", str(out), stdout=io.StringIO())

    assert Solution.objects.get().is_correct is None
    assert json.loads(out.read_text()) == line
