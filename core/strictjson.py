"""Strict input: the one JSON reader for request bodies, bulk API bodies and uploaded files,
and the guard that refuses an oversized upload before it is read.

Python's `json` takes what no other JSON reader would and what the database cannot hold:
NaN, Infinity and 1e400 (stored as floats that no JSON can carry back out), a 5,000-digit
integer (a ValueError deep in the parser), a body nested 100,000 deep (a RecursionError),
duplicate keys (the last silently wins), and strings with NUL or an unpaired surrogate
(which PostgreSQL refuses, in text and jsonb alike). `loads` refuses each of them with an
`InvalidJSON` that names the problem; callers add where it was (FILE:LINE, or the request).
"""

import json
import math
import re
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.core.files.uploadhandler import FileUploadHandler
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from core.errors import Invalid, TooLarge

# PRM800K lines are nested about 8 deep; 64 leaves room for any honest object while staying
# far below the interpreter's recursion limit, which serialising and rendering it again need.
MAX_DEPTH = 64
# Characters of one number literal: a float's shortest repr is at most 24, a 64-bit integer 20.
MAX_NUMBER_LENGTH = 40


class InvalidJSON(Invalid, ValueError):
    """Text that strict JSON refuses; str() says what is wrong, without where."""


# \u0000 preceded by an even number of backslashes is the escape, not a literal "\u0000".
_NUL_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _too_deep(text: str, value: Any) -> bool:
    """Whether the parsed `value` nests deeper than MAX_DEPTH. Walked after the parse (the
    decoder itself stops at the interpreter's recursion limit): a walk over a PRM800K line's
    few dozen containers costs a fifth of scanning its text for brackets outside strings."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return False  # cannot be deeper: most texts stop here
    stack = [(value, 1)] if type(value) in (dict, list) else []
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            return True
        for child in node.values() if type(node) is dict else node:
            if type(child) is dict or type(child) is list:
                stack.append((child, depth + 1))
    return False


def _constant(name: str) -> Any:
    raise InvalidJSON(f"{name} is not a JSON number")


def _int(literal: str) -> int:
    if len(literal) > MAX_NUMBER_LENGTH:
        raise InvalidJSON(f"a number longer than {MAX_NUMBER_LENGTH} characters")
    return int(literal)


def _float(literal: str) -> float:
    if len(literal) > MAX_NUMBER_LENGTH:
        raise InvalidJSON(f"a number longer than {MAX_NUMBER_LENGTH} characters")
    value = float(literal)
    if not math.isfinite(value):
        raise InvalidJSON(f"the number {literal} is out of range (beyond a 64-bit float)")
    return value


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        duplicate = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise InvalidJSON(f"the key '{duplicate:.80}' appears twice")
    return obj


# One decoder, built once: json.loads with hooks would build one per call, which costs more
# than the parse of a typical line.
_DECODER = json.JSONDecoder(
    parse_constant=_constant, parse_int=_int, parse_float=_float, object_pairs_hook=_object
)


def _where(text: str, exc: json.JSONDecodeError) -> str:
    """Where the parse stopped, as a reader of that text would say it: a line of a JSONL file
    read with its newline stopped "at line 2" when it only ended too soon."""
    if exc.pos >= len(text.rstrip()):
        return "at the end of the text" if "\n" in text.rstrip() else "at the end of the line"
    if exc.lineno == 1:
        return f"at column {exc.colno}"
    return f"at line {exc.lineno}, column {exc.colno}"


def loads(text: str) -> Any:
    """Parse one JSON text strictly; raise InvalidJSON naming what is refused."""
    try:
        value = _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        raise InvalidJSON(f"not valid JSON ({exc.msg} {_where(text, exc)})") from None
    except RecursionError:  # deeper than the interpreter's limit, so deeper than MAX_DEPTH
        raise InvalidJSON(f"nested deeper than {MAX_DEPTH} levels") from None
    if _too_deep(text, value):
        raise InvalidJSON(f"nested deeper than {MAX_DEPTH} levels")
    if "\\u0000" in text and _NUL_ESCAPE.search(text):
        raise InvalidJSON("text with a NUL character (\\u0000), which cannot be stored")
    if _SURROGATE_ESCAPE.search(text):
        try:  # a surrogate pair is a character; a lone half cannot be encoded as UTF-8
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidJSON("text with an unpaired surrogate (\\ud800-\\udfff)") from None
    return value


class StrictJSONParser(JSONParser):
    """The API's JSON parser (DEFAULT_PARSER_CLASSES): `loads`, so a refusal is a 400."""

    def parse(self, stream, media_type=None, parser_context=None) -> Any:
        # DRF hands JSON parsers the body Django read, within DATA_UPLOAD_MAX_MEMORY_SIZE.
        try:
            text = stream.read().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ParseError(f"JSON parse error - the body is not UTF-8 ({exc.reason})") from None
        try:
            return loads(text)
        except InvalidJSON as exc:
            raise ParseError(f"JSON parse error - {exc}") from None


# Room for the multipart boundaries, headers and form fields around the file itself.
MULTIPART_OVERHEAD = 64 * 1024


class UploadTooLarge(TooLarge, RequestDataTooBig):
    """A multipart body over IMPORT_MAX_UPLOAD_BYTES.

    A TooLarge, so the API and page views answer 413 with the sentence; also Django's own
    RequestDataTooBig, so that where a middleware reads the form first (the CSRF check of a
    page POST) Django answers 400 and does not try to read the body again, instead of a 500.
    """


class UploadLimitHandler(FileUploadHandler):
    """First of FILE_UPLOAD_HANDLERS: refuses a multipart body whose Content-Length is over
    the upload limit before a byte of it is read, and stops a file that streams past it."""

    def handle_raw_input(self, input_data, META, content_length, boundary, encoding=None):
        self.limit = settings.IMPORT_MAX_UPLOAD_BYTES
        self.received = 0
        if content_length > self.limit + MULTIPART_OVERHEAD:
            raise UploadTooLarge(self._message())
        return None  # the next handlers read the body

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes:
        self.received += len(raw_data)
        if self.received > self.limit:
            raise UploadTooLarge(self._message())
        return raw_data

    def file_complete(self, file_size: int) -> None:
        return None  # the next handler builds the file

    def _message(self) -> str:
        return f"the file is larger than the upload limit ({self.limit:,} bytes)"
