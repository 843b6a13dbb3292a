"""Benchmark: every page and list API a researcher and an admin reach, at PRM800K's size.

    DATABASE_URL=postgres://… python bench/pages.py [--solutions 100000] [--pool 1000000]
                                                  [--reuse-db] [--rounds 20] [--database NAME]

Loads the database once with `bench/export.py --keep-db` (100,000 labeled solutions, about a
million step ratings; `--reuse-db` skips that and uses the kept one), migrates it, and with
`--pool N` tops the pool up to N solutions with unlabeled, scored ones (a team sampling 100 per
MATH problem holds a million). Then it starts the Procfile's web server on the database, logs
in a researcher and an admin, and times every page of the URL tree that takes no argument and
answers them (plus the searches of issue 44 and the admin's changelist searches) through the
server, one request at a time: the first look apart (it may fill what later looks read, such
as the quality figures' tallies, labeling/tallies.py), then p50 and p95 of `--rounds` more.
Prints the table and exits non-zero when a p95 misses the target (300 ms; 1 s with a pool
over 100,000); docs/benchmarks.md ("Pages at PRM800K size") holds a dated run.
"""

import argparse
import os
import random
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.benchdb import database_url, is_postgres, setup_django  # noqa: E402
from bench.export import BENCH_DB, kept_sqlite_path  # noqa: E402
from bench.serve import free_port, start_server, stop_server  # noqa: E402

PASSWORD = "bench-pages-pw-1"
TARGET_MS = 300.0
POOL_TARGET_MS = 1000.0  # with a pool of a million (issue 44)
# No page to time: leaving, the API's schema (static, large), and the downloads of every label
# (the export's own benchmark is bench/export.py).
SKIPPED = ("accounts/logout/", "api/schema/", "api/labels/export/", "api/answer-reviews/export/")
SEARCHES = (
    "/problems/?q=frac",
    "/problems/?q=15%25",
    "/solutions/?q=frac",
    "/solutions/?q=15%25+of",
    "/solutions/?q=zzzz-no-match",
    "/admin/labeling/problem/?q=frac",
    "/admin/labeling/solution/?q=frac",
)
STORE_CHUNK = 5_000


# ---------------------------------------------------------------------------------------------
# The database


def load(*, solutions: int, database: str) -> None:
    """The 100k database, as bench/export.py keeps it (its own targets are its own report)."""
    command = [
        sys.executable,
        str(REPO / "bench" / "export.py"),
        "--keep-db",
        "--solutions",
        str(solutions),
        "--database",
        database,
    ]
    print("loading with bench/export.py --keep-db ...", file=sys.stderr)
    subprocess.run(command, cwd=REPO, check=False)


def top_up_pool(pool: int) -> int:
    """Add unlabeled, scored solutions until the pool holds `pool`; how many were added."""
    from django.db import connection

    from labeling.models import Problem, Solution, solution_digest

    have = Solution.objects.count()
    if have >= pool:
        return 0
    rng = random.Random(pool)
    problems = list(Problem.objects.values_list("pk", flat=True))
    added = 0
    print(f"adding {pool - have:,} unlabeled solutions ...", file=sys.stderr)
    while have + added < pool:
        batch = []
        for i in range(min(STORE_CHUNK, pool - have - added)):
            n = have + added + i
            steps = [f"Step {k} of pooled solution {n}: $x^{k}$ grows." for k in range(6)]
            answer = str(rng.randint(0, 999))
            batch.append(
                Solution(
                    problem_id=rng.choice(problems),
                    steps=steps + [f"# Answer\n\n{answer}"],
                    answer=answer,
                    content_hash=solution_digest(steps=steps, answer=answer),
                    is_correct=rng.random() < 0.4,
                    source="pool-model",
                    prm_score=rng.random(),
                )
            )
        Solution.objects.bulk_create(batch)
        added += len(batch)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return added


def users() -> dict[str, str]:
    """A researcher and an admin (as the demo makes them); role -> username."""
    from django.contrib.auth.models import Group, User

    from core.roles import sync_role_groups
    from labeling.models import Labeler

    sync_role_groups()
    names = {}
    for role in ("researcher", "admin"):
        username = f"bench-pages-{role}"
        user, _ = User.objects.get_or_create(username=username)
        user.set_password(PASSWORD)
        user.is_staff = user.is_superuser = role == "admin"
        user.save()
        user.groups.set([Group.objects.get(name=role)])
        Labeler.objects.get_or_create(user=user)
        names[role] = username
    return names


# ---------------------------------------------------------------------------------------------
# The pages


def paths() -> list[str]:
    """Every named route of the URL tree that takes no argument, as a path, then the searches."""
    from django.urls import URLPattern, URLResolver, get_resolver

    def walk(patterns, prefix=""):
        for p in patterns:
            if isinstance(p, URLResolver):
                yield from walk(p.url_patterns, prefix + str(p.pattern))
            elif isinstance(p, URLPattern) and p.name:
                yield prefix + str(p.pattern)

    found = []
    for route in walk(get_resolver().url_patterns):
        route = route.replace("^", "").replace("$", "")
        if any(c in route for c in "<(\\[?*+") or route.startswith(SKIPPED):
            continue
        if f"/{route}" not in found:
            found.append(f"/{route}")
    return found + list(SEARCHES)


class Client:
    def __init__(self, base: str, username: str):
        import requests

        self.base, self.http = base, requests.Session()
        self.http.get(f"{base}/accounts/login/")
        response = self.http.post(
            f"{base}/accounts/login/",
            data={
                "username": username,
                "password": PASSWORD,
                "csrfmiddlewaretoken": self.http.cookies.get("csrftoken", ""),
            },
            allow_redirects=False,
        )
        if response.status_code != 302:
            raise SystemExit(f"{username} could not log in: {response.status_code}")

    def time(self, path: str) -> tuple[int, float]:
        start = time.perf_counter()
        response = self.http.get(self.base + path, allow_redirects=False, timeout=120)
        return response.status_code, (time.perf_counter() - start) * 1000


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def time_pages(clients: dict[str, Client], rounds: int, only: str = "") -> list[tuple]:
    rows = []
    for path in [path for path in paths() if only in path]:
        for role, client in clients.items():
            status, first = client.time(path)
            if status != 200:
                continue  # not this role's page, a POST-only one, or a redirect
            times = [client.time(path)[1] for _ in range(rounds)]
            rows.append((path, role, first, percentile(times, 0.5), percentile(times, 0.95)))
            print(f"{role:10} {path}: p95 {rows[-1][-1]:.0f} ms", file=sys.stderr)
    return rows


def report(rows: list[tuple], *, target_ms: float, title: str) -> bool:
    print(f"\n{title}")
    header = ("page", "role", "first ms", "p50 ms", "p95 ms", "")
    cells = [header] + [
        (path, role, f"{first:.0f}", f"{p50:.0f}", f"{p95:.0f}", "" if p95 < target_ms else "SLOW")
        for path, role, first, p50, p95 in rows
    ]
    widths = [max(len(str(row[i])) for row in cells) for i in range(len(header))]
    for row in cells:
        print("  ".join(str(cell).ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    slow = [row for row in rows if row[4] >= target_ms]
    print(f"{len(rows)} pages timed; {len(slow)} with p95 over {target_ms:.0f} ms")
    return not slow


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--solutions", type=int, default=100_000, help="labeled solutions")
    parser.add_argument("--pool", type=int, default=0, help="top the pool up to this many")
    parser.add_argument("--reuse-db", action="store_true", help="use the kept database as is")
    parser.add_argument("--rounds", type=int, default=20, help="timed requests per page")
    parser.add_argument("--database", default=BENCH_DB, help=f"default {BENCH_DB}")
    parser.add_argument("--only", default="", help="time only the paths containing this")
    args = parser.parse_args()

    server_url = os.environ.get("DATABASE_URL", "")
    if not args.reuse_db:
        load(solutions=args.solutions, database=args.database)
    if is_postgres(server_url):
        db = database_url(server_url, args.database)
    else:
        db = f"sqlite:///{kept_sqlite_path()}"
    setup_django(db)
    from django.core.management import call_command
    from django.db import connections

    call_command("migrate", verbosity=0, interactive=False)
    added = top_up_pool(args.pool) if args.pool else 0
    names = users()
    from labeling.models import LabelingSession, SessionTally

    # The quality figures' tallies are filled on the first look after an import: timed as such.
    SessionTally.objects.all().delete()
    LabelingSession.objects.update(tallied_version=None)
    connections.close_all()

    port = free_port()
    process = start_server(
        database_url=db,
        port=port,
        # The refusals of pages a role may not see are expected: no tracebacks in the output.
        env={"DJANGO_SETTINGS_MODULE": "annotate.settings", "LOG_LEVEL": "CRITICAL"},
    )
    try:
        base = f"http://127.0.0.1:{port}"
        clients = {role: Client(base, username) for role, username in names.items()}
        # The first look after the import counts every label's tally (and marks 100,000
        # labels): timed on its own. Then what autovacuum does within a minute of that many
        # updates, so that the pages are timed as a team meets them from then on.
        _, recount = clients["researcher"].time("/quality/")
        print(f"first look at /quality/ after the import (every tally counted): {recount:.0f} ms")
        if is_postgres(server_url):
            from django.db import connection

            with connection.cursor() as cursor:
                cursor.execute("VACUUM ANALYZE labeling_labelingsession")
                cursor.execute("VACUUM ANALYZE labeling_sessiontally")
            connections.close_all()
        rows = time_pages(clients, args.rounds, args.only)
    finally:
        stop_server(process)
    from labeling.models import Solution

    pool = Solution.objects.count()
    target = POOL_TARGET_MS if pool > 100_000 else TARGET_MS
    backend = "PostgreSQL" if is_postgres(server_url) else "SQLite"
    title = (
        f"stepwise pages ({backend}, {pool:,} solutions, {added:,} added unlabeled; "
        f"{args.rounds} timed requests each after a first look; {time.strftime('%Y-%m-%d %H:%M')})"
    )
    return 0 if report(rows, target_ms=target, title=title) else 1


if __name__ == "__main__":
    sys.exit(main())
