"""Where a training run's backbone may come from: a recorded checkpoint model
(`generators.local_models`), named by its name or by the absolute path inside PRM_MODEL_DIR
it was found at, or a checkpoint directory inside PRM_MODEL_DIR on the worker.

A run's `base_model` is input from a researcher (the form, the API), and the GPU worker hands
what it resolves to to transformers' `from_pretrained`, which takes a local path or a hub id.
So it is checked twice with the same rule. Where the run is requested (`check_base_model`,
through `TrainingParams.requested`, which the form, the API and the command use) the check is
on the text and the records alone: the web host may not see the worker's disk, and an answer
that depended on what exists there would tell a caller which files exist. On the worker
(`resolve_base_model`) the value becomes a directory on that host, which must hold a
`config.json`. The worker also runs with the hub offline (annotate/celery.py), so no name can
ever reach it.

A name (anything that is not an absolute path) must be a recorded checkpoint model: records
are database rows, not the worker's disk, so checking them tells a caller nothing about files.
An absolute path inside PRM_MODEL_DIR that is where a recorded checkpoint was found becomes
that record's name too. So what a run stores is what any host can resolve: the name, which the
worker turns into the model's files from the artifact store (`model_files`, through its own
cache), wherever the model was recorded. A record made before the store is read from
PRM_MODEL_DIR on the worker. A path that names no record stays a path, resolved on the
worker's own disk (symbolic links included, still inside PRM_MODEL_DIR).

The operator's own PRM_BASE_MODEL (the default backbone) is configuration, not input: a
recorded model's name, or a local checkpoint directory that may lie anywhere on the worker.
"""

import os
from pathlib import Path

from django.conf import settings

from core.errors import Invalid
from generators.places import MAX_LENGTH, inside_model_dir, model_dir


class BaseModelRefused(Invalid):
    """A base_model that is not a recorded checkpoint model nor a checkpoint directory inside
    PRM_MODEL_DIR."""


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


def _is_name(value: str) -> bool:
    return not os.path.isabs(value) and len(value) <= MAX_LENGTH and "\x00" not in value


def _checkpoint_only(model):
    from generators.models import LocalModel

    if model.kind != LocalModel.Kind.CHECKPOINT:
        raise BaseModelRefused(
            f"The model {model.name} is a {model.get_kind_display()}, not a checkpoint "
            "directory: convert it first (`manage.py convert_gguf`)."
        )
    return model


def _recorded_checkpoint(name: str):
    from generators.models import LocalModel

    model = LocalModel.objects.filter(name=name).first()
    if model is None:
        raise BaseModelRefused(refusal())
    return _checkpoint_only(model)


def _recorded_at(path: str):
    """The record of the model found at `path` (a place inside PRM_MODEL_DIR), or None."""
    from generators.models import LocalModel

    root = os.path.normpath(os.path.abspath(_root()))
    relative = Path(os.path.relpath(path, root)).as_posix()
    model = LocalModel.objects.filter(path=relative).first()
    return _checkpoint_only(model) if model is not None else None


def check_base_model(value: str) -> str:
    """What the run stores for `value`: the name of the recorded checkpoint model it names
    (by name, or by the path inside PRM_MODEL_DIR it was found at), or else `value` itself
    when it is a place inside PRM_MODEL_DIR (judged by its text alone); else refused."""
    if _is_name(value):
        return _recorded_checkpoint(value).name
    model = _recorded_at(check_path(value))
    return model.name if model is not None else value


def check_path(value: str) -> str:
    """`value` if it names a place inside PRM_MODEL_DIR, by its text alone; else refused."""
    if not inside_model_dir(value):
        raise BaseModelRefused(refusal())
    return value


def _model_directory(model) -> Path:
    from generators.local_models import LocalModelRefused, model_files

    try:
        return model_files(model)
    except LocalModelRefused as exc:
        raise BaseModelRefused(str(exc)) from None


def resolve_base_model(value: str | None) -> str | None:
    """On the worker: the checkpoint directory to load, or None for the built-in tiny model.

    `value` is the run's base_model, checked again here: a recorded model's name becomes its
    files on this host (from the artifact store; `LocalModelMissing` or the store's own error,
    naming the key, when they cannot be had), a path becomes that of its record when it names
    one (a run stored before names became what runs store), else the directory on this disk (a
    symbolic link out of PRM_MODEL_DIR is refused like any other place). When empty, the
    operator's PRM_BASE_MODEL: a recorded model's name, or a directory anywhere on the worker.
    """
    configured = settings.PRM_BASE_MODEL
    if value and _is_name(value):
        path = _model_directory(_recorded_checkpoint(value))
    elif value:
        model = _recorded_at(check_path(value))
        if model is not None:
            path = _model_directory(model)
        else:
            root = _root().resolve()
            path = Path(value).resolve()
            if not path.is_relative_to(root) or path == root:
                raise BaseModelRefused(refusal())
    elif configured:
        model = None
        if _is_name(str(configured)):
            from generators.models import LocalModel

            model = LocalModel.objects.filter(name=str(configured)).first()
        if model is not None:
            path = _model_directory(_checkpoint_only(model))
        else:
            path = Path(configured).resolve()
    else:
        return None
    if not (path / "config.json").is_file():
        raise BaseModelRefused(
            f"No checkpoint at {value or configured} on this worker: a base model "
            "is a directory with a config.json (a Hugging Face checkpoint saved locally)."
        )
    return str(path)
