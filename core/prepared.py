"""Querysets compiled once per process and shape, then run with each request's values.

Django compiles a queryset to SQL on every evaluation, and for the serving queries (the next
solution's claim, what is left of a labeler's queue: several subqueries each) compiling cost
more Python time than the statement took in PostgreSQL: 7 ms of a 9 ms claim. The SQL of a
given shape never changes, only its values do. A `Prepared` builds its queryset once with
stand-in values, compiles it, notes where each stand-in landed among the statement's
parameters, and from then on executes that SQL with the real values in those places (a
value a shape does not use is simply not there).

The queryset stays the one definition (the ORM's, read by tests and the other callers); this
only skips recompiling it. A value that shapes the SQL's text (written into it, as a LIMIT
is, or a condition dropped for it) would make the cached SQL wrong for other values: the
statement is compiled with two sets of stand-ins, and unless both come out the same but for
the stand-ins' places, compiling refuses it (`NotPreparable`) rather than guess.
"""

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from threading import Lock
from typing import Any

from django.db import connections
from django.db.models import QuerySet


class NotPreparable(ValueError):
    """A stand-in value did not come out as a statement parameter of its own."""


# Values no real request uses, within the range of a 32-bit integer column (Django turns a
# comparison with a value out of its column's range into a constant, dropping the condition):
# two sets of them, since the statement is compiled with each and must come out the same.
_STAND_IN_INTS = (1_987_000_000, 1_986_000_000)
_STAND_IN_TIMES = (
    datetime(1901, 2, 3, 4, 5, 6, 789_012, tzinfo=UTC),
    datetime(1902, 3, 4, 5, 6, 7, 890_123, tzinfo=UTC),
)


def _stand_in(variant: int, offset: int, value: Any) -> Any:
    if isinstance(value, bool):
        raise TypeError("a flag changes the SQL's text: pass it in the shape")
    if isinstance(value, int):
        return _STAND_IN_INTS[variant] + offset
    if isinstance(value, datetime):
        return _STAND_IN_TIMES[variant] + timedelta(microseconds=offset)
    raise TypeError(f"only int and datetime values can be prepared, not {type(value).__name__}")


def _adapted(connection, value: Any) -> Any:
    # What the compiler leaves among the parameters for this value (SQLite: a string).
    if isinstance(value, datetime):
        return connection.ops.adapt_datetimefield_value(value)
    return value


class Prepared:
    """`build(**values, **shape)` returns a queryset of values()/values_list() rows. The
    values (ints and datetimes) change per call; the shape (flags, and any value given as
    None) changes the SQL's text, and each shape is compiled once per database alias."""

    def __init__(self, build: Callable[..., QuerySet]) -> None:
        self.build = build
        self._compiled: dict[tuple, tuple[str, list[Any], dict[int, str]]] = {}
        self._lock = Lock()

    def _compile(self, alias: str, shape: dict[str, Any], values: dict[str, Any]):
        connection = connections[alias]
        compiled = []
        for variant in (0, 1):
            stand_ins = {
                name: _stand_in(variant, i, value) for i, (name, value) in enumerate(values.items())
            }
            sql, params = self.build(**stand_ins, **shape).query.get_compiler(alias).as_sql()
            by_param = {_adapted(connection, value): name for name, value in stand_ins.items()}
            places = {
                i: by_param[p] for i, p in enumerate(params) if _hashable(p) and p in by_param
            }
            compiled.append((sql, list(params), places))
        (sql, params, places), (other_sql, other_params, other_places) = compiled
        # The same text and the same parameters but where the values go: else some value
        # shaped the text (written into it, or a condition dropped for it) and the text
        # compiled for one value is wrong for another.
        if (
            sql != other_sql
            or places != other_places
            or [_comparable(p) for i, p in enumerate(params) if i not in places]
            != [_comparable(p) for i, p in enumerate(other_params) if i not in other_places]
        ):
            raise NotPreparable(
                f"the statement's text depends on the values {sorted(values)}: "
                "pass those that shape it in `shape`"
            )
        return sql, params, places

    def rows(
        self, *, using: str = "default", shape: dict[str, Any] | None = None, **given: Any
    ) -> list[tuple]:
        """The rows of the queryset built with `given` and `shape`, as tuples. Of `given`,
        flags, strings and None are shape too; `shape` names the rest that the SQL's text
        depends on (a LIMIT, say)."""
        shape = dict(shape or {})
        shape |= {k: v for k, v in given.items() if v is None or isinstance(v, bool | str)}
        values = {k: v for k, v in given.items() if k not in shape}
        key = (using, tuple(sorted(shape.items())), tuple(sorted(values)))
        compiled = self._compiled.get(key)
        if compiled is None:
            with self._lock:
                compiled = self._compiled.get(key) or self._compile(using, shape, values)
                self._compiled[key] = compiled
        sql, params, places = compiled
        connection = connections[using]
        params = list(params)
        for index, name in places.items():
            params[index] = _adapted(connection, values[name])
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.fetchall()


def _comparable(value: Any) -> Any:
    # A JSON parameter comes wrapped for the driver (psycopg's Jsonb), equal only to itself.
    for unwrapped in ("adapted", "obj"):
        if hasattr(value, unwrapped):
            return getattr(value, unwrapped)
    return value


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True
