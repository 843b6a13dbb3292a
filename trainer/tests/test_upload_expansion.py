"""Uploads are bounded by what they expand to, not their size on the wire (issue 41, item 6): a
Parquet file's footer declares its rows and uncompressed bytes, and one past IMPORT_MAX_ROWS or
IMPORT_MAX_EXPANDED_BYTES is refused with a 400 before its pages are read; a malformed file
(truncated, corrupt pages, bad UTF-8, NUL) is a 400 naming the file and the problem, never a
500. The owner is `trainer.sampling.public_formats.read_parquet`."""

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from labeling.models import ImportJob, Problem
from trainer.sampling import public_formats

pytestmark = pytest.mark.django_db


def trl_row(i: int, prompt: str | None = None) -> dict:
    return {
        "prompt": prompt or f"What is {i} + {i}?",
        "completions": [f"We add {i} and {i}.", f"So the answer is {2 * i}."],
        "labels": [True, True],
    }


@pytest.fixture
def upload(make_user):
    client = APIClient()
    client.force_authenticate(make_user("ada", "admin"))

    def post(path, kind="trl"):
        file = SimpleUploadedFile(path.name, path.read_bytes())
        response = client.post("/api/imports/", {"kind": kind, "file": file}, format="multipart")
        assert not ImportJob.objects.exists() and not Problem.objects.exists()
        return response.status_code, json.dumps(response.json())

    return post


@pytest.fixture
def pages_unread(monkeypatch):
    """Reading any data page fails the test: a refusal must come from the footer alone."""

    def read(*args, **kwargs):
        raise AssertionError("a Parquet page was read")

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", read)


def test_a_parquet_file_declaring_more_rows_than_the_limit_is_refused_before_it_is_read(
    tmp_path, settings, upload, pages_unread
):
    settings.IMPORT_MAX_ROWS = 2
    path = tmp_path / "many.parquet"
    pq.write_table(pa.Table.from_pylist([trl_row(i) for i in range(3)]), path)
    status, body = upload(path)
    assert status == 400
    assert "many.parquet: the file declares 3 rows" in body and "IMPORT_MAX_ROWS" in body


def test_a_small_parquet_file_that_expands_past_the_limit_is_refused_before_it_is_read(
    tmp_path, settings, upload, pages_unread
):
    settings.IMPORT_MAX_EXPANDED_BYTES = 1_000_000
    path = tmp_path / "bomb.parquet"
    # A column that compresses to almost nothing: 4 MB of text in a file of a few KB.
    rows = [trl_row(i, prompt=f"{i}" + "x" * 1_000_000) for i in range(4)]
    pq.write_table(pa.Table.from_pylist(rows), path, compression="zstd", use_dictionary=False)
    assert path.stat().st_size < 20_000
    status, body = upload(path)
    assert status == 400
    assert "bomb.parquet: the file expands to" in body and "IMPORT_MAX_EXPANDED_BYTES" in body


def test_rows_past_what_the_footer_declared_are_stopped_while_reading(
    tmp_path, settings, upload, monkeypatch
):
    # A footer that understates its sizes passes its own check; the bytes decoded still count.
    monkeypatch.setattr(public_formats, "check_parquet_footer", lambda metadata, name: None)
    settings.IMPORT_MAX_EXPANDED_BYTES = 1_000_000
    path = tmp_path / "liar.parquet"
    rows = [trl_row(i, prompt=f"{i}" + "x" * 1_000_000) for i in range(4)]
    pq.write_table(pa.Table.from_pylist(rows), path, compression="zstd")
    status, body = upload(path)
    assert status == 400
    assert "liar.parquet:1: the file holds more than its footer declares" in body


def test_a_truncated_parquet_file_is_refused_naming_it(tmp_path, upload):
    path = tmp_path / "cut.parquet"
    pq.write_table(pa.Table.from_pylist([trl_row(i) for i in range(20)]), path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2] + data[-8:])  # footer length and magic kept
    status, body = upload(path)
    assert status == 400
    assert "cut.parquet: not a Parquet file" in body


def test_a_parquet_file_with_a_corrupt_page_is_refused_naming_it(tmp_path, upload):
    path = tmp_path / "corrupt.parquet"
    pq.write_table(pa.Table.from_pylist([trl_row(i) for i in range(20)]), path)
    data = bytearray(path.read_bytes())
    data[4:34] = b"\xff" * 30  # the first page header, right after the leading magic
    path.write_bytes(bytes(data))
    status, body = upload(path)
    assert status == 400
    assert "corrupt.parquet:1: corrupt Parquet data" in body


def test_a_parquet_text_that_is_not_utf8_is_refused_naming_its_row(tmp_path, upload):
    path = tmp_path / "latin1.parquet"
    prompts = pa.array([b"What is 1 + 1?", b"Caf\xe9 au lait?"], pa.binary()).view(pa.string())
    table = pa.Table.from_pylist([trl_row(1), trl_row(2)]).set_column(0, "prompt", prompts)
    pq.write_table(table, path)
    status, body = upload(path)
    assert status == 400
    assert "latin1.parquet:1: a text is not UTF-8" in body


def test_a_parquet_text_with_a_nul_is_refused_naming_its_row(tmp_path, upload):
    path = tmp_path / "nul.parquet"
    pq.write_table(pa.Table.from_pylist([trl_row(1), trl_row(2, "What\x00 is 2 + 2?")]), path)
    status, body = upload(path)
    assert status == 400
    assert "nul.parquet:2: 'problem' contains a NUL character" in body


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        (b'{"prompt": "Caf\xe9?", "completions": ["a"], "labels": [true]}', "not UTF-8"),
        (b'{"prompt": "a\\u0000b", "completions": ["a"], "labels": [true]}', "NUL character"),
        (b'{"prompt": "a\x00b", "completions": ["a"], "labels": [true]}', ""),
    ],
    ids=["bad-utf8", "escaped-nul", "raw-nul"],
)
def test_a_jsonl_line_with_bad_utf8_or_a_nul_is_refused_naming_its_line(
    tmp_path, upload, line, problem
):
    path = tmp_path / "lines.jsonl"
    good = json.dumps(trl_row(1)).encode()
    path.write_bytes(good + b"\n" + line + b"\n")
    status, body = upload(path)
    assert status == 400
    assert "lines.jsonl:2: " in body and problem in body
