"""Labels exported as TRL / Hugging Face stepwise supervision, read back by datasets when it is
installed and by a plain JSON Lines reader otherwise."""

import json

import pytest
from django.core.management import call_command

from labeling.models import Problem, Solution
from trainer.tests.test_inspection import rate
from trainer.tests.test_rollout_agreement import rollout_run, store

pytestmark = pytest.mark.django_db


@pytest.fixture
def labeled():
    """One wrong solution rated [+1, 0, -1] by a labeler and rolled out (3/4, 0/4, 0/4, 0/1);
    one right solution rated [+1, +1, +1] and not rolled out."""
    problem = Problem.objects.create(text="What is $1 + 1$?", answer="2", unique_id="t/one.json")
    wrong = Solution.objects.create(
        problem=problem,
        steps=["We add.", "One and one make three.", "So it is $3$.", "# Answer\n\n3"],
        answer="3",
        is_correct=False,
    )
    rate(wrong, "ann", [1, 0, -1])
    store(rollout_run(), wrong, [(3, 4), (0, 4), (0, 4), (0, 1)])
    other = Problem.objects.create(text="What is $2 + 2$?", answer="4", unique_id="t/two.json")
    right = Solution.objects.create(
        problem=other,
        steps=["Two and two.", "Make four.", "# Answer\n\n4"],
        answer="4",
        is_correct=True,
    )
    rate(right, "ann", [1, 1, 1])
    return wrong, right


def read_back(path):
    """As an outside trainer reads it: datasets when installed, else line by line."""
    try:
        import datasets
    except ImportError:
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return list(datasets.load_dataset("json", data_files=str(path), split="train"))


def export(tmp_path, *args):
    out = tmp_path / "stepwise.jsonl"
    call_command("export_stepwise", "--out", str(out), *args)
    return read_back(out)


def test_human_labels_are_prompt_completions_and_a_bool_per_step(tmp_path, labeled):
    rows = export(tmp_path)

    assert rows == [
        {
            "prompt": "What is $1 + 1$?",
            "completions": ["We add.", "One and one make three.", "So it is $3$."],
            "labels": [True, True, False],  # 0 is good by default: neutral as positive
        },
        {
            "prompt": "What is $2 + 2$?",
            "completions": ["Two and two.", "Make four.", "# Answer\n\n4"],
            "labels": [True, True, True],
        },
    ]


def test_a_neutral_step_can_count_as_bad(tmp_path, labeled):
    rows = export(tmp_path, "--neutral-as-negative")

    assert rows[0]["labels"] == [True, False, False]


def test_rollout_labels_export_hard_or_as_shares(tmp_path, labeled):
    hard = export(tmp_path, "--label-source", "rollout")
    soft = export(tmp_path, "--label-source", "both", "--rollout-estimate", "soft")

    # Hard: good while some rollout reached the answer, cut after the first bad step.
    assert hard == [
        {
            "prompt": "What is $1 + 1$?",
            "completions": ["We add.", "One and one make three."],
            "labels": [True, False],
        }
    ]
    # Soft with both sources: one type per column, human labels as 1.0 / 0.0.
    assert [row["labels"] for row in soft] == [[1.0, 1.0, 0.0], [1.0, 1.0, 1.0], [0.75, 0, 0, 0]]
    assert all(isinstance(x, float) for row in soft for x in row["labels"])
