"""Forcing the interleaving a race needs, with real threads on a real PostgreSQL.

A race test must not pass or fail by timing. `Meeting.arrive()` is called by each racing
thread at the point between its read and its write (placed there by monkeypatching the
service). It returns once every party got there, which is the unsafe interleaving (all of them
read before any wrote), or once the parties still missing are waiting for a database lock,
which is what code that serialises the race does to them before that point (waiting for
them would hang). Either way the outcome is decided by the code under test, not the clock.
"""

import threading
import time

from django.db import connection, connections

from conftest import require


def require_postgresql() -> None:
    require(
        connection.vendor == "postgresql",
        "this race needs PostgreSQL (DATABASE_URL=postgres://...): SQLite runs one writing "
        "transaction at a time, so there is nothing to interleave",
    )


def waiting_for_locks() -> int:
    """How many connections to the test database wait for a lock right now.

    Asked on a connection of its own, outside any transaction: pg_stat_activity is a snapshot
    taken once per transaction.
    """
    default = connections["default"]
    probe = type(default)(dict(default.settings_dict), alias="lock-probe")
    try:
        with probe.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
            return cursor.fetchone()[0]
    finally:
        probe.close()


class Meeting:
    """`parties` threads meet at one point (see the module's docstring)."""

    def __init__(self, parties: int = 2, *, timeout: float = 60.0) -> None:
        self.parties = parties
        self.timeout = timeout
        self.outcomes: list[str] = []
        self._arrived = 0
        self._changed = threading.Condition()

    def arrive(self) -> str:
        """ "met" when every party arrived, "blocked" when the missing ones wait for a lock."""
        with self._changed:
            self._arrived += 1
            self._changed.notify_all()
        deadline = time.monotonic() + self.timeout
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._arrived >= self.parties, timeout=0.02)
                missing = self.parties - self._arrived
            if missing <= 0:
                outcome = "met"
            elif waiting_for_locks() >= missing:
                outcome = "blocked"
            elif time.monotonic() > deadline:
                raise AssertionError(
                    f"{missing} of {self.parties} threads neither arrived nor waited for a lock"
                )
            else:
                continue
            self.outcomes.append(outcome)
            return outcome


def run_in_threads(*targets, timeout: float = 300.0) -> list:
    """Run each callable in a thread of its own (its own database connection); return their
    results in order, or raise the first exception one of them raised."""
    results: list = [None] * len(targets)
    errors: list[BaseException | None] = [None] * len(targets)
    start = threading.Barrier(len(targets))

    def work(index: int, target) -> None:
        try:
            start.wait()
            results[index] = target()
        except BaseException as exc:  # noqa: BLE001 - raised in the test's thread below
            errors[index] = exc
        finally:
            connection.close()

    threads = [
        threading.Thread(target=work, args=(index, target), name=f"racer-{index}")
        for index, target in enumerate(targets)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=timeout)
        assert not thread.is_alive(), f"{thread.name} still runs after {timeout:.0f} s"
    for error in errors:
        if error is not None:
            raise error
    return results
