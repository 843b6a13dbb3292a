"""Alternative completions (PRM800K phase 2): rated after a -1, exported, imported."""

import io
import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from labeling.models import Labeler, Problem, Solution, StepRating
from labeling.services.workbench import LabelingRefused, next_session, rate_step, submit_session

pytestmark = pytest.mark.django_db
FIXTURES = Path(__file__).parent / "fixtures"
STEPS = ["Two plus two.", "That is five.", "So the answer is five.", "# Answer\n\n5"]
ALTERNATIVES = {"1": ["That is four.", "That is $2^2 = 4$."]}


@pytest.fixture
def labeler(make_labeler) -> Labeler:
    return make_labeler("ann")


@pytest.fixture
def session(labeler):
    problem = Problem.objects.create(text="What is 2+2?", answer="4")
    Solution.objects.create(
        problem=problem, steps=STEPS, answer="5", is_correct=False, alternatives=ALTERNATIVES
    )
    return next_session(labeler=labeler).session


def rate(session, labeler, step, rating, completion=0, flagged=False):
    return rate_step(
        session_id=session.pk,
        labeler=labeler,
        step_index=step,
        rating=rating,
        completion_index=completion,
        flagged=flagged,
    )


def export() -> list[dict]:
    out = io.StringIO()
    call_command("export_prm800k", "--out", "-", stdout=out, stderr=io.StringIO())
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_alternatives_of_the_wrong_step_are_rated_in_order_before_found_error(session, labeler):
    rate(session, labeler, 0, 1)
    rate(session, labeler, 1, -1)
    with pytest.raises(LabelingRefused, match="alternatives"):
        submit_session(session_id=session.pk, labeler=labeler, finish_reason="found_error")
    with pytest.raises(LabelingRefused, match="not reached"):
        rate(session, labeler, 1, 1, completion=2)
    with pytest.raises(LabelingRefused, match="no alternative 3"):
        rate(session, labeler, 1, 1, completion=3)
    rate(session, labeler, 1, 1, completion=1, flagged=True)
    rate(session, labeler, 1, 1, completion=1, flagged=True)  # a retried POST
    rate(session, labeler, 1, -1, completion=2)
    submit_session(session_id=session.pk, labeler=labeler, finish_reason="found_error")

    (record,) = export()
    assert record["label"]["finish_reason"] == "found_error"
    wrong = record["label"]["steps"][1]
    assert wrong["chosen_completion"] is None
    assert wrong["completions"] == [
        {"text": "That is five.", "rating": -1, "flagged": False},
        {"text": "That is four.", "rating": 1, "flagged": True},
        {"text": "That is $2^2 = 4$.", "rating": -1, "flagged": False},
    ]
    assert len(record["label"]["steps"]) == 2
    assert record["label"]["steps"][0]["chosen_completion"] == 0


def test_alternatives_are_offered_only_after_a_minus_one_on_their_step(session, labeler):
    rate(session, labeler, 0, 1)
    rate(session, labeler, 1, 0)
    with pytest.raises(LabelingRefused, match="after a -1"):
        rate(session, labeler, 1, 1, completion=1)
    with pytest.raises(LabelingRefused, match="no alternative"):
        rate(session, labeler, 0, 1, completion=1)


def test_changing_the_minus_one_discards_alternative_ratings_and_reopens_steps(session, labeler):
    rate(session, labeler, 0, 1)
    rate(session, labeler, 1, -1)
    rate(session, labeler, 1, 1, completion=1)
    # Re-rating -1 as -1 (say, to mark it unsure) keeps the alternatives' ratings.
    rate(session, labeler, 1, -1, flagged=True)
    assert StepRating.objects.filter(completion_index=1).count() == 1

    rate(session, labeler, 1, 0)
    assert not StepRating.objects.filter(completion_index__gt=0).exists()
    rate(session, labeler, 2, 1)
    rate(session, labeler, 3, 1)
    submit_session(session_id=session.pk, labeler=labeler, finish_reason="solution")
    (record,) = export()
    assert [len(s["completions"]) for s in record["label"]["steps"]] == [1, 1, 1, 1]
    assert [s["chosen_completion"] for s in record["label"]["steps"]] == [0, 0, 0, 0]


def test_the_workbench_shows_alternatives_one_at_a_time_with_the_active_marker(
    client, session, labeler
):
    client.force_login(labeler.user)
    url = reverse("label-rate", args=[session.pk])
    client.post(url, {"step_index": 0, "rating": 1})
    page = client.post(url, {"step_index": 1, "rating": -1}).content.decode()
    assert "That is four." in page and "That is $2^2" not in page
    assert 'data-item="s1c1" data-completion="1" data-active' in page
    assert "Submit and next" not in page

    page = client.post(url, {"step_index": 1, "completion_index": 1, "rating": 0}).content.decode()
    assert 'data-item="s1c2" data-completion="2" data-active' in page
    response = client.post(url, {"step_index": 1, "completion_index": 2, "rating": 1})
    page = response.content.decode()
    assert "data-active" not in page and "Submit and next" in page
    assert 'value="found_error"' in page

    # An alternative that is not reached yet, or of another labeler's session, is refused.
    assert (
        client.post(url, {"step_index": 2, "completion_index": 1, "rating": 1}).status_code == 409
    )


# --- import -------------------------------------------------------------------------------------


def write_jsonl(path: Path, objects: list[dict]) -> Path:
    path.write_text("".join(json.dumps(o) + "\n" for o in objects))
    return path


@pytest.fixture
def problem():
    return Problem.objects.create(text="What is 2+2?", answer="4", unique_id="t/1")


def test_import_solutions_accepts_alternatives_by_step_index_or_aligned_list(tmp_path, problem):
    lines = [
        {"unique_id": "t/1", "steps": ["a", "b", "# Answer\n\n4"], "alternatives": {"1": ["B"]}},
        {"unique_id": "t/1", "steps": ["c", "# Answer\n\n4"], "alternatives": [["C1", "C2"], []]},
        {"unique_id": "t/1", "steps": ["d", "# Answer\n\n4"]},
    ]
    call_command(
        "import_solutions", str(write_jsonl(tmp_path / "s.jsonl", lines)), stdout=io.StringIO()
    )
    by_first = {s.steps[0]: s for s in Solution.objects.all()}
    assert by_first["a"].alternatives == {"1": ["B"]}
    assert by_first["c"].alternatives == {"0": ["C1", "C2"]}
    assert by_first["d"].alternatives == {}
    assert all("alternatives" not in s.meta for s in by_first.values())

    # Alternatives shipped later reach a solution that had none.
    later = [dict(lines[2], alternatives={"0": ["D"]})]
    out = io.StringIO()
    call_command("import_solutions", str(write_jsonl(tmp_path / "t.jsonl", later)), stdout=out)
    assert "1 updated" in out.getvalue()
    assert Solution.objects.get(pk=by_first["d"].pk).alternatives == {"0": ["D"]}


@pytest.mark.parametrize(
    "alternatives,message",
    [
        ({"2": ["x"]}, 'key "2" is not a step index (0 to 1)'),
        ({"first": ["x"]}, 'key "first" is not a step index'),
        ({"0": "x"}, "'alternatives[0]' must be a list of non-empty strings"),
        ({"0": ["x", 3]}, "'alternatives[0]' must be a list of non-empty strings"),
        ([["x"]], "one item per step (2), got 1"),
        ("x", "must be an object keyed by step index or a list"),
    ],
)
def test_import_solutions_rejects_bad_alternatives_with_file_and_line(
    tmp_path, problem, alternatives, message
):
    good = {"unique_id": "t/1", "steps": ["a", "# Answer\n\n4"]}
    bad = {"unique_id": "t/1", "steps": ["b", "# Answer\n\n4"], "alternatives": alternatives}
    path = write_jsonl(tmp_path / "s.jsonl", [good, bad])
    with pytest.raises(CommandError) as failure:
        call_command("import_solutions", str(path), stdout=io.StringIO())
    assert f"{path}:2: " in str(failure.value)
    assert message in str(failure.value)
    assert not Solution.objects.exists()


def test_import_prm800k_keeps_phase2_alternatives_on_the_solution_and_stays_lossless():
    path = FIXTURES / "prm800k_phase2.jsonl"
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    call_command("import_prm800k", str(path), stdout=io.StringIO())
    assert export() == lines

    for line in lines:
        solution = Solution.objects.get(
            problem__text=line["question"]["problem"],
            steps=line["question"]["pre_generated_steps"],
        )
        offered = {
            str(i): [c["text"] for c in step["completions"][1:]]
            for i, step in enumerate(line["label"]["steps"])
            if len(step["completions"]) > 1
        }
        assert solution.alternatives == offered
    assert Solution.objects.exclude(alternatives={}).count() == 2
