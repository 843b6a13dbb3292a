"""What every benchmark shares: Django set up on a throwaway database, never the developer's."""

import os
import re
import resource
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit


def setup_django(database_url: str) -> None:
    # The URL must be in the environment before settings are read, i.e. before setup().
    os.environ["DATABASE_URL"] = database_url
    # DEBUG keeps every SQL query in memory, which would inflate both time and RSS; a
    # benchmark measures production behaviour whatever the developer's shell says.
    os.environ["DEBUG"] = "false"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "annotate.settings")
    import django

    django.setup()


def is_postgres(url: str) -> bool:
    return urlsplit(url).scheme in {"postgres", "postgresql", "pgsql", "postgis"}


def database_url(server_url: str, name: str) -> str:
    """The URL of database `name` on the server of `server_url`."""
    return urlsplit(server_url)._replace(path=f"/{name}").geturl()


def bench_database_name(server_url: str, suffix: str, override: str = "") -> str:
    """The throwaway database's name: `override` if given, else the database `server_url`
    names with `suffix` appended (`perf` gives `perf_serve_bench`), so that benchmarks run
    against different databases of one server never drop each other's."""
    base = override or f"{urlsplit(server_url).path.lstrip('/') or 'stepwise'}_{suffix}"
    name = re.sub(r"[^a-z0-9_]", "_", base.lower())[:63]
    if not name or name[0].isdigit():
        name = f"b_{name}"[:63]
    return name


def recreate_database(server_url: str, name: str, *, create: bool = True) -> str:
    """Drop database `name` on the server of `server_url`, create it empty unless
    `create` is false, and return its URL."""
    import psycopg2

    # libpq understands postgres:// URIs itself, so the developer's URL is used as is; a
    # database it names that does not exist yet is fine: the server's `postgres` one serves.
    try:
        conn = psycopg2.connect(server_url)
    except psycopg2.OperationalError as exc:
        if "does not exist" not in str(exc):
            raise
        conn = psycopg2.connect(database_url(server_url, "postgres"))
    conn.autocommit = True  # CREATE/DROP DATABASE cannot run inside a transaction
    try:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {name}")
            if create:
                cur.execute(f"CREATE DATABASE {name}")
    finally:
        conn.close()
    return database_url(server_url, name)


@contextmanager
def throwaway_django(name: str) -> Iterator[Path]:
    """Django set up on database `name` of `DATABASE_URL`'s PostgreSQL server (dropped
    afterwards), or on a SQLite file; yields a temporary directory for the benchmark's files
    (removed afterwards)."""
    server_url = os.environ.get("DATABASE_URL", "")
    postgres = is_postgres(server_url)
    with tempfile.TemporaryDirectory(prefix=f"{name}-") as tmp:
        tmpdir = Path(tmp)
        url = recreate_database(server_url, name) if postgres else f"sqlite:///{tmpdir}/db.sqlite3"
        try:
            setup_django(url)
            yield tmpdir
        finally:
            if postgres:
                from django.db import connections

                connections.close_all()  # DROP DATABASE refuses while we are connected
                recreate_database(server_url, name, create=False)


# --- memory -------------------------------------------------------------------------------


def _proc_status_mb(field: str) -> float | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(f"{field}:"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return None


def peak_rss_mb() -> float:
    """This process's peak RSS.

    Linux's ru_maxrss survives execve: a child started by a parent holding 500 MB reports
    at least 500 MB however little it uses itself. VmHWM belongs to the process's own
    address space, which exec replaces, so it isolates the phase; ru_maxrss (KiB on Linux)
    is only the fallback where /proc is absent.
    """
    hwm = _proc_status_mb("VmHWM")
    return hwm if hwm is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def current_rss_mb() -> float:
    rss = _proc_status_mb("VmRSS")
    return rss if rss is not None else peak_rss_mb()


def reset_peak_rss() -> bool:
    """Start this process's peak RSS afresh (Linux: clear_refs 5 resets VmHWM), so that a
    phase after setup reports its own peak. False where that is not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return False
    return True
