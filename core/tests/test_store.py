"""The artifact store (core/store.py): what one host publishes, another reads, verified.

"Another host" is this process with another STORE_CACHE_DIR and the source folder gone: only
the store's copy can answer. The directory store is tested everywhere; the S3 store against a
real S3-API server process (moto's, `s3_store` in conftest.py).
"""

import hashlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from core import store
from core.tests.store_faults import DIE_AFTER_TWO_UPLOADS

ROOT = Path(__file__).resolve().parents[2]

# Relative file names as a checkpoint or an upload has them: nested folders, dots, dashes.
_part = st.text(alphabet="abcxyz019._-", min_size=1, max_size=12).filter(
    lambda p: p not in {".", ".."}
)
trees = st.dictionaries(
    st.lists(_part, min_size=1, max_size=3).map("/".join),
    st.binary(max_size=3000),
    min_size=1,
    max_size=6,
).filter(
    # A name cannot be both a file and a folder of another file.
    lambda tree: not any(other.startswith(name + "/") for name in tree for other in tree)
)


def write_tree(root: Path, tree: dict[str, bytes]) -> Path:
    for name, data in tree.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return root


def read_tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def another_host(settings, tmp_path: Path, name: str) -> None:
    settings.STORE_CACHE_DIR = tmp_path / f"{name}-cache"
    settings.STORE_SCRATCH_DIR = tmp_path / f"{name}-scratch"


@hsettings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(tree=trees)
def test_any_tree_published_on_one_host_is_read_identically_on_another(tree, settings):
    with tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch)
        settings.STORE_URL = str(base / "store")
        another_host(settings, base, "trainer")
        source = write_tree(base / "checkpoint", tree)
        reference = store.publish_tree(source=source, key="checkpoints/run-1")
        assert store.is_reference(reference) and not reference.startswith("/")
        for path in source.rglob("*"):
            if path.is_file():
                path.write_bytes(b"changed on the trainer's disk afterwards")
        another_host(settings, base, "web")

        assert read_tree(store.local_tree(reference)) == tree
        # A second read is the cache's, with no request to the store.
        settings.STORE_URL = str(base / "no-store-here")
        assert read_tree(store.local_tree(reference)) == tree


def test_the_reference_names_the_content(tmp_path):
    a = write_tree(tmp_path / "a", {"w.bin": b"one"})
    b = write_tree(tmp_path / "b", {"w.bin": b"two"})
    ref_a = store.publish_tree(source=a, key="checkpoints/a")
    ref_b = store.publish_tree(source=b, key="checkpoints/b")
    assert ref_a.split("@")[1] != ref_b.split("@")[1]
    with pytest.raises(store.ArtifactExists, match="checkpoints/a is already in the artifact"):
        store.publish_tree(source=b, key="checkpoints/a")
    assert (store.local_tree(ref_a) / "w.bin").read_bytes() == b"one"


def test_a_single_file_round_trips(tmp_path, settings):
    upload = tmp_path / "labels.jsonl"
    upload.write_bytes(b'{"a": 1}\n' * 1000)
    reference = store.publish_file(source=upload, key=store.unique_key("uploads", upload.name))
    upload.unlink()
    another_host(settings, tmp_path, "worker")
    local = store.local_file(reference)
    assert local.name == "labels.jsonl" and local.read_bytes() == b'{"a": 1}\n' * 1000


def test_an_object_changed_in_the_store_is_refused_and_not_cached(
    tmp_path, settings, _artifact_store
):
    source = write_tree(tmp_path / "ckpt", {"model.safetensors": b"x" * 5000, "config.json": b"{}"})
    reference = store.publish_tree(source=source, key="checkpoints/run-3", seed_cache=False)
    # Not in place: the bytes are replaced by a new file, as another writer would do.
    target = _artifact_store / "checkpoints/run-3/model.safetensors"
    target.unlink()
    target.write_bytes(b"y" * 5000)

    with pytest.raises(store.ArtifactCorrupt, match=r"checkpoints/run-3/model.safetensors in the"):
        store.local_tree(reference)
    digest = reference.split("@")[1]
    assert not (Path(settings.STORE_CACHE_DIR) / digest).exists()
    assert [p.name for p in Path(settings.STORE_CACHE_DIR).iterdir()] == []


def test_a_changed_manifest_is_refused(tmp_path, _artifact_store):
    source = write_tree(tmp_path / "ckpt", {"config.json": b"{}"})
    reference = store.publish_tree(source=source, key="checkpoints/run-4", seed_cache=False)
    manifest = _artifact_store / "checkpoints/run-4.manifest.json"
    manifest.write_bytes(manifest.read_bytes().replace(b'"size":2', b'"size":3'))
    with pytest.raises(store.ArtifactCorrupt, match="its manifest changed"):
        store.local_tree(reference)


def test_a_missing_object_names_the_key_and_the_store(tmp_path, settings):
    source = write_tree(tmp_path / "ckpt", {"config.json": b"{}"})
    reference = store.publish_tree(source=source, key="checkpoints/run-5")
    store.delete(reference)
    with pytest.raises(store.ArtifactMissing) as refused:
        store.local_tree(reference)
    assert "checkpoints/run-5" in str(refused.value)
    assert str(settings.STORE_URL) in str(refused.value)
    assert not store.exists(reference)


def test_an_old_absolute_path_is_read_where_it_exists_and_explained_where_not(tmp_path):
    here = write_tree(tmp_path / "models" / "run-1", {"config.json": b"{}"})
    assert store.local_tree(str(here)) == here
    with pytest.raises(store.ArtifactMissing, match="publish_legacy_artifacts"):
        store.local_tree(str(tmp_path / "models" / "run-2"))


def test_keys_are_checked():
    for bad in ("/etc/passwd", "a/../b", "a//b", "", "a b", "ü", "x" * 1000):
        with pytest.raises(store.Invalid):
            store.check_key(bad)
    assert store.Ref.parse("checkpoints/run-1@" + "0" * 64) is not None
    assert store.Ref.parse("/var/models/run-1") is None
    assert store.Ref.parse("checkpoints/run-1@short") is None


def test_readers_racing_for_one_artifact_all_get_it_whole(tmp_path, settings):
    tree = {f"shard-{i}.bin": os.urandom(200_000) for i in range(5)}
    reference = store.publish_tree(
        source=write_tree(tmp_path / "ckpt", tree), key="checkpoints/run-6", seed_cache=False
    )
    results, errors = [], []

    def read():
        try:
            results.append(read_tree(store.local_tree(reference)))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=read) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and len(results) == 6 and all(r == tree for r in results)
    # One settled copy; no scratch folder of a loser left behind.
    assert [p.name for p in Path(settings.STORE_CACHE_DIR).iterdir()] == [reference.split("@")[1]]


def test_an_unreachable_s3_store_is_a_clear_error_within_seconds(settings, monkeypatch, tmp_path):
    pytest.importorskip("s3fs")
    with __import__("socket").socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed once the block ends: nothing listens there
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    settings.STORE_URL = "s3://nobody/stepwise"
    settings.STORE_S3_ENDPOINT_URL = f"http://127.0.0.1:{port}"
    settings.STORE_TIMEOUT_SECONDS = 1
    source = write_tree(tmp_path / "ckpt", {"config.json": b"{}"})
    started = time.monotonic()
    with pytest.raises(
        store.StoreUnavailable, match=r"s3://nobody/stepwise failed on checkpoints/x"
    ):
        store.publish_tree(source=source, key="checkpoints/x")
    with pytest.raises(store.StoreUnavailable):
        store.local_tree("checkpoints/x@" + "0" * 64)
    assert time.monotonic() - started < 60


# --- a real S3-API server ---------------------------------------------------------------------


def test_the_s3_store_round_trips_trees_deletes_and_refuses_tampering(s3_store, settings, tmp_path):
    import boto3

    tree = {"config.json": b"{}", "nested/model.safetensors": os.urandom(300_000), "empty": b""}
    reference = store.publish_tree(source=write_tree(tmp_path / "ckpt", tree), key="checkpoints/r1")
    another_host(settings, tmp_path, "gpu-b")
    assert read_tree(store.local_tree(reference)) == tree

    bucket, prefix = s3_store[len("s3://") :].split("/", 1)
    client = boto3.client("s3", endpoint_url=settings.STORE_S3_ENDPOINT_URL)
    keys = {o["Key"] for o in client.list_objects_v2(Bucket=bucket)["Contents"]}
    assert f"{prefix}/checkpoints/r1.manifest.json" in keys
    assert f"{prefix}/checkpoints/r1/nested/model.safetensors" in keys

    client.put_object(Bucket=bucket, Key=f"{prefix}/checkpoints/r1/empty", Body=b"not empty")
    another_host(settings, tmp_path, "gpu-c")
    with pytest.raises(store.ArtifactCorrupt, match="checkpoints/r1/empty"):
        store.local_tree(reference)

    store.delete(reference)
    assert client.list_objects_v2(Bucket=bucket).get("KeyCount", 0) == 0
    with pytest.raises(store.ArtifactMissing, match=f"{s3_store}"):
        store.local_tree(reference)


# --- an upload killed half-way -----------------------------------------------------------------

KILLED_UPLOAD = (
    DIE_AFTER_TWO_UPLOADS
    + """
store.publish_tree(source=Path(sys.argv[1]), key="checkpoints/run-9")
"""
)


@pytest.mark.parametrize("where", ["directory", "s3"])
def test_an_upload_killed_half_way_leaves_nothing_a_reader_can_use(
    where, request, settings, tmp_path
):
    if where == "s3":
        request.getfixturevalue("s3_store")
    tree = {f"part-{i}.bin": os.urandom(50_000) for i in range(5)}
    source = write_tree(tmp_path / "ckpt", tree)
    env = dict(
        os.environ,
        DJANGO_SETTINGS_MODULE="annotate.settings",
        STORE_URL=str(settings.STORE_URL),
        STEPWISE_VAR_DIR=str(tmp_path / "killed-host"),
        PYTHONPATH=str(ROOT),
    )
    if settings.STORE_S3_ENDPOINT_URL:
        env["STORE_S3_ENDPOINT_URL"] = settings.STORE_S3_ENDPOINT_URL
    done = subprocess.run(
        [sys.executable, "-c", KILLED_UPLOAD, str(source)], cwd=ROOT, env=env, timeout=120
    )
    assert done.returncode == -signal.SIGKILL

    # What the complete upload would have been named: it is not there, and nothing reads it.
    reference = store.publish_tree(source=source, key="checkpoints/run-10", seed_cache=False)
    digest = reference.split("@")[1]
    half = f"checkpoints/run-9@{digest}"
    assert not store.exists(half)
    with pytest.raises(store.ArtifactMissing, match="its upload never completed"):
        store.local_tree(half)
    # Publishing the same key again (a retry) completes and reads whole.
    retried = store.publish_tree(source=source, key="checkpoints/run-9", seed_cache=False)
    another_host(settings, tmp_path, "reader")
    assert read_tree(store.local_tree(retried)) == tree
    assert hashlib.sha256(b"".join(sorted(tree.values()))).hexdigest()  # the data was real


def test_the_cache_drops_what_was_used_least_recently_past_its_size(tmp_path, settings):
    settings.STORE_CACHE_MAX_GB = 250_000 / 1024**3  # room for two 100 kB artifacts
    settings.STORE_CACHE_MIN_AGE_SECONDS = 0
    references = []
    for i in range(3):
        source = write_tree(tmp_path / f"ckpt-{i}", {"w.bin": os.urandom(100_000)})
        references.append(
            store.publish_tree(source=source, key=f"checkpoints/run-{i}", seed_cache=False)
        )
    digests = [r.split("@")[1] for r in references]
    cache = Path(settings.STORE_CACHE_DIR)
    store.local_tree(references[0])
    store.local_tree(references[1])
    os.utime(cache / digests[1], (time.time() - 100, time.time() - 100))
    store.local_tree(references[0])  # used again: the newest
    store.local_tree(references[2])  # over the size: the least recently used one goes

    assert {p.name for p in cache.iterdir()} == {digests[0], digests[2]}
    assert (store.local_tree(references[1]) / "w.bin").is_file()  # downloaded again


def test_the_cache_keeps_what_was_used_recently_even_past_its_size(tmp_path, settings):
    settings.STORE_CACHE_MAX_GB = 1 / 1024**3
    references = [
        store.publish_tree(
            source=write_tree(tmp_path / f"c{i}", {"w.bin": os.urandom(10_000)}),
            key=f"checkpoints/r{i}",
            seed_cache=False,
        )
        for i in range(2)
    ]
    first = store.local_tree(references[0])
    store.local_tree(references[1])
    assert (first / "w.bin").is_file()  # a reader may still be loading it


def test_one_artifact_has_one_identity_on_every_host(tmp_path, settings):
    reference = store.publish_tree(
        source=write_tree(tmp_path / "backbone", {"config.json": b"{}"}), key="local-models/b"
    )
    here = store.local_tree(reference)
    another_host(settings, tmp_path, "gpu-b")
    there = store.local_tree(reference)
    assert here != there
    assert store.identity(str(here)) == store.identity(str(there)) == f"sha256:{here.name}"
    assert store.identity("/models/qwen") == "/models/qwen" and store.identity(None) is None
