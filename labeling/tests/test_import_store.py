"""Import uploads cross hosts through the artifact store (issue 39): the web host spools,
checks and publishes an upload; the job records its reference; a worker on another host reads
it through its own cache; and a job that ends, however it ends, leaves nothing of it in the
store. Rows made before the store (an absolute path) keep working.

The root conftest.py gives each test its own store (STORE_URL) and this host's own cache and
scratch; a test here switches STORE_CACHE_DIR / STORE_SCRATCH_DIR between the web host's step
and the worker's, so the worker finds none of the web host's files.
"""

import io
import json
import shutil
from pathlib import Path
from unittest import mock

import pytest

from core import store
from core.errors import Unavailable
from labeling.models import ImportJob, Problem
from labeling.services import import_jobs

pytestmark = pytest.mark.django_db


def _lines(*objects: dict) -> bytes:
    return "".join(json.dumps(obj) + "\n" for obj in objects).encode()


GOOD = _lines(
    {"problem": "What is 1+1?", "answer": "2", "unique_id": "s/1"},
    {"problem": "What is 2+2?", "answer": "4", "unique_id": "s/2"},
)
# Passes the upload's line checks; the import itself refuses the second line (one id twice).
DUPLICATES = _lines(
    {"problem": "What is 1+1?", "answer": "2", "unique_id": "d/1"},
    {"problem": "What is 2+0?", "answer": "2", "unique_id": "d/1"},
)


def _files(folder) -> list[Path]:
    folder = Path(folder)
    return sorted(p for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else []


def _host(settings, tmp_path: Path, name: str) -> tuple[Path, Path]:
    """Make this process the host `name`: its own (empty) cache and scratch space; the store
    (STORE_URL) is the one all hosts share."""
    cache, scratch = tmp_path / name / "cache", tmp_path / name / "scratch"
    settings.STORE_CACHE_DIR, settings.STORE_SCRATCH_DIR = cache, scratch
    return cache, scratch


def _upload(admin, content: bytes, name: str = "problems.jsonl", kind: str = "problems"):
    return import_jobs.create_import_job(
        user=admin, kind=kind, upload=io.BytesIO(content), file_name=name
    )


@pytest.fixture
def admin(make_user):
    return make_user("ada", "admin")


def test_an_upload_is_published_and_a_worker_on_another_host_imports_the_store_copy(
    settings, tmp_path, admin
):
    web_cache, web_scratch = _host(settings, tmp_path, "web")
    job = _upload(admin, GOOD, name="my problems (v2).jsonl")

    # The row holds a reference into the store, never a path on the web host.
    assert store.is_reference(job.upload) and not Path(job.upload).is_absolute()
    assert job.upload.startswith("uploads/") and job.size == len(GOOD)
    assert job.file_name == "my problems (v2).jsonl"
    published = [p for p in _files(settings.STORE_URL) if not p.name.endswith(".manifest.json")]
    assert [p.read_bytes() for p in published] == [GOOD]
    assert _files(web_scratch) == []  # the spooled upload is gone
    shutil.rmtree(tmp_path / "web")  # and so is everything else of the web host's

    worker_cache, _ = _host(settings, tmp_path, "worker")
    read = []
    local_file = store.local_file

    def spy(text):
        read.append(local_file(text))
        return read[-1]

    with mock.patch.object(store, "local_file", spy):
        done = import_jobs.run_import_job(job_id=job.pk, worker_hostname="celery@worker")

    assert done.status == "succeeded", done.error
    assert set(Problem.objects.values_list("unique_id", flat=True)) == {"s/1", "s/2"}
    # The worker read its own download of the store's copy, verified into its own cache.
    (path,) = read
    assert path.is_relative_to(worker_cache)
    assert not web_cache.exists()
    # And once imported, nothing of it is left: not in the store, not in the worker's cache.
    assert _files(settings.STORE_URL) == [] and _files(worker_cache) == []


def _cancel(job):
    return import_jobs.cancel_import_job(job_id=job.pk)


def _run(job):
    return import_jobs.run_import_job(job_id=job.pk)


def _enqueue_without_a_broker(job):
    with mock.patch.object(import_jobs, "queue_task", side_effect=OSError("broker down")):
        import_jobs._enqueue(job.pk)
    return ImportJob.objects.get(pk=job.pk)


@pytest.mark.parametrize(
    "content,end,status",
    [
        (GOOD, _run, "succeeded"),
        (DUPLICATES, _run, "failed"),
        (GOOD, _cancel, "cancelled"),
        (GOOD, _enqueue_without_a_broker, "failed"),
    ],
    ids=["succeeded", "failed", "cancelled", "queue-unreachable"],
)
def test_a_job_that_ends_leaves_nothing_of_its_upload_in_the_store(
    settings, tmp_path, admin, content, end, status
):
    _host(settings, tmp_path, "web")
    job = _upload(admin, content)
    assert store.exists(job.upload) and len(_files(settings.STORE_URL)) == 2  # file, manifest

    worker_cache, _ = _host(settings, tmp_path, "worker")
    ended = end(job)

    assert ended.status == status, ended.error
    assert _files(settings.STORE_URL) == []
    assert _files(worker_cache) == []
    assert not store.exists(job.upload)


def test_a_refused_upload_publishes_nothing(settings, tmp_path, admin):
    _, scratch = _host(settings, tmp_path, "web")
    with pytest.raises(import_jobs.UploadRefused, match="bad.jsonl:1:"):
        _upload(admin, b'{"problem": NaN}\n', name="bad.jsonl")
    settings.IMPORT_MAX_UPLOAD_BYTES = 10
    with pytest.raises(import_jobs.UploadTooLarge, match=r"upload limit \(10 bytes\)"):
        _upload(admin, GOOD)

    assert not ImportJob.objects.exists()
    assert _files(settings.STORE_URL) == [] and _files(scratch) == []


def test_a_row_recorded_before_the_store_still_imports_from_its_path(settings, tmp_path):
    _host(settings, tmp_path, "worker")
    legacy = tmp_path / "var" / "imports" / "0123abcd.jsonl"
    legacy.parent.mkdir(parents=True)
    legacy.write_bytes(GOOD)
    job = ImportJob.objects.create(
        kind="problems", file_name="old.jsonl", upload=str(legacy), size=len(GOOD)
    )

    done = import_jobs.run_import_job(job_id=job.pk)

    assert done.status == "succeeded", done.error
    assert Problem.objects.count() == 2
    assert not legacy.exists()  # removed when its job ended, as before


def test_a_cancelled_row_recorded_before_the_store_removes_its_file(tmp_path):
    legacy = tmp_path / "var" / "imports" / "0123abcd.jsonl"
    legacy.parent.mkdir(parents=True)
    legacy.write_bytes(GOOD)
    job = ImportJob.objects.create(
        kind="problems", file_name="old.jsonl", upload=str(legacy), size=len(GOOD)
    )

    assert import_jobs.cancel_import_job(job_id=job.pk).status == "cancelled"
    assert not legacy.exists()


def test_a_row_recorded_before_the_store_whose_file_is_not_here_fails_readably(tmp_path):
    gone = tmp_path / "elsewhere" / "var" / "imports" / "0123abcd.jsonl"
    job = ImportJob.objects.create(kind="problems", file_name="old.jsonl", upload=str(gone), size=1)

    done = import_jobs.run_import_job(job_id=job.pk)

    assert done.status == "failed"
    assert done.error.startswith("old.jsonl: the worker cannot read the upload")
    assert str(gone) in done.error and "upload the file again" in done.error


def test_an_unreachable_store_refuses_the_upload_and_makes_no_job(settings, tmp_path, admin):
    _, scratch = _host(settings, tmp_path, "web")
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a regular file: nothing can be created under it")
    settings.STORE_URL = str(blocker / "store")

    with pytest.raises(store.StoreUnavailable) as refused:
        _upload(admin, GOOD, name="problems.jsonl")

    assert isinstance(refused.value, Unavailable)
    message = str(refused.value)
    assert message.startswith("problems.jsonl was not accepted, no import job was made")
    assert str(blocker / "store") in message and "uploads/" in message
    assert not ImportJob.objects.exists()
    assert _files(scratch) == []


def test_an_unreachable_store_is_a_503_with_no_job_through_the_api(
    client, settings, tmp_path, admin
):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    settings.STORE_URL = str(blocker / "store")
    client.force_login(admin)
    file = io.BytesIO(GOOD)
    file.name = "problems.jsonl"

    response = client.post("/api/imports/", {"kind": "problems", "file": file})

    assert response.status_code == 503, response.content[:300]
    assert "was not accepted, no import job was made" in response.json()["detail"]
    assert not ImportJob.objects.exists()


def test_a_worker_that_cannot_read_the_upload_fails_the_job_naming_its_key(
    settings, tmp_path, admin
):
    _host(settings, tmp_path, "web")
    job = _upload(admin, GOOD)
    shutil.rmtree(settings.STORE_URL)  # the store lost it (or the worker's store is another)
    _host(settings, tmp_path, "worker")

    done = import_jobs.run_import_job(job_id=job.pk)

    assert done.status == "failed"
    key = store.describe(job.upload)
    assert done.error.startswith(f"problems.jsonl: the worker cannot read the upload {key}:")
    assert "is not in the artifact store" in done.error
    assert not Problem.objects.exists()
