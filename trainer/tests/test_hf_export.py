"""A model version exported as a Hugging Face checkpoint: transformers alone, in a process that
imports nothing of stepwise, gets the step scores stepwise stored."""

import json
import subprocess
import sys
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from core import store
from labeling.models import Problem, Solution
from trainer.models import ModelVersion
from trainer.scoring.store import score_and_store
from trainer.training import checkpoints
from trainer.training.ml.prm import PRM, PRMSettings

pytestmark = pytest.mark.django_db

STEPS = [
    ["We add $2$ and $3$.", "So the answer is $5$.", "# Answer\n\n5"],
    ["Multiply both sides by $2$, so $x = 14$.", "# Answer\n\n14"],
    ["Subtract $7$.", "Divide by $3$.", "Check: $3 \\cdot 6 - 7 = 11$.", "# Answer\n\n6"],
]

# Only transformers and torch: what a best-of-N or RL caller outside stepwise runs.
OUTSIDE = """
import json, sys, torch
from transformers import AutoModelForTokenClassification, AutoTokenizer
path, problem, solutions = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
tok = AutoTokenizer.from_pretrained(path)
model = AutoModelForTokenClassification.from_pretrained(path).eval()
tag = tok.convert_tokens_to_ids(model.config.prm_step_tag)
out = []
for steps in solutions:
    ids = tok(problem + "\\n\\n", add_special_tokens=False).input_ids
    for step in steps:
        ids += tok(step, add_special_tokens=False).input_ids + [tag]
    with torch.no_grad():
        probs = model(torch.tensor([ids])).logits[0].softmax(-1)[torch.tensor(ids) == tag]
    ok = probs[:, model.config.label2id["+1"]]
    if model.config.prm_neutral_as_positive:
        ok = ok + probs[:, model.config.label2id["0"]]
    out.append(ok.tolist())
print(json.dumps({"class": type(model).__name__, "scores": out}))
"""


@pytest.fixture
def version(tmp_path) -> ModelVersion:
    corpus = [text for steps in STEPS for text in steps] * 5
    prm = PRM.build(base_model=None, corpus=corpus, settings=PRMSettings(aggregation="min"), seed=3)
    prm.save(tmp_path / "run-1")
    reference = checkpoints.publish(directory=tmp_path / "run-1", key="checkpoints/run-1")
    return ModelVersion.objects.create(name="v1", checkpoint=reference, metrics={"step_auroc": 0.8})


def elsewhere(settings, tmp_path, name: str) -> None:
    """This process as another host: its own cache and scratch, the trainer's files gone."""
    import shutil

    shutil.rmtree(tmp_path / "run-1", ignore_errors=True)
    settings.STORE_CACHE_DIR = tmp_path / f"{name}-cache"
    settings.STORE_SCRATCH_DIR = tmp_path / f"{name}-scratch"


@pytest.mark.slow  # trains a model: not in the fast lane
def test_transformers_alone_gives_the_step_scores_stepwise_stored(tmp_path, version, settings):
    elsewhere(settings, tmp_path, "web")  # the export runs where the checkpoint never was
    problem = Problem.objects.create(text="Solve it.", answer="5")
    solutions = [
        Solution.objects.create(problem=problem, steps=steps, answer=str(i), is_correct=i == 0)
        for i, steps in enumerate(STEPS)
    ]
    score_and_store(
        prm=PRM.load(checkpoints.local_dir(version), device="cpu"),
        solution_ids=[s.pk for s in solutions],
        model_version_id=version.pk,
    )
    out = tmp_path / "export"

    call_command("export_model_version", str(version.pk), "--out", str(out))

    result = subprocess.run(
        [sys.executable, "-c", OUTSIDE, str(out), "Solve it.", json.dumps(STEPS)],
        capture_output=True,
        text=True,
        check=True,
        env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"},
        cwd=tmp_path,  # not the repository: nothing of stepwise is importable
    )
    outside = json.loads(result.stdout)["scores"]
    for solution, scores in zip(solutions, outside, strict=True):
        solution.refresh_from_db()
        assert scores == pytest.approx(solution.prm_step_scores, abs=1e-5)
    card = (out / "README.md").read_text()
    assert "p(+1) + p(0)" in card and "min of its step scores" in card and "<step>" in card


def test_an_export_never_overwrites_and_names_a_missing_version(tmp_path, version):
    (tmp_path / "taken").mkdir()

    with pytest.raises(CommandError, match="already exists"):
        call_command("export_model_version", str(version.pk), "--out", str(tmp_path / "taken"))
    with pytest.raises(CommandError, match="no model version 999"):
        call_command("export_model_version", "999", "--out", str(tmp_path / "new"))
    assert not (tmp_path / "new").exists()


def test_a_published_export_is_fetched_whole_by_another_host(tmp_path, version, settings):
    elsewhere(settings, tmp_path, "web")
    out = StringIO()
    call_command(
        "export_model_version",
        str(version.pk),
        "--out",
        str(tmp_path / "hf"),
        "--publish",
        stdout=out,
    )
    reference = out.getvalue().rsplit("(", 1)[1].split(")")[0]
    assert reference.startswith(f"exports/model-version-{version.pk}-")
    elsewhere(settings, tmp_path, "serving")
    fetched = store.local_tree(reference)
    assert {p.name for p in fetched.iterdir()} == {p.name for p in (tmp_path / "hf").iterdir()}
    assert "config.json" in {p.name for p in fetched.iterdir()}


def test_an_export_of_a_version_whose_checkpoint_left_the_store_says_which(tmp_path, version):
    store.delete(version.checkpoint)
    with pytest.raises(CommandError, match=r"checkpoints/run-1 is not in the artifact store"):
        call_command("export_model_version", str(version.pk), "--out", str(tmp_path / "x"))
    assert not (tmp_path / "x").exists()
