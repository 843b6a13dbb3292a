"""Named database locks for a read-then-write that has no row to lock.

Publishing a generation reads the whole pool before it writes; activating a model version
reads which one is active, and there may be none. Two of these at once would each act on what
the other is about to change. `hold(name)` makes the second wait for the first's transaction
to end, so it reads what the first wrote: the outcome of doing the two one after the other.
"""

import hashlib

from django.db import connection


def _key(name: str) -> int:
    # PostgreSQL's advisory locks are named by a signed 64-bit number.
    digest = hashlib.blake2b(name.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def hold(name: str) -> None:
    """Inside a transaction: wait until no other transaction holds `name`, then hold it
    until this transaction ends. Taking it again in the same transaction is a no-op."""
    if not connection.in_atomic_block:
        raise RuntimeError(f"The lock {name!r} is held until the transaction ends: open one.")
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_key(name)])
    # SQLite: transactions begin IMMEDIATE (annotate/settings.py), so a writing transaction
    # already runs alone from its first statement.
