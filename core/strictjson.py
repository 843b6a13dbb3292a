"""Strict input: the one JSON reader for request bodies, bulk API bodies and uploaded files,
and the guard that refuses an oversized upload before it is read.

Python's `json` takes what no other JSON reader would and what the database cannot hold:
NaN, Infinity and 1e400 (stored as floats that no JSON can carry back out), a 5,000-digit
integer (a ValueError deep in the parser), a body nested 100,000 deep (a RecursionError),
duplicate keys (the last silently wins), and strings with NUL or an unpaired surrogate
(which PostgreSQL refuses, in text and jsonb alike). `loads` refuses each of them with an
`InvalidJSON` that names the problem; callers add where it was (FILE:LINE, or the request).
It also refuses an array of more than MAX_JSON_ARRAY_ITEMS items while parsing it, so a body
of a million ids costs the first few thousand, not a parse and a check of every one.

`bounded_lines` is the one line reader of uploaded files: a line longer than
MAX_UPLOAD_LINE_BYTES is refused after that many bytes, never read whole into memory.
"""

import json
import json.decoder
import json.scanner
import math
from collections.abc import Iterator
from typing import IO, Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.core.files.uploadhandler import FileUploadHandler
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from core import patterns
from core.errors import Invalid, TooLarge

# PRM800K lines are nested about 8 deep; 64 leaves room for any honest object while staying
# far below the interpreter's recursion limit, which serialising and rendering it again need.
MAX_DEPTH = 64
# Characters of one number literal: a float's shortest repr is at most 24, a 64-bit integer 20.
MAX_NUMBER_LENGTH = 40


class InvalidJSON(Invalid, ValueError):
    """Text that strict JSON refuses; str() says what is wrong, without where."""


# \u0000 preceded by an even number of backslashes is the escape, not a literal "\u0000".
# An escaped NUL: `\u0000` after an even number of backslashes (an odd one escapes the `\`).
_NUL_ESCAPE = patterns.compile(r"(?:^|[^\\])(?:\\\\)*\\u0000")
_SURROGATE_ESCAPE = patterns.compile(r"\\u[dD][89a-fA-F]")


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


class _TooManyItems(Exception):
    """An array past the limit: raised from inside the parse to stop it there."""


def _bounded_decoder(limit: int) -> json.JSONDecoder:
    """A decoder whose arrays stop at `limit` items. It runs the pure-Python scanner (the C
    one has no hook per array item, only per number and object), with the same hooks as
    _DECODER; strings are still read by C code."""
    decoder = json.JSONDecoder(
        parse_constant=_constant, parse_int=_int, parse_float=_float, object_pairs_hook=_object
    )

    def bounded_array(s_and_end, scan_once, **kwargs):
        count = 0

        def counted(string: str, idx: int):
            nonlocal count
            count += 1
            if count > limit:
                raise _TooManyItems
            return scan_once(string, idx)

        return json.decoder.JSONArray(s_and_end, counted, **kwargs)

    decoder.parse_array = bounded_array
    decoder.scan_once = json.scanner.py_make_scanner(decoder)
    return decoder


_BOUNDED: dict[int, json.JSONDecoder] = {}


def _decode(text: str) -> Any:
    limit = settings.MAX_JSON_ARRAY_ITEMS
    # An array of limit + 1 items holds `limit` commas: a text with fewer (nearly every one)
    # takes the C decoder; only the rest pay for the Python scanner that counts items.
    if text.count(",") < limit:
        return _DECODER.decode(text)
    if limit not in _BOUNDED:
        _BOUNDED[limit] = _bounded_decoder(limit)
    try:
        return _BOUNDED[limit].decode(text)
    except _TooManyItems:
        # Names the limit, never the items: the refusal of a million ids stays one line.
        raise InvalidJSON(
            f"an array of more than {limit:,} items (MAX_JSON_ARRAY_ITEMS); send fewer per request"
        ) from None


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
        value = _decode(text)
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


class LineTooLong(Invalid, ValueError):
    """A line over MAX_UPLOAD_LINE_BYTES; str() says so, callers add FILE:LINE."""


def bounded_lines(handle: IO[bytes], *, limit: int | None = None) -> Iterator[bytes]:
    """The lines of a binary file, each with its newline, refusing one longer than `limit`
    bytes (MAX_UPLOAD_LINE_BYTES) once that many are read: iterating the file itself reads a
    whole line, so one 120 MB line would be held (and decoded, and parsed) in the web process.
    """
    limit = settings.MAX_UPLOAD_LINE_BYTES if limit is None else limit
    while raw := handle.readline(limit + 1):
        if len(raw) > limit and not raw.endswith(b"\n"):
            raise LineTooLong(f"a line longer than {limit:,} bytes (MAX_UPLOAD_LINE_BYTES)")
        yield raw


def count_lines(handle: IO[bytes], *, chunk_bytes: int = 1024**2) -> int:
    """Lines of a binary file (a last one without a newline counts), read in chunks."""
    count, last = 0, b"\n"
    while chunk := handle.read(chunk_bytes):
        count += chunk.count(b"\n")
        last = chunk[-1:]
    return count + (last != b"\n")
