"""The artifact store: every file that more than one process reads, by key, never by path.

Checkpoints, exported models, local generator models and import uploads are written here by
the process that makes them and read back by any process on any host. A record holds a
*reference*, ``<key>@<digest>``, never a host's path. The store is one setting, STORE_URL: a
directory (the embedded default, ``var/store``; on many hosts a shared mount) or S3-compatible
object storage (``s3://bucket/prefix``: AWS S3, MinIO, Ceph RGW, GCS's S3 API), both reached
through fsspec (s3fs for S3). Why fsspec and not django-storages or boto3 is in
docs/architecture.md.

An *artifact* is a tree of files (a checkpoint directory) or a single file (a tree of one).
Publishing uploads every file under ``<key>/`` and then, last, the manifest
``<key>.manifest.json`` (each file's SHA-256 and size). The manifest is the commit point: an
upload killed half-way leaves no manifest, so nothing can read it, and a record is written
only after `publish_tree` returned. The tree's digest is the manifest's SHA-256, so a
reference names exactly one content.

Reading (`local_tree`, `local_file`) goes through this host's cache, STORE_CACHE_DIR,
keyed by that digest: a hit costs no request to the store; a miss downloads the files into a
scratch folder, checks each against the manifest, and renames the folder into place (two
processes racing both verify, one rename wins). A missing object, a store that cannot be
reached and a download that does not match are each a clear `Unavailable` naming the key and
the store.

Records made before the store held a host's absolute path. `local_tree` still opens such a
path where it exists on this host, and says where to publish it where it does not
(`manage.py publish_legacy_artifacts`).

The ground floor: Django settings and fsspec, never an app.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from django.conf import settings

from core import patterns
from core.errors import Invalid, Unavailable

MANIFEST_SUFFIX = ".manifest.json"
MANIFEST_FORMAT = "stepwise-artifact-1"
_CHUNK = 8 * 1024 * 1024
# Keys are made by the code (checkpoints/run-12, uploads/<uuid>/<name>), never typed by a
# user; this keeps them portable across S3 and every filesystem.
_KEY = patterns.compile(r"[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*")
_DIGEST = patterns.compile(r"[0-9a-f]{64}")


class StoreUnavailable(Unavailable):
    """The store cannot be reached or refused the request; nothing was recorded."""


class ArtifactMissing(Unavailable):
    """What a record names is not in the store (or, for an old record, not on this host)."""


class ArtifactCorrupt(Unavailable):
    """A download does not match its manifest; it is not used."""


class ArtifactExists(Invalid):
    """A key is published once: its content never changes under a reference."""


@dataclass(frozen=True)
class Ref:
    """What a record holds: the artifact's key and the digest of its manifest."""

    key: str
    digest: str

    def __str__(self) -> str:
        return f"{self.key}@{self.digest}"

    @classmethod
    def parse(cls, text: str) -> Ref | None:
        """The reference `text` writes, or None for anything else (an old absolute path)."""
        key, sep, digest = text.rpartition("@")
        if sep and _KEY.fullmatch(key) and _DIGEST.fullmatch(digest):
            return cls(key=key, digest=digest)
        return None


def is_reference(text: str) -> bool:
    return Ref.parse(text) is not None


def describe(text: str) -> str:
    """A reference as a person reads it: the key (the digest is for machines)."""
    ref = Ref.parse(text)
    return ref.key if ref else text


def check_key(key: str) -> str:
    if len(key) > 900 or not _KEY.fullmatch(key) or ".." in key.split("/"):
        raise Invalid(f"{key!r} is not a store key (letters, digits, . _ - and /).")
    return key


def unique_key(prefix: str, name: str = "") -> str:
    """A key no other publication uses: `prefix`/<uuid>[/`name`]."""
    key = f"{prefix}/{uuid.uuid4().hex}"
    return check_key(f"{key}/{name}" if name else key)


# --- the backend -------------------------------------------------------------------------------


class _Backend:
    """fsspec's filesystem for STORE_URL, made once per process (s3fs's event loop does not
    survive a fork: a Celery child makes its own)."""

    def __init__(self, url: str):
        import fsspec

        self.url = url
        options = {}
        if url.startswith("s3://"):
            endpoint = settings.STORE_S3_ENDPOINT_URL
            options = {
                "client_kwargs": {"endpoint_url": endpoint} if endpoint else {},
                # A store that is down answers within seconds, not after minutes of retries;
                # an upload of an immutable object is safe to retry, so botocore retries it.
                "config_kwargs": {
                    "connect_timeout": settings.STORE_TIMEOUT_SECONDS,
                    "read_timeout": max(60, settings.STORE_TIMEOUT_SECONDS),
                    "retries": {"max_attempts": 3, "mode": "standard"},
                },
                "skip_instance_cache": True,
                "use_listings_cache": False,
            }
        elif url.startswith("file://"):
            url = url[len("file://") :]
        self.fs, root = fsspec.core.url_to_fs(url, **options)
        self.root = root.rstrip("/")
        self.local = self.fs.protocol in ("file", "local") or "file" in self.fs.protocol

    def path(self, key: str) -> str:
        return f"{self.root}/{key}"

    def errors(self) -> tuple[type[BaseException], ...]:
        errors: tuple[type[BaseException], ...] = (OSError, RuntimeError, ValueError)
        if not self.local:
            from botocore.exceptions import BotoCoreError, ClientError

            errors += (BotoCoreError, ClientError)
        return errors


_BACKENDS: dict[tuple[int, str], _Backend] = {}
_BACKENDS_LOCK = threading.Lock()


def store_url() -> str:
    return str(settings.STORE_URL)


def _backend() -> _Backend:
    url = store_url()
    key = (os.getpid(), url)
    with _BACKENDS_LOCK:
        if key not in _BACKENDS:
            _BACKENDS[key] = _Backend(url)
        return _BACKENDS[key]


@contextlib.contextmanager
def _talking(backend: _Backend, key: str) -> Iterator[None]:
    """Errors of the store as the domain says them, naming the key and the store."""
    try:
        yield
    except FileNotFoundError:
        raise ArtifactMissing(
            f"{key} is not in the artifact store {store_url()} (its manifest is missing: it was "
            "deleted, or its upload never completed)."
        ) from None
    except backend.errors() as exc:
        raise StoreUnavailable(
            f"The artifact store {store_url()} failed on {key}: {type(exc).__name__}: {exc}"
        ) from None


# --- publishing --------------------------------------------------------------------------------


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _files(source: Path) -> list[Path]:
    if source.is_file():
        return [source]
    found = sorted(p for p in source.rglob("*") if p.is_file() and not p.is_symlink())
    if not found:
        raise Invalid(f"{source} holds no file to publish.")
    return found


def _manifest_bytes(key: str, entries: dict[str, dict]) -> bytes:
    # The key is part of it, so two publications of the same bytes have two digests and two
    # cache entries: deleting one never removes what a reader of the other is using.
    text = json.dumps(
        {"format": MANIFEST_FORMAT, "key": key, "files": entries},
        sort_keys=True,
        separators=(",", ":"),
    )
    return text.encode("utf-8")


def publish_tree(*, source: Path, key: str, seed_cache: bool = True) -> str:
    """Upload the directory (or single file) `source` as the artifact `key`; its reference.

    The manifest goes last, so a reference exists only for a complete upload. A key is
    published once (`ArtifactExists` otherwise); a failed upload removes what it wrote. With
    `seed_cache`, this host's cache gets the files too, so the next reader here downloads nothing.
    """
    check_key(key)
    source = Path(source)
    files = _files(source)
    base = source.parent if source.is_file() else source
    entries = {}
    for path in files:
        entries[path.relative_to(base).as_posix()] = {
            "sha256": _sha256(path),
            "size": path.stat().st_size,
        }
    manifest = _manifest_bytes(key, entries)
    ref = Ref(key=key, digest=hashlib.sha256(manifest).hexdigest())
    backend = _backend()
    with _talking(backend, key):
        if backend.fs.exists(backend.path(key + MANIFEST_SUFFIX)):
            raise ArtifactExists(f"{key} is already in the artifact store {store_url()}.")
        try:
            for path in files:
                target = backend.path(f"{key}/{path.relative_to(base).as_posix()}")
                if backend.local:
                    backend.fs.makedirs(target.rsplit("/", 1)[0], exist_ok=True)
                backend.fs.put_file(str(path), target)
            _put_manifest(backend, key, manifest)
        except BaseException:
            with contextlib.suppress(*backend.errors()):
                backend.fs.rm(backend.path(key), recursive=True)
            raise
    if seed_cache:
        _seed_cache(ref, files=files, base=base)
    return str(ref)


def publish_file(*, source: Path, key: str) -> str:
    """Upload one file as the artifact `key` (a tree of one file, named as `source` is)."""
    return publish_tree(source=Path(source), key=key, seed_cache=False)


def publish_stream(*, stream: IO[bytes], key: str, name: str, limit: int) -> tuple[str, int]:
    """Spool `stream` (at most `limit` bytes) to this host, then publish it as one file named
    `name`; (reference, size). Past the limit nothing is published (`TooLarge` from `spool`)."""
    with spooled(stream, name=name, limit=limit) as (path, size):
        return publish_file(source=path, key=key), size


@contextlib.contextmanager
def spooled(stream: IO[bytes], *, name: str, limit: int) -> Iterator[tuple[Path, int]]:
    """`stream` written to a scratch file on this host (removed after), read in chunks and
    refused past `limit` bytes before the rest is read."""
    from core.errors import TooLarge

    folder = Path(tempfile.mkdtemp(prefix="spool-", dir=scratch_dir()))
    path = folder / name
    size = 0
    try:
        with path.open("wb") as out:
            while chunk := stream.read(1024 * 1024):
                size += len(chunk)
                if size > limit:
                    raise TooLarge(f"{name} is larger than the limit of {limit} bytes.")
                out.write(chunk)
        yield path, size
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _put_manifest(backend: _Backend, key: str, manifest: bytes) -> None:
    target = backend.path(key + MANIFEST_SUFFIX)
    if backend.local:
        # A rename is atomic on a filesystem; a PUT is atomic in S3.
        partial = f"{target}.partial-{uuid.uuid4().hex}"
        backend.fs.pipe_file(partial, manifest)
        backend.fs.mv(partial, target)
    else:
        backend.fs.pipe_file(target, manifest)


def delete(text: str) -> None:
    """Remove the artifact `text` names from the store (the manifest first, so it vanishes at
    once) and from this host's cache. Absent already: nothing to do."""
    ref = Ref.parse(text)
    if ref is None:
        return
    backend = _backend()
    with _talking(backend, ref.key):
        for path in (backend.path(ref.key + MANIFEST_SUFFIX), backend.path(ref.key)):
            with contextlib.suppress(FileNotFoundError):
                backend.fs.rm(path, recursive=True)
    shutil.rmtree(cache_dir() / ref.digest, ignore_errors=True)


def delete_key(key: str) -> None:
    """Remove whatever lies under `key` (a publication that never completed)."""
    backend = _backend()
    with _talking(backend, key):
        for path in (backend.path(key + MANIFEST_SUFFIX), backend.path(key)):
            with contextlib.suppress(FileNotFoundError):
                backend.fs.rm(path, recursive=True)


def exists(text: str) -> bool:
    """Whether the artifact is readable: in this host's cache or in the store."""
    ref = Ref.parse(text)
    if ref is None:
        return Path(text).exists()
    if (cache_dir() / ref.digest).is_dir():
        return True
    backend = _backend()
    with _talking(backend, ref.key):
        return backend.fs.exists(backend.path(ref.key + MANIFEST_SUFFIX))


# --- reading -----------------------------------------------------------------------------------


def cache_dir() -> Path:
    path = Path(settings.STORE_CACHE_DIR)
    path.mkdir(parents=True, exist_ok=True)
    return path


def scratch_dir(*, create: bool = True) -> Path:
    """This host's own working space (uploads being received, checkpoints being written);
    `create=False` leaves making it to a caller that reports its own error."""
    path = Path(settings.STORE_SCRATCH_DIR)
    if create:
        path.mkdir(parents=True, exist_ok=True)
    return path


def local_tree(text: str) -> Path:
    """The artifact `text` names as a directory on this host, from the cache or downloaded
    and verified into it. An old record's absolute path is used where it exists here."""
    ref = Ref.parse(text)
    if ref is None:
        return _legacy(text)
    cached = cache_dir() / ref.digest
    if cached.is_dir():
        _touch(cached)
        return cached
    backend = _backend()
    with _talking(backend, ref.key):
        manifest = backend.fs.cat_file(backend.path(ref.key + MANIFEST_SUFFIX))
    if hashlib.sha256(manifest).hexdigest() != ref.digest:
        raise ArtifactCorrupt(
            f"{ref.key} in the artifact store {store_url()} is not the content its record names "
            "(its manifest changed): refusing to use it."
        )
    entries = json.loads(manifest)["files"]
    partial = Path(tempfile.mkdtemp(prefix=f".{ref.digest[:12]}-", dir=cache_dir()))
    try:
        for name, entry in entries.items():
            target = partial / name
            target.parent.mkdir(parents=True, exist_ok=True)
            with _talking(backend, f"{ref.key}/{name}"):
                got = _download(backend, backend.path(f"{ref.key}/{name}"), target)
            if got != (entry["sha256"], entry["size"]):
                raise ArtifactCorrupt(
                    f"{ref.key}/{name} in the artifact store {store_url()} does not match its "
                    f"manifest (sha256 {got[0][:12]}…, {got[1]} bytes; expected "
                    f"{entry['sha256'][:12]}…, {entry['size']} bytes): refusing to use it."
                )
        _settle(partial, cached)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    evict(keep=cached)
    return cached


def identity(path: str | None) -> str | None:
    """What a local path read from the store is, the same on every host: its digest (hosts'
    cache folders differ). Any other path is itself."""
    if not path:
        return None
    name = Path(path).name
    return f"sha256:{name}" if _DIGEST.fullmatch(name) else str(path)


def local_file(text: str) -> Path:
    """The single file of the artifact `text` names, on this host."""
    tree = local_tree(text)
    if tree.is_file():
        return tree
    files = [p for p in tree.iterdir() if p.is_file()]
    if len(files) != 1:
        raise ArtifactCorrupt(f"{describe(text)} is a tree of {len(files)} files, not one file.")
    return files[0]


def _download(backend: _Backend, remote: str, target: Path) -> tuple[str, int]:
    digest = hashlib.sha256()
    size = 0
    if backend.local:
        # Objects never change under a reference: a hard link costs no copy (the digest is
        # still checked); across filesystems it is copied.
        try:
            os.link(remote, target)
            return _sha256(target), target.stat().st_size
        except OSError:
            pass
    with backend.fs.open(remote, "rb") as source, target.open("wb") as out:
        while chunk := source.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
            out.write(chunk)
    return digest.hexdigest(), size


def link_or_copy(source: Path, target: Path) -> None:
    """`target` made the same file as `source` (a folder above it created): a hard link, which
    costs no copy, or a copy across filesystems. Only for files that never change."""
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def _touch(cached: Path) -> None:
    with contextlib.suppress(OSError):
        os.utime(cached)


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def evict(*, keep: Path | None = None) -> list[str]:
    """Drop this host's least recently used cache entries while the cache is over
    STORE_CACHE_MAX_GB; never `keep` nor an entry used in the last STORE_CACHE_MIN_AGE_SECONDS
    (a reader may still be loading it). The digests dropped; the store still has them."""
    limit = settings.STORE_CACHE_MAX_GB
    if not limit:
        return []
    entries = []
    for folder in cache_dir().iterdir():
        if folder.is_dir() and _DIGEST.fullmatch(folder.name):
            with contextlib.suppress(OSError):
                entries.append((folder.stat().st_mtime, folder, _size(folder)))
    total = sum(size for _, _, size in entries)
    dropped = []
    recent = time.time() - settings.STORE_CACHE_MIN_AGE_SECONDS
    for used, folder, size in sorted(entries):
        if total <= limit * 1024**3:
            break
        if folder == keep or used > recent:
            continue
        shutil.rmtree(folder, ignore_errors=True)
        total -= size
        dropped.append(folder.name)
    return dropped


def _settle(partial: Path, cached: Path) -> None:
    try:
        partial.rename(cached)
    except OSError:
        if not cached.is_dir():  # not a racing reader that settled first
            raise


def _seed_cache(ref: Ref, *, files: list[Path], base: Path) -> None:
    cached = cache_dir() / ref.digest
    if cached.is_dir():
        return
    partial = Path(tempfile.mkdtemp(prefix=f".{ref.digest[:12]}-", dir=cache_dir()))
    try:
        for path in files:
            link_or_copy(path, partial / path.relative_to(base))
        _settle(partial, cached)
    except OSError:
        pass  # a cache is an optimisation: the next reader downloads
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def _legacy(text: str) -> Path:
    path = Path(text)
    if not path.is_absolute():
        raise ArtifactMissing(f"{text!r} is neither a store reference nor an absolute path.")
    if path.exists():
        return path
    raise ArtifactMissing(
        f"{text} was recorded before the artifact store, as a path on the host that wrote it, "
        "and is not on this host: run `manage.py publish_legacy_artifacts` on that host to move "
        f"it into the store ({store_url()})."
    )
