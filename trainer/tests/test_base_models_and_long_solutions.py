"""Input a researcher's API or a pool can carry that must not break training or scoring: a
base_model outside PRM_MODEL_DIR or on the hub, and solutions longer than the model's context."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from generators.models import LocalModel
from labeling.models import Problem, Solution
from trainer.forms import TrainingRunForm, base_model_refused
from trainer.models import ModelVersion, TrainingRun
from trainer.scoring.store import score_and_store
from trainer.training.base_models import BaseModelRefused, refusal, resolve_base_model
from trainer.training.ml.prm import PRM

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def model_dir(settings, tmp_path) -> Path:
    settings.PRM_MODEL_DIR = tmp_path / "models"
    settings.PRM_MODEL_DIR.mkdir()
    return settings.PRM_MODEL_DIR


def hostile_names(model_dir: Path) -> list[str]:
    (model_dir.parent / "secret").mkdir()
    (model_dir.parent / "secret" / "config.json").write_text("{}")
    return [
        "/etc/passwd",  # exists
        "/etc/no-such-file",  # does not
        "gpt2",  # a hub id
        "Qwen/Qwen2.5-Math-1.5B",
        "../secret",
        f"{model_dir}/../secret",  # exists, with a config.json
        str(model_dir),
        f"{model_dir}//x",
    ]


@pytest.mark.django_db
def test_the_api_and_the_form_refuse_a_base_model_outside_the_model_dir_alike(
    client, researcher, model_dir
):
    for name in hostile_names(model_dir):
        response = client.post(
            "/api/training-runs/",
            {"params": {"base_model": name}},
            content_type="application/json",
        )
        assert response.status_code == 400, name
        # One sentence whatever the disk holds: the answer tells nothing about files.
        assert response.json() == {"detail": refusal()}, name
        form = TrainingRunForm(data={"base_model": name})
        assert not form.is_valid()
        # The form says the same without the server's path (issue 43).
        assert form.errors["base_model"] == [base_model_refused(recorded=[])], name
    assert not TrainingRun.objects.exists()


@pytest.mark.django_db
def test_a_base_model_inside_the_model_dir_is_accepted(client, researcher, model_dir):
    # A place no record names stays a path, looked for on the worker's own disk.
    form = TrainingRunForm(data={"base_model": str(model_dir / "qwen")})
    assert form.is_valid(), form.errors
    assert form.training_params.base_model == str(model_dir / "qwen")
    # Where a recorded checkpoint was found, by path or by name: stored as the record's name,
    # which any worker resolves (from the artifact store), whatever its own disk holds.
    LocalModel.objects.create(name="qwen-math", kind=LocalModel.Kind.CHECKPOINT, path="qwen")
    for value in (str(model_dir / "qwen"), f"{model_dir}/qwen/", "qwen-math"):
        form = TrainingRunForm(data={"base_model": value})
        assert form.is_valid(), form.errors
        assert form.training_params.base_model == "qwen-math", value
    LocalModel.objects.create(name="q.gguf", kind=LocalModel.Kind.GGUF, path="q.gguf")
    for value in (str(model_dir / "q.gguf"), "q.gguf"):
        form = TrainingRunForm(data={"base_model": value})
        assert not form.is_valid()
        assert "convert_gguf" in form.errors["base_model"][0], value


@pytest.mark.django_db
def test_the_worker_refuses_a_link_out_of_the_model_dir_and_a_directory_without_config(
    model_dir,
):
    (model_dir.parent / "secret").mkdir()
    (model_dir.parent / "secret" / "config.json").write_text("{}")
    (model_dir / "link").symlink_to(model_dir.parent / "secret")
    (model_dir / "empty").mkdir()
    (model_dir / "good").mkdir()
    (model_dir / "good" / "config.json").write_text("{}")

    with pytest.raises(BaseModelRefused, match="inside PRM_MODEL_DIR"):
        resolve_base_model(str(model_dir / "link"))
    with pytest.raises(BaseModelRefused, match="config.json"):
        resolve_base_model(str(model_dir / "empty"))
    with pytest.raises(BaseModelRefused, match="inside PRM_MODEL_DIR"):
        resolve_base_model("gpt2")
    assert resolve_base_model(str(model_dir / "good")) == str((model_dir / "good").resolve())
    assert resolve_base_model(None) is None


def test_every_django_process_has_the_hub_offline_before_transformers_loads():
    script = (
        "import annotate, huggingface_hub.constants as c, transformers.utils.hub as t;"
        "print(c.HF_HUB_OFFLINE, t.is_offline_mode())"
    )
    env = {k: v for k, v in os.environ.items() if not k.endswith("_OFFLINE")}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True", "True"]


# --- solutions longer than the model's context ---------------------------------------------


@pytest.fixture(scope="module")
def prm() -> PRM:
    # The tiny built-in model of the trainer's tests: a 2,048-token context.
    corpus = ["We add $2$ and $3$.", "So the answer is $5$.", "Multiply by $2$."] * 20
    return PRM.build(base_model=None, corpus=corpus, seed=1)


@pytest.mark.django_db
def test_a_solution_longer_than_the_context_is_scored_truncated_and_flagged(prm, make_solution):
    problem = Problem.objects.create(text="Solve it.", answer="5")
    short = make_solution(problem, 0)
    many_steps = make_solution(problem, 1, steps=[f"Step {i}: add $2$." for i in range(3000)])
    # Just over the 2,048 tokens in a few steps: cut, every step kept.
    long_text = make_solution(problem, 2, steps=["We add $2$ and $3$. " * 300, "So it is $5$."])
    after = make_solution(problem, 3)
    version = ModelVersion.objects.create(name="v", checkpoint="/v")

    written = score_and_store(
        prm=prm,
        solution_ids=[s.pk for s in (short, many_steps, long_text, after)],
        model_version_id=version.pk,
        chunk_size=10,
    )

    assert written == 4
    for solution in Solution.objects.all():
        assert solution.prm_model_version_id == version.pk
        assert solution.prm_score is not None and 0 <= solution.prm_score <= 1
    short.refresh_from_db(), after.refresh_from_db()
    assert "prm_truncated" not in short.meta and len(short.prm_step_scores) == 4
    many_steps.refresh_from_db()
    flag = many_steps.meta["prm_truncated"]
    assert flag["model_version"] == version.pk and flag["steps"] == 3000
    assert 100 < flag["steps_scored"] == len(many_steps.prm_step_scores) < 3000
    long_text.refresh_from_db()
    assert long_text.meta["prm_truncated"]["steps_scored"] == 2
    assert len(long_text.prm_step_scores) == 2


@pytest.mark.django_db
def test_a_solution_the_model_cannot_score_fails_alone(prm, make_solution, monkeypatch):
    problem = Problem.objects.create(text="Solve it.", answer="5")
    good = [make_solution(problem, i) for i in range(3)]
    bad = make_solution(problem, 9, steps=["Poison step."])
    real = prm.score_solutions

    def score_solutions_but_poison(*, problems, steps, **kwargs):
        if ["Poison step."] in steps:
            raise RuntimeError("cannot score this one")
        return real(problems=problems, steps=steps, **kwargs)

    monkeypatch.setattr(prm, "score_solutions", score_solutions_but_poison)
    version = ModelVersion.objects.create(name="v", checkpoint="/v")

    score_and_store(prm=prm, solution_ids=[s.pk for s in [*good, bad]], model_version_id=version.pk)

    for solution in good:
        solution.refresh_from_db()
        assert solution.prm_score is not None and "prm_failed" not in solution.meta
    bad.refresh_from_db()
    assert bad.prm_score is None and bad.prm_model_version_id == version.pk
    assert "cannot score this one" in bad.meta["prm_failed"]["error"]


@pytest.mark.django_db
def test_a_rescoring_clears_an_earlier_flag(prm, make_solution):
    problem = Problem.objects.create(text="Solve it.", answer="5")
    solution = make_solution(problem, 0, meta={"prm_truncated": {"steps": 9}, "kind": "kept"})

    score_and_store(prm=prm, solution_ids=[solution.pk], model_version_id=None)

    solution.refresh_from_db()
    assert solution.meta == {"kind": "kept"}
