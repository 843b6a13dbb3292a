"""A line of an uploaded file is read at most MAX_UPLOAD_LINE_BYTES at a time
(core/strictjson.py `bounded_lines`, used by labeling/services/importing.py `read_jsonl`,
which every JSONL import and upload check reads through): a longer line is refused with
FILE:LINE, and the process never holds it whole."""

import tracemalloc

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import override_settings
from rest_framework.test import APIClient

from core import strictjson
from labeling.services import import_jobs

LINE_BYTES = 48 * 1024**2  # within the 20-120 MB of the report


def _file_with_a_long_line(path, size: int):
    good = b'{"unique_id": "a", "steps": ["1"]}\n'
    with path.open("wb") as out:
        out.write(good)
        out.write(b'{"unique_id": "b", "steps": ["')
        chunk = b"x" * 1024**2
        for _ in range(size // len(chunk)):
            out.write(chunk)
        out.write(b'"]}\n')
        out.write(good)
    return path


def test_a_long_line_is_refused_without_being_held(tmp_path):
    path = _file_with_a_long_line(tmp_path / "big.jsonl", LINE_BYTES)

    tracemalloc.start()
    try:
        with pytest.raises(import_jobs.UploadRefused, match=r"^big\.jsonl:2: a line longer"):
            import_jobs.check_upload(path=path, kind="solutions", name="big.jsonl")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    # The limit's worth of bytes (4 MiB by default) and change, not the line's 48 MiB.
    assert peak < 3 * strictjson.settings.MAX_UPLOAD_LINE_BYTES < LINE_BYTES / 3


@pytest.mark.django_db
@override_settings(IMPORT_MAX_UPLOAD_BYTES=64 * 1024**2)
def test_the_import_endpoint_answers_400_naming_the_line(tmp_path, make_user):
    path = _file_with_a_long_line(tmp_path / "big.jsonl", 24 * 1024**2)
    client = APIClient()
    client.force_authenticate(make_user("ada", role="admin"))

    response = client.post(
        "/api/imports/",
        {"kind": "solutions", "file": SimpleUploadedFile("big.jsonl", path.read_bytes())},
        format="multipart",
    )

    assert response.status_code == 400
    assert "big.jsonl:2: a line longer than 4,194,304 bytes" in response.json()["detail"]
    assert len(response.content) < 300


def test_lines_up_to_the_limit_pass_and_are_counted_in_chunks(tmp_path):
    import io

    lines = [b"a" * 9 + b"\n", b"b" * 10 + b"\n", b"c" * 10]
    assert list(strictjson.bounded_lines(io.BytesIO(b"".join(lines)), limit=10)) == lines
    with pytest.raises(strictjson.LineTooLong, match="longer than 10 bytes"):
        list(strictjson.bounded_lines(io.BytesIO(b"d" * 11 + b"\n"), limit=10))
    assert strictjson.count_lines(io.BytesIO(b"".join(lines)), chunk_bytes=4) == 3
    assert strictjson.count_lines(io.BytesIO(b"")) == 0
