"""Bulk writes of an import: plain value rows by COPY on PostgreSQL (bulk_create elsewhere), and
the planner's statistics refreshed after them."""

import io
import json
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import Any

from django.db import connection
from django.db.models import (
    AutoField,
    BooleanField,
    DateTimeField,
    FloatField,
    ForeignKey,
    IntegerField,
    JSONField,
    Model,
)
from django.utils import timezone


def refresh_planner_statistics(*, models: Iterable[type[Model]]) -> None:
    """ANALYZE the tables a bulk load filled (PostgreSQL; elsewhere nothing).

    Autovacuum refreshes the planner's statistics only some time after a load: until then a
    million new ratings are planned as the few thousand there were, and the export's chunk
    queries read the whole ratings table for every chunk instead of using its index.
    """
    if connection.vendor != "postgresql":
        return
    tables = ", ".join(connection.ops.quote_name(model._meta.db_table) for model in models)
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {tables}")


INSERT_ROWS = 2000
# Rows per COPY: enough that the round trips vanish, few enough that the text buffer stays small.
COPY_ROWS = 50_000


def insert_rows(
    model: type[Model], columns: list[str], rows: list[tuple], *, ids: bool = True
) -> list[int]:
    """Insert plain value rows (Python values, JSON as objects); return their new ids in order
    (with `ids=False`, nothing: rows nothing refers to, such as ratings).

    On PostgreSQL the rows travel by COPY, with ids drawn from the table's sequence first:
    for the million step labels and ratings of a PRM800K import, building model instances
    and letting bulk_create compile each value costs more than the database's work, and a
    multi-row INSERT still has the server parse a million parameters. The columns left out
    get their field's default. Elsewhere bulk_create.
    """
    if not rows:
        return []
    if not ids and connection.vendor == "postgresql":
        _copy_rows(model, columns, rows, ids=None)
        return []
    if connection.vendor != "postgresql":
        objects = [model(**dict(zip(columns, row, strict=True))) for row in rows]
        return [o.pk for o in model.objects.bulk_create(objects, batch_size=INSERT_ROWS)]
    meta = model._meta
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT nextval(pg_get_serial_sequence(%s, %s)) FROM generate_series(1, %s)",
            [meta.db_table, meta.pk.column, len(rows)],
        )
        new_ids = [pk for (pk,) in cursor.fetchall()]
    _copy_rows(model, columns, rows, ids=new_ids)
    return new_ids


def _copy_rows(
    model: type[Model], columns: list[str], rows: list[tuple], *, ids: list[int] | None
) -> None:
    """COPY the rows in, with these ids, or (None) each with its sequence's next one, drawn
    by the server while it reads them, which costs no round trip of a million numbers.

    The text is built a column at a time, each column by one formatter over all its values:
    a million rows formatted value by value spent seconds in Python calls alone.
    """
    meta, quote = model._meta, connection.ops.quote_name
    given = [meta.get_field(column) for column in columns]  # a name or a column (problem_id)
    named = {f.column for f in given}
    defaulted = [f for f in meta.concrete_fields if f.column not in named and f is not meta.pk]
    formats = [_column_format(f) for f in given]
    # A default is one value for every row: formatted once.
    defaults = [_column_format(f)([_default(f)])[0] for f in defaulted]
    names = [*(f.column for f in given), *(f.column for f in defaulted)]
    if ids is not None:
        names.insert(0, meta.pk.column)
    sql = f"COPY {quote(meta.db_table)} ({', '.join(map(quote, names))}) FROM STDIN"
    with connection.cursor() as cursor:
        for start in range(0, len(rows), COPY_ROWS):
            chunk = rows[start : start + COPY_ROWS]
            values = list(zip(*chunk, strict=True))
            if len(values) != len(formats):
                raise ValueError(f"rows of {len(values)} values for {len(formats)} columns")
            text = [fmt(column) for fmt, column in zip(formats, values, strict=True)]
            text += [[default] * len(chunk) for default in defaults]
            if ids is not None:
                text.insert(0, _copy_numbers(ids[start : start + COPY_ROWS]))
            lines = "\n".join(map("\t".join, zip(*text, strict=True)))
            _copy(cursor.cursor, sql, lines + "\n")


def _default(field) -> Any:
    # What bulk_create would store for a column it is not given (auto_now as pre_save sets it).
    if getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False):
        return timezone.now()
    return field.get_default()


def _copy(cursor: Any, sql: str, data: str) -> None:
    if hasattr(cursor, "copy_expert"):  # psycopg2
        cursor.copy_expert(sql, io.StringIO(data))
    else:  # psycopg 3
        with cursor.copy(sql) as copy:
            copy.write(data)


_NULL = "\\N"
# Joins a column's texts so that they are escaped at once; NUL, which no text column can hold.
_SEPARATOR = "\x00"


def _copy_text(value: Any) -> str:
    """A value in COPY's text format: NULL as \\N, backslash, tab and line breaks escaped."""
    if value is None:
        return _NULL
    text = value if type(value) is str else str(value)
    # Most texts need no escape; and chained replaces cost a tenth of one translate.
    if "\\" in text:
        text = text.replace("\\", "\\\\")
    if "\t" in text or "\n" in text or "\r" in text:
        text = text.replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
    return text


def _copy_texts(values: Sequence) -> list[str]:
    # Escaping is the same character by character, so the column's texts are joined, escaped
    # in one pass and split again; None, other types or a separator within fall back.
    try:
        joined = _SEPARATOR.join(values)
    except TypeError:
        return [_copy_text(v) for v in values]
    parts = _copy_text(joined).split(_SEPARATOR)
    if len(parts) != len(values):
        return [_copy_text(v) for v in values]
    return parts


def _copy_numbers(values: Sequence) -> list[str]:
    if None in values:
        return [_NULL if v is None else str(v) for v in values]
    return list(map(str, values))


def _copy_json(value: Any) -> str:
    if value is None:
        return _NULL
    if not value and type(value) is dict:
        return "{}"  # nearly every `extra`
    return _copy_text(json.dumps(value, ensure_ascii=False))


_BOOLS = {True: "t", False: "f", None: _NULL}


def _copy_bools(values: Sequence) -> list[str]:
    return list(map(_BOOLS.__getitem__, values))


def _copy_time(value: Any) -> str:
    return _NULL if value is None else value.isoformat()


def _column_format(field) -> Callable[[Sequence], list[str]]:
    """What formats a column of `field`'s values for COPY."""
    if isinstance(field, ForeignKey):
        field = field.target_field
    if isinstance(field, JSONField):
        return partial(_each, _copy_json)
    if isinstance(field, BooleanField):
        return _copy_bools
    if isinstance(field, DateTimeField):
        return partial(_each, _copy_time)
    if isinstance(field, IntegerField | FloatField | AutoField):
        return _copy_numbers
    return _copy_texts


def _each(format: Callable[[Any], str], values: Sequence) -> list[str]:
    return [format(v) for v in values]
