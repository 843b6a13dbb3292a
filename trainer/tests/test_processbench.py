"""The ProcessBench evaluator on a hand-made file whose figures are worked out by hand."""

import io
import json

import pytest
from django.core.management import CommandError, call_command

from trainer.evaluation import figures, processbench
from trainer.models import ModelVersion
from trainer.training.ml.prm import PRM

ITEMS = [
    {"problem": "A", "steps": ["a1", "a2", "a3"], "label": 1},
    {"problem": "B", "steps": ["b1", "b2"], "label": 0},
    {"problem": "C", "steps": ["c1", "c2"], "label": -1},
    {"problem": "D", "steps": ["d1", "d2"], "label": -1},
]
SCORES = [[0.9, 0.2, 0.1], [0.6, 0.1], [0.8, 0.9], [0.4, 0.9]]


@pytest.fixture
def items(tmp_path):
    path = tmp_path / "pb.jsonl"
    path.write_text("".join(json.dumps(item) + "\n" for item in ITEMS))
    return processbench.read_items(path=path)


def test_accuracies_and_f1_as_worked_out_by_hand(items):
    # Threshold 0.5: predicted first errors A 1 (right), B 1 (wrong: it is 0), C -1 (right),
    # D 0 (wrong: no error) -> erroneous 1/2, correct 1/2, F1 = 2(.5)(.5)/(.5+.5) = 0.5.
    half = processbench.evaluate(items, SCORES, 0.5)
    assert (half.accuracy_erroneous, half.accuracy_correct, half.f1) == (0.5, 0.5, 0.5)
    # Threshold 0.7: A 1, B 0 (0.6 < 0.7), C -1, D 0 -> erroneous 2/2, correct 1/2,
    # F1 = 2(1)(.5)/1.5 = 2/3.
    high = processbench.evaluate(items, SCORES, 0.7)
    assert (high.accuracy_erroneous, high.accuracy_correct) == (1.0, 0.5)
    assert high.f1 == pytest.approx(2 / 3)
    # Threshold 0.1: nothing is below it -> no error found: erroneous 0/2, F1 0.
    assert processbench.evaluate(items, SCORES, 0.1).f1 == 0.0


def test_a_bad_line_names_file_and_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(ITEMS[0]) + "\n" + json.dumps({**ITEMS[1], "label": 2}) + "\n")

    with pytest.raises(processbench.ProcessBenchInvalid, match="bad.jsonl:2: label"):
        processbench.read_items(path=path)


@pytest.mark.django_db
def test_the_command_reports_one_f1_by_processbenchs_rule_and_the_sweep_only_as_a_diagnostic(
    tmp_path, items
):
    # Issue 46, item 4: one protocol for every F1 stepwise reports; the command used to quote a
    # threshold tuned on half the file beside the evaluation set's fixed 0.5.
    corpus = [step for item in ITEMS for step in item["steps"]] * 5
    PRM.build(base_model=None, corpus=corpus, seed=2).save(tmp_path / "run-1")
    ModelVersion.objects.create(name="v1", checkpoint=str(tmp_path / "run-1"), is_active=True)
    path = tmp_path / "pb.jsonl"
    out = io.StringIO()

    call_command("processbench", str(path), stdout=out)

    text = out.getvalue()
    assert "4 items" in text and f"Threshold {figures.THRESHOLD_RULE}:" in text
    assert text.count("First-error F1:") == 1 and "Sweep" not in text
    assert "chosen on" not in text and "development" not in text

    out = io.StringIO()
    call_command("processbench", str(path), "--sweep", "--threshold", "0.3", stdout=out)
    text = out.getvalue()
    assert "0.3, given with --threshold; not ProcessBench's rule" in text
    assert "none of them is a figure to report" in text
    assert text.count("\n") > len(processbench.GRID)
    with pytest.raises(CommandError, match="between 0 and 1"):
        call_command("processbench", str(path), "--threshold", "1")
    with pytest.raises(CommandError):
        call_command("processbench", str(path), "--dev-fraction", "0.5")


def test_the_evaluation_set_and_the_command_share_one_threshold_rule():
    from trainer.training import metrics

    assert figures.THRESHOLD == metrics.THRESHOLD == 0.5
