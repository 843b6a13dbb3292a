"""Local models cross hosts through the artifact store (issue 39): recording a model in one
host's PRM_MODEL_DIR publishes it, and a worker on another host, whose PRM_MODEL_DIR is empty,
loads it from its own cache (the local generator's `_checkpoint`, a training run's
`resolve_base_model`). A record made before the store is still read where its files lie.

A "host" here is a PRM_MODEL_DIR, a cache and a scratch directory of its own; the store is
shared. The checkpoints are fakes (a config.json beside a few small files): nothing is loaded.
"""

import json
from pathlib import Path

import pytest
from django.core.management import call_command

from core import store
from generators import local_models
from generators.base import GeneratorUnavailable
from generators.local import _checkpoint
from generators.local_models import (
    LocalModelExists,
    LocalModelMissing,
    LocalModelRefused,
    model_files,
)
from generators.models import LocalModel
from trainer.training.base_models import check_base_model, resolve_base_model
from trainer.training.params import TrainingParams

pytestmark = pytest.mark.django_db


@pytest.fixture
def host(settings, tmp_path):
    """Makes `name` the host these settings describe; its (empty at first) PRM_MODEL_DIR."""
    settings.STORE_URL = str(tmp_path / "store")
    settings.PRM_BASE_MODEL = ""

    def become(name: str) -> Path:
        models = tmp_path / name / "models"
        models.mkdir(parents=True, exist_ok=True)
        settings.PRM_MODEL_DIR = models
        settings.STORE_CACHE_DIR = tmp_path / name / "cache"
        settings.STORE_SCRATCH_DIR = tmp_path / name / "scratch"
        return models

    return become


def fake_checkpoint(directory: Path) -> Path:
    (directory / "tokenizer").mkdir(parents=True)
    (directory / "config.json").write_text(json.dumps({"architectures": ["TinyForCausalLM"]}))
    (directory / "model.bin").write_bytes(bytes(range(256)) * 4)
    (directory / "tokenizer" / "vocab.txt").write_text("a\nb\n")
    return directory


def files_of(directory: Path) -> dict[str, bytes]:
    return {
        p.relative_to(directory).as_posix(): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def manifests(store_dir: Path) -> list[Path]:
    return sorted(store_dir.rglob(f"*{store.MANIFEST_SUFFIX}"))


def test_a_checkpoint_recorded_on_one_host_is_loaded_on_another(host, settings, tmp_path):
    models = host("scanner")
    expected = files_of(fake_checkpoint(models / "tiny"))

    result = local_models.register_models()

    [model] = result.added
    assert (model.name, model.path, model.kind) == ("tiny", "tiny", LocalModel.Kind.CHECKPOINT)
    assert model.architecture == "TinyForCausalLM"
    assert store.is_reference(model.artifact)
    assert store.describe(model.artifact).startswith(f"{local_models.STORE_PREFIX}/")
    assert len(manifests(tmp_path / "store")) == 1
    # Named by the path it was found at, it is stored as its name: what any host resolves.
    assert check_base_model(str(models / "tiny")) == "tiny"
    assert check_base_model("tiny") == "tiny"
    assert TrainingParams.requested({"base_model": str(models / "tiny")}).base_model == "tiny"

    worker_models = host("worker")
    assert list(worker_models.iterdir()) == []

    loaded = _checkpoint("tiny")
    assert loaded.is_relative_to(tmp_path / "worker" / "cache")
    assert files_of(loaded) == expected
    assert resolve_base_model("tiny") == str(loaded)
    # The operator's default backbone may be a recorded model's name too, or a local path.
    settings.PRM_BASE_MODEL = "tiny"
    assert resolve_base_model(None) == str(loaded)
    settings.PRM_BASE_MODEL = str(fake_checkpoint(tmp_path / "elsewhere" / "own"))
    assert resolve_base_model(None) == str((tmp_path / "elsewhere" / "own").resolve())
    assert not any(worker_models.iterdir()), "nothing is written into the worker's model dir"

    # A run stored before names were what runs store holds the path the model was found at:
    # on a worker whose PRM_MODEL_DIR is the same setting but lacks the files, that is the
    # record's, so its files come from the store.
    models.rename(tmp_path / "scanner" / "moved")
    settings.PRM_MODEL_DIR = models
    assert resolve_base_model(str(models / "tiny")) == str(loaded)


def test_a_gguf_file_is_published_as_one_file(host, tmp_path):
    import gguf
    import numpy as np

    models = host("scanner")
    (models / "gguf").mkdir()
    writer = gguf.GGUFWriter(str(models / "gguf" / "tiny.gguf"), "llama")
    writer.add_tensor("token_embd.weight", np.zeros((4, 8), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()

    [model] = local_models.register_models().added
    assert (model.kind, model.path, model.parameter_count) == ("gguf", "gguf/tiny.gguf", 32)

    host("worker")
    file = model_files(model)
    assert file.is_file() and file.name == "tiny.gguf"
    assert file.read_bytes() == (models / "gguf" / "tiny.gguf").read_bytes()


def test_a_record_whose_store_object_is_gone_says_so_naming_the_key(host, tmp_path):
    models = host("scanner")
    fake_checkpoint(models / "tiny")
    [model] = local_models.register_models().added
    key = store.describe(model.artifact)
    store.delete(model.artifact)

    host("worker")
    with pytest.raises(GeneratorUnavailable) as generator_refused:
        _checkpoint("tiny")
    with pytest.raises(LocalModelMissing) as backbone_refused:
        resolve_base_model("tiny")
    for refused in (generator_refused, backbone_refused):
        message = str(refused.value)
        assert key in message and "tiny" in message
        assert "register_models" in message

    # Run where the files are, a scan publishes them again, and the worker loads them.
    host("scanner")
    again = local_models.register_models()
    assert again.added == [] and [m.pk for m in again.published] == [model.pk]
    model.refresh_from_db()
    assert store.describe(model.artifact) != key
    host("worker")
    assert (_checkpoint("tiny") / "config.json").is_file()


def test_a_record_made_before_the_store_resolves_where_its_files_are(host, tmp_path):
    models = host("scanner")
    fake_checkpoint(models / "old")
    LocalModel.objects.create(name="old", kind=LocalModel.Kind.CHECKPOINT, path="old")

    assert _checkpoint("old") == (models / "old").resolve()
    assert resolve_base_model("old") == str((models / "old").resolve())

    # On a host without the files: what to run, and where.
    host("worker")
    with pytest.raises(GeneratorUnavailable, match="register_models") as refused:
        _checkpoint("old")
    assert "before the artifact store" in str(refused.value)
    with pytest.raises(LocalModelMissing, match="register_models"):
        resolve_base_model("old")

    # The command, run on the host that has them, publishes them; then every host loads them.
    host("scanner")
    call_command("register_models")
    model = LocalModel.objects.get(name="old")
    assert store.is_reference(model.artifact)
    host("worker")
    assert files_of(_checkpoint("old")) == files_of(models / "old")


def test_links_inside_a_checkpoint_are_followed_only_inside_the_model_dir(host, tmp_path):
    models = host("scanner")
    fake_checkpoint(models / "shared")
    checkpoint = models / "linked"
    checkpoint.mkdir()
    (checkpoint / "config.json").write_text("{}")
    (checkpoint / "model.bin").symlink_to(models / "shared" / "model.bin")
    (checkpoint / "tokenizer").symlink_to(models / "shared" / "tokenizer")
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "key.txt").write_text("secret")
    fake_checkpoint(models / "leaky")
    (models / "leaky" / "key.txt").symlink_to(tmp_path / "secret" / "key.txt")

    result = local_models.register_models()

    assert sorted(m.name for m in result.added) == ["linked", "shared"]
    [reason] = result.refused
    assert "leaky/key.txt" in reason and "outside PRM_MODEL_DIR" in reason
    assert not LocalModel.objects.filter(path="leaky").exists()
    assert len(manifests(tmp_path / "store")) == 2
    host("worker")
    published = files_of(_checkpoint("linked"))
    assert published == {
        "config.json": b"{}",
        "model.bin": (models / "shared" / "model.bin").read_bytes(),
        "tokenizer/vocab.txt": b"a\nb\n",
    }


def test_a_record_that_cannot_be_written_leaves_nothing_in_the_store(host, tmp_path):
    models = host("scanner")
    fake_checkpoint(models / "one")
    fake_checkpoint(models / "two")
    local_models.register_model(path=models / "one", kind=LocalModel.Kind.CHECKPOINT)

    with pytest.raises(LocalModelExists, match="already named one"):
        local_models.register_model(
            path=models / "two", kind=LocalModel.Kind.CHECKPOINT, name="one"
        )

    assert list(LocalModel.objects.values_list("name", flat=True)) == ["one"]
    assert len(manifests(tmp_path / "store")) == 1
    # Outside the model directory: refused before anything is published.
    fake_checkpoint(tmp_path / "outside")
    with pytest.raises(LocalModelRefused):
        local_models.register_model(path=tmp_path / "outside", kind=LocalModel.Kind.CHECKPOINT)
    assert len(manifests(tmp_path / "store")) == 1
