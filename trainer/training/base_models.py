"""Where a training run's backbone may come from: a checkpoint directory inside PRM_MODEL_DIR,
named by its path or by the name of its LocalModel record (`generators.local_models`).

A run's `base_model` is input from a researcher (the form, the API), and the GPU worker hands
it to transformers' `from_pretrained`, which takes a local path or a hub id. So it is checked
twice with the same rule. Where the run is requested (`check_base_model`, through
`TrainingParams.from_dict`, which the form and the API both use) the check is on the text
alone: the web host may not see the worker's disk, and an answer that depended on what exists
there would tell a caller which files exist. On the worker (`resolve_base_model`) the
directory is resolved, symbolic links included, and must still lie inside PRM_MODEL_DIR and
hold a `config.json`. The worker also runs with the hub offline (annotate/celery.py), so no
name can ever reach it.

A name (anything that is not an absolute path) must be a recorded checkpoint model: records
are database rows, not the worker's disk, so checking them tells a caller nothing about files.
Where the run is requested the name becomes its record's path (`check_base_model` returns
it), so the run's stored parameters say which directory it trained from, and the worker
resolves that path like any other.

The operator's own PRM_BASE_MODEL (the default backbone) is configuration, not input: it may
lie anywhere on the worker, but it too must be a local checkpoint directory.
"""

import os
from pathlib import Path

from django.conf import settings

from core.errors import Invalid
from generators.places import MAX_LENGTH, inside_model_dir, model_dir


class BaseModelRefused(Invalid):
    """A base_model that is not a checkpoint directory inside PRM_MODEL_DIR."""


def _root() -> Path:
    return model_dir()


def refusal() -> str:
    # One sentence for every refusal at request time: a hub id, a path outside, a path with
    # "..", a file that exists or not; nothing in it depends on the disk.
    return (
        "base_model must be the name of a recorded checkpoint model or the absolute path of "
        f"a checkpoint directory inside PRM_MODEL_DIR ({_root()}); hub ids and other places "
        "are not loaded."
    )


def _recorded_checkpoint(name: str):
    from generators.models import LocalModel

    model = LocalModel.objects.filter(name=name).first()
    if model is None:
        raise BaseModelRefused(refusal())
    if model.kind != LocalModel.Kind.CHECKPOINT:
        raise BaseModelRefused(
            f"The model {model.name} is a {model.get_kind_display()}, not a checkpoint "
            "directory: convert it first (`manage.py convert_gguf`)."
        )
    return model


def check_base_model(value: str) -> str:
    """The absolute path `value` names: `value` itself when it is a place inside
    PRM_MODEL_DIR (judged by its text alone), or the directory of the recorded checkpoint
    model named `value`; else refused."""
    if not os.path.isabs(value) and len(value) <= MAX_LENGTH and "\x00" not in value:
        model = _recorded_checkpoint(value)
        return check_path(os.path.normpath(os.path.abspath(_root() / model.path)))
    return check_path(value)


def check_path(value: str) -> str:
    """`value` if it names a place inside PRM_MODEL_DIR, by its text alone; else refused."""
    if not inside_model_dir(value):
        raise BaseModelRefused(refusal())
    return value


def resolve_base_model(value: str | None) -> str | None:
    """On the worker: the checkpoint directory to load, or None for the built-in tiny model.

    `value` is the run's base_model (checked again here, then resolved: a symbolic link out
    of PRM_MODEL_DIR is refused like any other place) or, when empty, PRM_BASE_MODEL.
    """
    if value:
        check_path(value)
        root = _root().resolve()
        path = Path(value).resolve()
        if not path.is_relative_to(root) or path == root:
            raise BaseModelRefused(refusal())
    elif settings.PRM_BASE_MODEL:
        path = Path(settings.PRM_BASE_MODEL).resolve()
    else:
        return None
    if not (path / "config.json").is_file():
        raise BaseModelRefused(
            f"No checkpoint at {value or settings.PRM_BASE_MODEL} on this worker: a base model "
            "is a directory with a config.json (a Hugging Face checkpoint saved locally)."
        )
    return str(path)
