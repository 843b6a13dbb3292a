"""Bulk writes of an import: plain value rows by COPY on PostgreSQL (bulk_create elsewhere), and
the planner's statistics refreshed after them."""

import io
import json
from collections.abc import Iterable
from typing import Any

from django.db import connection
from django.db.models import BooleanField, DateTimeField, JSONField, Model
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
    by the server while it reads them, which costs no round trip of a million numbers."""
    meta, quote = model._meta, connection.ops.quote_name
    given = [meta.get_field(column.removesuffix("_id")) for column in columns]
    named = {f.column for f in given}
    defaulted = [f for f in meta.concrete_fields if f.column not in named and f is not meta.pk]
    formats = [_copy_format(f) for f in given]
    # A default is one value for every row: formatted once.
    tail = "".join("\t" + _copy_format(f)(_default(f)) for f in defaulted)
    names = [*(f.column for f in given), *(f.column for f in defaulted)]
    if ids is not None:
        names.insert(0, meta.pk.column)
    sql = f"COPY {quote(meta.db_table)} ({', '.join(map(quote, names))}) FROM STDIN"
    with connection.cursor() as cursor:
        for start in range(0, len(rows), COPY_ROWS):
            chunk = rows[start : start + COPY_ROWS]
            if ids is None:
                prefixes = [""] * len(chunk)
            else:
                prefixes = [f"{pk}\t" for pk in ids[start : start + COPY_ROWS]]
            lines = [
                prefix + "\t".join([fmt(v) for fmt, v in zip(formats, row, strict=True)]) + tail
                for prefix, row in zip(prefixes, chunk, strict=True)
            ]
            lines.append("")
            _copy(cursor.cursor, sql, "\n".join(lines))


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


def _copy_text(value: Any) -> str:
    """A value in COPY's text format: NULL as \\N, backslash, tab and line breaks escaped."""
    if value is None:
        return "\\N"
    text = value if type(value) is str else str(value)
    # Most texts need no escape; and chained replaces cost a tenth of one translate.
    if "\\" in text:
        text = text.replace("\\", "\\\\")
    if "\t" in text or "\n" in text or "\r" in text:
        text = text.replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
    return text


def _copy_json(value: Any) -> str:
    if value is None:
        return "\\N"
    if not value and type(value) is dict:
        return "{}"  # nearly every `extra`
    return _copy_text(json.dumps(value, ensure_ascii=False))


def _copy_bool(value: Any) -> str:
    return "\\N" if value is None else ("t" if value else "f")


def _copy_time(value: Any) -> str:
    return "\\N" if value is None else value.isoformat()


def _copy_format(field) -> Any:
    if isinstance(field, JSONField):
        return _copy_json
    if isinstance(field, BooleanField):
        return _copy_bool
    if isinstance(field, DateTimeField):
        return _copy_time
    return _copy_text
