"""Parameters defined once per operation (training, selection, sampling): the form, the API and
the command line are derived from one dataclass each, and refuse a bad value in its words."""

from dataclasses import fields
from unittest import mock

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from rest_framework.test import APIClient

from core.params import option
from generators import PROPOSAL_MAX_TOKENS, PROPOSAL_SETTINGS, SamplingSettings
from labeling.forms import LiveGenerationForm
from labeling.models import Generation, Problem, Solution
from trainer.forms import GenerationForm
from trainer.management.commands.sample import Command as SampleCommand
from trainer.management.commands.select_generation import Command as SelectCommand
from trainer.management.commands.train_prm import Command as TrainCommand
from trainer.models import ModelVersion, TrainingRun
from trainer.sampling.forms import SamplingRunForm
from trainer.selection.services import SelectionParams
from trainer.serializers import GenerationRequestSerializer
from trainer.training import base_models
from trainer.training.params import TrainingParams

pytestmark = pytest.mark.django_db


def help_of(command, name: str) -> str:
    return command().create_parser("manage.py", name).format_help()


@pytest.fixture(autouse=True)
def model_dir(settings, tmp_path):
    settings.PRM_MODEL_DIR = tmp_path / "models"
    settings.PRM_BASE_MODEL = ""
    return settings.PRM_MODEL_DIR


# --- training ---------------------------------------------------------------------------------


def test_train_prm_takes_every_training_parameter():
    shown = help_of(TrainCommand, "train_prm")
    missing = [f.name for f in fields(TrainingParams) if option(f.name) not in shown]
    assert missing == []


def test_a_parameter_once_missing_from_the_command_line_reaches_the_run():
    # No labels: the run is recorded with its parameters, then fails for want of data.
    with pytest.raises(CommandError, match="No labeled examples"):
        call_command(
            "train_prm",
            *("--schedule", "linear", "--grad-accum", "2", "--warmup-ratio", "0.2"),
            *("--max-grad-norm", "0.5", "--aggregation", "min", "--no-neutral-as-positive"),
            *("--gradient-checkpointing", "--warm-start", "--distributed", "fsdp"),
            # The spellings from before the options were derived still work.
            *("--no-quality-control", "--screening"),
        )
    params = TrainingRun.objects.get().params
    assert params["schedule"] == "linear" and params["grad_accum"] == 2
    assert params["warmup_ratio"] == 0.2 and params["max_grad_norm"] == 0.5
    assert params["aggregation"] == "min" and params["neutral_as_positive"] is False
    assert params["gradient_checkpointing"] is True and params["warm_start"] is True
    assert params["distributed"] == "fsdp"
    assert params["include_quality_control"] is False and params["include_screening"] is True


def test_base_model_is_checked_once_where_a_form_requests_the_run(client, researcher, model_dir):
    with mock.patch.object(base_models, "check_path", wraps=base_models.check_path) as checked:
        response = client.post(
            reverse("training-run-list"), {"epochs": "1", "base_model": str(model_dir / "ckpt")}
        )
    assert response.status_code == 302
    assert checked.call_count == 1


def test_base_model_is_checked_once_on_the_edge_and_once_on_the_worker(model_dir):
    with (
        mock.patch.object(base_models, "check_path", wraps=base_models.check_path) as checked,
        pytest.raises(CommandError, match="No checkpoint at"),
    ):
        call_command("train_prm", "--base-model", str(model_dir / "ckpt"))
    assert checked.call_count == 2  # the command's request, then the worker's disk


def test_an_empty_generation_range_is_refused_in_one_sentence_everywhere(client, researcher):
    sentence = "generation_min is above generation_max."
    page = client.post(reverse("training-run-list"), {"generation_min": "3", "generation_max": "1"})
    assert page.status_code == 400 and sentence in page.content.decode()
    api = client.post(
        "/api/training-runs/",
        {"params": {"generation_min": 3, "generation_max": 1}},
        content_type="application/json",
    )
    assert api.status_code == 400 and api.json()["detail"] == sentence
    with pytest.raises(CommandError) as refused:
        call_command("train_prm", "--generation-min", "3", "--generation-max", "1")
    assert str(refused.value) == sentence
    assert not TrainingRun.objects.exists()


# --- selection --------------------------------------------------------------------------------

GOOD_SELECTION = {
    "strategy": "uniform",
    "batch_size": 5,
    "per_problem_cap": 2,
    "wrong_share": 0.8,
    "quality_control_count": 1,
    "seed": 0,
}


def test_the_selection_form_api_and_command_take_the_same_parameters():
    every = [f.name for f in fields(SelectionParams)]
    assert list(GenerationForm().fields) == every
    assert list(GenerationRequestSerializer().fields) == every
    shown = help_of(SelectCommand, "select_generation")
    assert [name for name in every if option(name) not in shown] == []


@pytest.mark.parametrize(
    "bad,field,sentence",
    [
        ({"wrong_share": 1.5}, "wrong_share", "wrong_share must be between 0 and 1."),
        ({"per_problem_cap": 0}, "per_problem_cap", "per_problem_cap must be at least 1."),
        (
            {"strategy": "best"},
            "strategy",
            "strategy must be one of convincing_wrong_answer, uniform, uncertainty, disagreement, "
            "ensemble_uncertainty.",
        ),
        (
            {"batch_size": 0, "quality_control_count": 0},
            None,
            "batch_size and quality_control_count are both 0: nothing to select.",
        ),
    ],
)
def test_the_selection_form_api_and_command_refuse_a_bad_value_in_the_same_words(
    bad, field, sentence
):
    form = GenerationForm(data={**GOOD_SELECTION, **bad})
    assert not form.is_valid()
    assert form.errors[field or "__all__"] == [sentence]

    body = GenerationRequestSerializer(data=bad)
    assert not body.is_valid()
    assert body.errors[field or "non_field_errors"] == [sentence]

    options = [part for name, value in bad.items() for part in (option(name), str(value))]
    with pytest.raises(CommandError) as refused:
        call_command("select_generation", *options)
    assert str(refused.value) == sentence


def test_select_generation_publishes_the_next_generation_in_the_foreground(settings):
    settings.SELECTION_QUALITY_CONTROL_COUNT = 0
    version = ModelVersion.objects.create(name="v1", checkpoint="/nowhere", is_active=True)
    for p in range(3):
        problem = Problem.objects.create(text=f"Problem {p}?", answer="7")
        for i in range(2):
            Solution.objects.create(
                problem=problem,
                steps=[f"Step {p}{i}.", "So 8."],
                answer="8",
                is_correct=False,
                prm_score=0.5 + 0.1 * i,
                prm_step_scores=[0.9, 0.5],
                prm_model_version=version,
            )
    call_command("select_generation", "--batch-size", "3", "--per-problem-cap", "1", "--seed", "4")
    generation = Generation.objects.get()
    assert generation.model_version == version
    assert generation.params["batch_size"] == 3 and generation.params["seed"] == 4
    assert generation.params["strategy"] == settings.SELECTION_STRATEGY
    assert Solution.objects.filter(generation=generation).count() == 3


# --- sampling ---------------------------------------------------------------------------------


@pytest.fixture
def configured(settings):
    """A configured local generator; the forms' and the API's other fields valid."""
    settings.GENERATOR_MODEL, settings.GENERATOR_BASE_URL = "smol", ""
    settings.GENERATOR_ALLOWED_BASE_URLS = []
    return Problem.objects.create(text="What is 2 + 2?", answer="4")


def refusals(problem, researcher_client, sent: dict) -> list[str]:
    """What each door says to the same generator fields and sampling settings: the sampling
    run's form and API, the live-labeling form and API, and `manage.py sample`."""
    generator = {k: v for k, v in sent.items() if k in ("backend", "model", "base_url")}
    sampling = {k: v for k, v in sent.items() if k not in generator}
    said = []
    run_form = SamplingRunForm(
        data={"purpose": "solutions", "problem_ids": str(problem.pk), "limit": 5, "samples": 1}
        | SamplingSettings().to_dict()
        | sent
    )
    live_form = LiveGenerationForm(
        data={"problems": str(problem.pk), "proposals": 2} | PROPOSAL_SETTINGS.to_dict() | sent
    )
    for form in (run_form, live_form):
        assert not form.is_valid()
        said.append(" ".join(message for errors in form.errors.values() for message in errors))
    for url, body in (
        ("/api/sampling-runs/", {"problem_ids": [problem.pk], "samples": 1}),
        (reverse("api-live-generations"), {"problems": [problem.pk], "proposals": 2}),
    ):
        key = "sampling" if "sampling" in url else "settings"
        body = body | {"generator": generator, key: sampling}
        answer = researcher_client.post(url, body, format="json")
        assert answer.status_code == 400, answer.content
        said.append(answer.json()["detail"])
    options = [part for name, value in sent.items() for part in (option(name), str(value))]
    with pytest.raises(CommandError) as refused:
        call_command("sample", "--problems", str(problem.pk), "--samples", "1", *options)
    said.append(str(refused.value))
    return said


@pytest.fixture
def api(make_user) -> APIClient:
    client = APIClient()
    client.force_authenticate(make_user("res", "researcher"))
    return client


def test_a_bad_sampling_setting_is_refused_in_the_same_words_everywhere(configured, api):
    said = refusals(configured, api, {"temperature": 5})
    assert said == ["temperature must be between 0 and 2."] * 5


def test_one_rule_decides_when_the_configured_generator_is_used(configured, api):
    # Naming a server but not its model is not asking for the configured generator.
    said = refusals(configured, api, {"base_url": "http://gen.example.com/v1"})
    assert (
        said
        == ["Name the model too, or leave backend and base URL empty for the configured generator."]
        * 5
    )
    # Naming nothing is.
    form = SamplingRunForm(
        data={"purpose": "solutions", "problem_ids": str(configured.pk), "limit": 5, "samples": 1}
        | SamplingSettings().to_dict()
    )
    assert form.is_valid(), form.errors
    assert form.generator.to_dict() == {"backend": "local", "model": "smol", "base_url": ""}


def test_each_sampling_form_starts_from_the_defaults_its_api_takes(configured, api, settings):
    settings.GENERATOR_BASE_URL = "http://gen:8000/v1"  # the operator's: no DNS lookup
    names = [f.name for f in fields(SamplingSettings)]
    run_form, live_form = SamplingRunForm(), LiveGenerationForm()
    run_initial = {n: run_form.fields[n].initial for n in names}
    live_initial = {n: live_form.fields[n].initial for n in names}

    with mock.patch("core.jobs.queue_task"):
        run = api.post(
            "/api/sampling-runs/",
            {"problem_ids": [configured.pk], "samples": 1},
            format="json",
        )
    assert run.status_code == 201, run.content
    assert run.json()["sampling"] == run_initial == SamplingSettings().to_dict()
    live = api.post(reverse("api-live-generations"), {"problems": [configured.pk], "proposals": 2})
    assert live.status_code == 201, live.content
    assert live.json()["live"]["sampling"] == live_initial == PROPOSAL_SETTINGS.to_dict()
    # Live labeling's one override: a proposal is one step.
    assert SamplingSettings(max_tokens=PROPOSAL_MAX_TOKENS) == PROPOSAL_SETTINGS
    shown = help_of(SampleCommand, "sample")
    assert [name for name in names if option(name) not in shown] == []
