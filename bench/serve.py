"""Benchmark: the workbench as `make run` serves it, on PostgreSQL, under simulated labelers.

    DATABASE_URL=postgres://user@host:5432/any python bench/serve.py [--labelers 20] [--seconds 60]

On the PostgreSQL server of `DATABASE_URL` it creates (and afterwards drops) a database named
after the URL's (`<name>_serve_bench`, or `--database`: two runs on one server must use
different ones), migrates it and seeds `--solutions` solutions (some with alternative
completions, a few quality-control ones served to everybody), the first `--labeled` of them
already labeled by earlier labelers (a pool in use: the queues start past them), and runs
`ANALYZE`. It starts the Procfile's web
server (`annotate/server.py`) on a free port of 127.0.0.1 and runs `--labelers` simulated
labelers at once, each in its own thread with its own HTTP session: log in, open the next
session, rate its steps one at a time with realistic decisions (mostly +1, some 0, the odd -1
that ends the solution, alternatives after a -1, now and then going back to change a rating or
taking back a -1), submit, and carry on with the next session that the submission returned (the
workbench's prefetch), for `--seconds`. No think time by default: every labeler sends its next
request as soon as the last answers, so the figures are the server's capacity at that
concurrency (and requests/s against the floor's compares capacities), not a day's real load;
with `--think-ms` the load is paced and the latencies are the figures to compare. Labelers
start at random moments within the first `--arrive-within` seconds (default 5), not all in one
instant.

Then the **floor**: the same labelers, logged in the same way and with the same think time,
POST for `--floor-seconds` to a bare view that does one INSERT (in `bench/serve_urls.py`, a
bench-only URLconf; the app's URLs do not have it). The report gives requests/s and
p50/p95/p99 latency per endpoint, errors, and the ratios against the floor, then checks
consistency in the database: every acknowledged rating is stored exactly once with its last
acknowledged value (nothing lost, nothing extra), every acknowledged submission is stored,
and no non-QC solution was ever held by two labelers at once. Exits non-zero if a check
fails or any request errs.

One file over 500 lines on purpose: a benchmark is one command, and its setup, labelers,
floor and checks read best together.
"""

import argparse
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.benchdb import bench_database_name, is_postgres, throwaway_django  # noqa: E402

BENCH_DB_SUFFIX = "serve_bench"
PASSWORD = "bench-labeler-pw-1"
# The targets at 32 labelers on a quiet machine (issue 27): a rating's p99 under 50 ms and
# within 3x the floor's p99, a submission's p99 under 100 ms; at least half the floor's
# throughput (since the first serving issue).
RATING_P99_TARGET_MS = 50.0
RATING_P99_PER_FLOOR_P99 = 3.0
SUBMIT_P99_TARGET_MS = 100.0
FLOOR_SHARE_TARGET = 0.5
SUBMIT = "POST submit (+ next session)"
TIMEOUT_S = 30.0

ACTIVE = re.compile(r'data-item="s(\d+)(?:c(\d+))?"\s+data-(?:step|completion)="\d+"\s+data-active')
OUTCOME = re.compile(r'name="finish_reason" value="(found_error|solution)"')
SESSION = re.compile(r'id="workbench" data-session="(\d+)"')


# ---------------------------------------------------------------------------------------------
# The throwaway database


def seed(*, solutions: int, labelers: int, rng: random.Random, labeled: int = 0) -> None:
    """Labelers with one password, problems, and solutions of 3-10 steps, the first `labeled`
    of the shared ones labeled already."""
    from django.contrib.auth.hashers import make_password
    from django.contrib.auth.models import Group, User
    from django.core.management import call_command
    from django.db import connection

    from labeling.models import Labeler, Problem, Solution, solution_digest, text_digest

    call_command("migrate", verbosity=0)
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TABLE bench_floor (id bigserial PRIMARY KEY, user_id integer NOT NULL, "
            "value text NOT NULL, created_at timestamptz NOT NULL DEFAULT now())"
        )
    group, _ = Group.objects.get_or_create(name="annotator")
    password = make_password(PASSWORD)  # hashed once: PBKDF2 per user would take minutes
    users = User.objects.bulk_create(
        [User(username=f"labeler{i:03d}", password=password) for i in range(labelers)]
    )
    group.user_set.add(*users)
    Labeler.objects.bulk_create([Labeler(user=u) for u in users])

    problems = []
    for i in range(max(solutions // 8, 1)):
        text = f"Bench problem {i}: what is ${i} + {i}$?"
        problems.append(Problem(text=text, text_hash=text_digest(text), answer=str(2 * i)))
    Problem.objects.bulk_create(problems, batch_size=1000)
    rows = []
    for n in range(solutions):
        problem = problems[n % len(problems)]
        steps = [f"Step {s + 1} of solution {n}: $x_{s} = {s}$." for s in range(rng.randint(2, 9))]
        steps.append(f"# Answer\n\n{n % 7}")
        alternatives = {}
        if rng.random() < 0.25:
            at = rng.randrange(len(steps))
            alternatives = {str(at): [f"Another step {at + 1}, take {k}." for k in range(2)]}
        rows.append(
            Solution(
                problem=problem,
                steps=steps,
                answer=str(n % 7),
                content_hash=solution_digest(steps=steps, answer=str(n % 7)),
                is_correct=rng.random() < 0.5,
                source="bench",
                alternatives=alternatives,
                # A few quality-control solutions: served to every labeler, held by many.
                is_quality_control=n < 3,
            )
        )
    Solution.objects.bulk_create(rows, batch_size=1000)
    seed_history(labeled=labeled, rng=rng)
    with connection.cursor() as cursor:
        # The statistics autovacuum keeps on a live database (it would get to a table this
        # new only after a minute or so): the planner's choices are the steady state's.
        cursor.execute("ANALYZE")
    connection.close()


HISTORY_LABELERS = 4
HISTORY_PREFIX = "earlier"


def seed_history(*, labeled: int, rng: random.Random) -> None:
    """The first `labeled` shared solutions (in the leftover queue's order), each labeled by
    one of a few earlier labelers, with step labels and ratings, counted as an import counts
    them. A pool in use holds such labels: the queues start past them, and the planner's
    statistics describe sessions and ratings that exist (`ANALYZE` of empty tables would
    plan for none all through the run)."""
    from datetime import timedelta

    from django.contrib.auth.models import User
    from django.utils import timezone

    from labeling.models import Labeler, LabelingSession, Solution, StepLabel, StepRating
    from labeling.services import workbench

    if labeled <= 0:
        return
    users = User.objects.bulk_create(
        [User(username=f"{HISTORY_PREFIX}{i:02d}", password="!") for i in range(HISTORY_LABELERS)]
    )
    earlier = Labeler.objects.bulk_create([Labeler(user=u) for u in users])
    solutions = list(
        Solution.objects.filter(is_quality_control=False, is_screening=False)
        .order_by("id")
        .values_list("pk", "steps")[:labeled]
    )
    start = timezone.now() - timedelta(days=30)
    sessions = LabelingSession.objects.bulk_create(
        [
            LabelingSession(
                labeler=earlier[n % HISTORY_LABELERS],
                solution_id=pk,
                queue="leftover",
                slot=0,
                started_at=start + timedelta(minutes=n),
                last_activity_at=start + timedelta(minutes=n + 1),
                lease_expires_at=start + timedelta(minutes=n + 1),
                submitted_at=start + timedelta(minutes=n + 1),
                total_time=60_000,
                finish_reason="solution",
            )
            for n, (pk, _) in enumerate(solutions)
        ],
        batch_size=1000,
    )
    rated = [
        (StepLabel(session=session, index=i, chosen_completion=0), text)
        for session, (_, texts) in zip(sessions, solutions, strict=True)
        for i, text in enumerate(texts)
    ]
    StepLabel.objects.bulk_create([step for step, _ in rated], batch_size=2000)
    StepRating.objects.bulk_create(
        [
            StepRating(step=step, completion_index=0, text=text, rating=rng.choice((0, 1, 1, 1)))
            for step, text in rated
        ],
        batch_size=2000,
    )
    workbench.recount_labels(solutions=Solution.objects.filter(pk__in=[pk for pk, _ in solutions]))


# ---------------------------------------------------------------------------------------------
# The web server


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def procfile_web_command() -> str:
    """The Procfile's `web:` command: the benchmark serves the app as `make run` does."""
    for line in (REPO / "Procfile").read_text().splitlines():
        name, _, command = line.partition(":")
        if name.strip() == "web":
            return command.strip()
    raise SystemExit("the Procfile has no web: line")


def start_server(
    *,
    database_url: str,
    port: int,
    threads: int | None = None,
    processes: int | None = None,
    env: dict[str, str] | None = None,
):
    """The Procfile's web server on 127.0.0.1:`port`, answering; `env` overrides the
    environment below. `threads` and `processes` set WEB_THREADS and WEB_PROCESSES
    (annotate/server.py's defaults without)."""
    env = (
        dict(
            os.environ,
            DATABASE_URL=database_url,
            DJANGO_SETTINGS_MODULE="bench.serve_settings",
            DEBUG="false",
            LOG_LEVEL="WARNING",
            # Nothing the views might enqueue must reach the developer's real workers.
            CELERY_BROKER_URL="memory://",
            PYTHONPATH=str(REPO),
            PORT=str(port),
            # As `make run` does: this interpreter's environment's commands first.
            PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        )
        | ({"WEB_THREADS": str(threads)} if threads else {})
        | ({"WEB_PROCESSES": str(processes)} if processes else {})
        | (env or {})
    )
    process = subprocess.Popen(["sh", "-c", f"exec {procfile_web_command()}"], cwd=REPO, env=env)
    import requests

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the web server exited with {process.returncode}")
        try:
            if requests.get(f"http://127.0.0.1:{port}/accounts/login/", timeout=2).ok:
                return process
        except requests.RequestException:
            pass
        time.sleep(0.2)
    process.terminate()
    raise SystemExit("the web server did not answer within 60 s")


def stop_server(process) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


# ---------------------------------------------------------------------------------------------
# Simulated labelers


@dataclass
class Expected:
    """What the server acknowledged for one session, replaying the workbench's rules."""

    ratings: dict[tuple[int, int], int] = field(default_factory=dict)
    finish_reason: str = ""
    uncertain: bool = False  # a request to it failed without an answer

    def rated(self, step: int, completion: int, rating: int) -> None:
        self.ratings[(step, completion)] = rating
        if completion:
            return
        if rating == -1:
            # The label stops at the error: later steps (and their alternatives) go.
            for key in [k for k in self.ratings if k[0] > step]:
                del self.ratings[key]
        else:
            for key in [k for k in self.ratings if k[0] == step and k[1] > 0]:
                del self.ratings[key]


class Stats:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.latencies: dict[str, list[float]] = defaultdict(list)
        self.errors: dict[str, int] = defaultdict(int)
        self.error_examples: list[str] = []

    def add(self, endpoint: str, seconds: float, ok: bool, detail: str = "") -> None:
        with self.lock:
            self.latencies[endpoint].append(seconds)
            if not ok:
                self.errors[endpoint] += 1
                if len(self.error_examples) < 5:
                    self.error_examples.append(f"{endpoint}: {detail}"[:300])


class Labeler:
    def __init__(
        self,
        *,
        base: str,
        username: str,
        rng: random.Random,
        think_s: float,
        arrive_within_s: float = 0.0,
    ) -> None:
        import requests

        self.base = base
        self.username = username
        self.rng = rng
        self.think_s = think_s
        self.arrive_within_s = arrive_within_s
        self.http = requests.Session()
        self.sessions: dict[int, Expected] = {}
        self.stats: Stats | None = None

    # -- HTTP ----------------------------------------------------------------------------------

    def request(self, endpoint: str, method: str, path: str, expect: int, **kwargs):
        import requests

        headers = kwargs.pop("headers", {})
        if method == "POST":
            headers["X-CSRFToken"] = self.http.cookies.get("csrftoken", "")
        start = time.perf_counter()
        try:
            response = self.http.request(
                method,
                self.base + path,
                headers=headers,
                allow_redirects=False,
                timeout=TIMEOUT_S,
                **kwargs,
            )
        except requests.RequestException as exc:
            if self.stats:
                self.stats.add(endpoint, time.perf_counter() - start, False, repr(exc))
            return None
        ok = response.status_code == expect
        if self.stats:
            detail = f"{response.status_code} {response.text[:200]}"
            self.stats.add(endpoint, time.perf_counter() - start, ok, detail)
        return response if ok else None

    def log_in(self) -> None:
        self.http.get(self.base + "/accounts/login/", timeout=TIMEOUT_S)
        response = self.http.post(
            self.base + "/accounts/login/",
            data={
                "username": self.username,
                "password": PASSWORD,
                "csrfmiddlewaretoken": self.http.cookies.get("csrftoken", ""),
            },
            allow_redirects=False,
            timeout=TIMEOUT_S,
        )
        if response.status_code != 302:
            raise RuntimeError(f"{self.username} could not log in: {response.status_code}")

    # -- the labeling loop ---------------------------------------------------------------------

    def think(self) -> None:
        if self.think_s:
            time.sleep(self.rng.expovariate(1 / self.think_s))

    def run(self, stats: Stats, deadline: float) -> None:
        self.stats = stats
        # Labelers start their day at different moments, not all in the same millisecond.
        time.sleep(self.rng.uniform(0, self.arrive_within_s))
        response = self.request("GET /label/ (next session)", "GET", "/label/", 302)
        if response is None:
            return
        session_id = int(response.headers["Location"].rstrip("/").rsplit("/", 1)[1])
        page = self.request("GET /label/<id>/ (page)", "GET", f"/label/{session_id}/", 200)
        html = page.text if page is not None else None
        while html is not None and time.monotonic() < deadline:
            html = self.label(session_id, html, deadline)
            if html is None:
                return
            match = SESSION.search(html)
            if match is None:
                return  # nothing left to label
            session_id = int(match.group(1))

    def rate(self, session_id: int, step: int, completion: int, rating: int) -> str | None:
        expected = self.sessions.setdefault(session_id, Expected())
        response = self.request(
            "POST rate",
            "POST",
            f"/label/{session_id}/rate/",
            200,
            data={
                "step_index": step,
                "completion_index": completion,
                "rating": rating,
                "flagged": "1" if self.rng.random() < 0.05 else "",
            },
        )
        if response is None:
            expected.uncertain = True
            return None
        expected.rated(step, completion, rating)
        return response.text

    def label(self, session_id: int, html: str, deadline: float) -> str | None:
        """Rate one session to its end and submit it; return the next session's HTML."""
        self.sessions.setdefault(session_id, Expected())
        if self.rng.random() < 0.01:
            return self.submit(session_id, "give_up", reason="Too long for today.")
        while time.monotonic() < deadline:
            outcome = OUTCOME.search(html)
            active = ACTIVE.search(html)
            if outcome and not active:
                if outcome.group(1) == "found_error" and self.rng.random() < 0.1:
                    # Took back the -1 (on second thought the step was fine): steps re-open.
                    error_step = max(
                        (
                            s
                            for (s, c), r in self.sessions[session_id].ratings.items()
                            if c == 0 and r == -1
                        ),
                        # A session resumed after a failed request may show a -1 whose
                        # acknowledgement was lost: there is nothing known to take back.
                        default=None,
                    )
                    if error_step is None:
                        return self.submit(session_id, outcome.group(1))
                    html = self.rate(session_id, error_step, 0, 0)
                    if html is None:
                        return None
                    continue
                return self.submit(session_id, outcome.group(1))
            if active is None:
                return None
            step, completion = int(active.group(1)), int(active.group(2) or 0)
            self.think()
            roll = self.rng.random()
            rating = -1 if roll < 0.08 else 0 if roll < 0.23 else 1
            if completion:
                rating = self.rng.choice((-1, 0, 1))
            html = self.rate(session_id, step, completion, rating)
            if html is None:
                return None
            if step > 0 and not completion and rating != -1 and self.rng.random() < 0.08:
                # Going back to change the previous step between 0 and +1.
                previous = self.sessions[session_id].ratings.get((step - 1, 0))
                html = self.rate(session_id, step - 1, 0, 1 if previous == 0 else 0)
                if html is None:
                    return None
        return None

    def submit(self, session_id: int, finish_reason: str, reason: str = "") -> str | None:
        self.think()
        response = self.request(
            SUBMIT,
            "POST",
            f"/label/{session_id}/submit/",
            200,
            data={"finish_reason": finish_reason, "reason": reason},
            headers={"HX-Request": "true"},
        )
        if response is None:
            self.sessions[session_id].uncertain = True
            return None
        self.sessions[session_id].finish_reason = finish_reason
        return response.text

    def run_floor(self, stats: Stats, deadline: float) -> None:
        self.stats = stats
        n = 0
        while time.monotonic() < deadline:
            n += 1
            self.think()
            self.request("POST floor (one INSERT)", "POST", "/bench/floor/", 204, data={"value": n})


def run_threads(labelers: list[Labeler], target: str, seconds: float) -> tuple[Stats, float]:
    stats = Stats()
    start = time.monotonic()
    deadline = start + seconds
    threads = [
        threading.Thread(target=getattr(labeler, target), args=(stats, deadline))
        for labeler in labelers
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return stats, time.monotonic() - start


# ---------------------------------------------------------------------------------------------
# Consistency


def check_consistency(labelers: list[Labeler]) -> list[tuple[str, bool, str]]:
    from labeling.models import LabelingSession, StepRating

    expected = {sid: e for labeler in labelers for sid, e in labeler.sessions.items()}
    stored: dict[int, dict[tuple[int, int], int]] = defaultdict(dict)
    duplicates = 0
    for session_id, index, completion, rating in StepRating.objects.filter(
        step__session_id__in=list(expected)
    ).values_list("step__session_id", "step__index", "completion_index", "rating"):
        if (index, completion) in stored[session_id]:
            duplicates += 1
        stored[session_id][(index, completion)] = rating
    certain = {sid: e for sid, e in expected.items() if not e.uncertain}
    wrong = [sid for sid, e in certain.items() if stored.get(sid, {}) != e.ratings]
    acknowledged = sum(len(e.ratings) for e in certain.values())

    finished = dict(
        LabelingSession.objects.filter(
            pk__in=list(certain), submitted_at__isnull=False
        ).values_list("pk", "finish_reason")
    )
    lost_submits = [
        sid
        for sid, e in certain.items()
        if e.finish_reason and finished.get(sid) != e.finish_reason
    ]
    unexpected_submits = [
        sid for sid, e in certain.items() if not e.finish_reason and sid in finished
    ]

    # No non-QC solution held by two labelers at once: its sessions' spans never overlap (the
    # earlier labelers' labels included: a solution they labeled is not served again).
    overlaps = 0
    spans = defaultdict(list)
    served = set()
    for solution_id, username, start, submitted, abandoned in LabelingSession.objects.filter(
        is_quality_control=False, is_screening=False
    ).values_list(
        "solution_id", "labeler__user__username", "started_at", "submitted_at", "abandoned_at"
    ):
        spans[solution_id].append((start, submitted or abandoned, username))
        if not username.startswith(HISTORY_PREFIX):
            served.add(solution_id)
    for sessions in spans.values():
        sessions.sort(key=lambda s: s[0])
        for (_, end, a), (start, _, b) in zip(sessions, sessions[1:], strict=False):
            if a != b and (end is None or end > start):
                overlaps += 1
    uncertain = len(expected) - len(certain)
    return [
        (
            "every acknowledged rating stored exactly once, with its last value",
            not wrong and not duplicates,
            f"{acknowledged:,} ratings in {len(certain):,} sessions; {len(wrong)} sessions "
            f"differ, {duplicates} duplicates"
            + (f"; {uncertain} sessions skipped after a failed request" if uncertain else ""),
        ),
        (
            "every acknowledged submission stored, nothing else submitted",
            not lost_submits and not unexpected_submits,
            f"{sum(1 for e in certain.values() if e.finish_reason):,} submitted; "
            f"{len(lost_submits)} lost, {len(unexpected_submits)} unexpected",
        ),
        (
            "no non-QC solution held by two labelers at once",
            overlaps == 0,
            f"{len(served):,} non-QC solutions served, {overlaps} overlapping holds",
        ),
    ]


# ---------------------------------------------------------------------------------------------
# Report


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def table(stats: Stats, seconds: float) -> list[list[str]]:
    rows = []
    for endpoint, values in stats.latencies.items():
        rows.append(
            [
                endpoint,
                f"{len(values):,}",
                f"{len(values) / seconds:.1f}",
                f"{percentile(values, 0.50):.1f}",
                f"{percentile(values, 0.95):.1f}",
                f"{percentile(values, 0.99):.1f}",
                str(stats.errors.get(endpoint, 0)),
            ]
        )
    return rows


def print_table(rows: list[list[str]]) -> None:
    header = ["endpoint", "requests", "req/s", "p50 ms", "p95 ms", "p99 ms", "errors"]
    rows = [header, *rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    for row in rows:
        print(
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w)
                for i, (c, w) in enumerate(zip(row, widths, strict=True))
            )
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--labelers", type=int, default=20, help="concurrent simulated labelers")
    parser.add_argument("--seconds", type=float, default=60.0, help="length of the labeling run")
    parser.add_argument("--floor-seconds", type=float, default=20.0, help="length of the floor run")
    parser.add_argument("--solutions", type=int, default=10_000, help="solutions to seed")
    parser.add_argument(
        "--labeled",
        type=int,
        default=3_000,
        help="of them, how many are labeled already (by earlier labelers)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="the web server's threads (default: annotate/server.py's)",
    )
    parser.add_argument(
        "--processes",
        type=int,
        default=None,
        help="the web server's processes (default: annotate/server.py's, one per core)",
    )
    parser.add_argument(
        "--think-ms", type=float, default=0.0, help="mean pause before each rating (default none)"
    )
    parser.add_argument(
        "--arrive-within",
        type=float,
        default=5.0,
        help="labelers start at random moments within this many seconds (0: all at once)",
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--database",
        default="",
        help="the throwaway database's name (default: DATABASE_URL's, with _serve_bench)",
    )
    args = parser.parse_args()

    server_url = os.environ.get("DATABASE_URL", "")
    if not is_postgres(server_url):
        print(
            "bench/serve.py needs DATABASE_URL=postgres://… (a server it may create a "
            f"database on); got {server_url or 'nothing'}",
            file=sys.stderr,
        )
        return 2
    rng = random.Random(args.seed)
    from annotate.server import MAX_DEFAULT_PROCESSES, THREADS

    # What the server will run (PostgreSQL: one per core up to its cap, unless set).
    processes = args.processes or int(
        os.environ.get("WEB_PROCESSES") or min(os.cpu_count() or 1, MAX_DEFAULT_PROCESSES)
    )

    with throwaway_django(bench_database_name(server_url, BENCH_DB_SUFFIX, args.database)):
        # setup_django pointed DATABASE_URL at the throwaway database: the server serves it too.
        database_url = os.environ["DATABASE_URL"]
        started = time.monotonic()
        seed(solutions=args.solutions, labelers=args.labelers, rng=rng, labeled=args.labeled)
        print(
            f"seeded {args.solutions:,} solutions ({args.labeled:,} labeled already) and "
            f"{args.labelers} labelers in {time.monotonic() - started:.1f} s",
            file=sys.stderr,
        )
        port = free_port()
        process = start_server(
            database_url=database_url,
            port=port,
            threads=args.threads,
            processes=args.processes,
        )
        try:
            base = f"http://127.0.0.1:{port}"
            labelers = [
                Labeler(
                    base=base,
                    username=f"labeler{i:03d}",
                    rng=random.Random(args.seed * 1000 + i),
                    think_s=args.think_ms / 1000,
                    arrive_within_s=args.arrive_within,
                )
                for i in range(args.labelers)
            ]
            logins = [threading.Thread(target=labeler.log_in) for labeler in labelers]
            for thread in logins:
                thread.start()
            for thread in logins:
                thread.join()

            print(
                f"labeling for {args.seconds:.0f} s with {args.labelers} labelers…",
                file=sys.stderr,
            )
            app, app_s = run_threads(labelers, "run", args.seconds)
            print(f"floor for {args.floor_seconds:.0f} s…", file=sys.stderr)
            floor, floor_s = run_threads(labelers, "run_floor", args.floor_seconds)
        finally:
            stop_server(process)
        checks = check_consistency(labelers)

    app_requests = sum(len(v) for v in app.latencies.values())
    app_errors = sum(app.errors.values())
    floor_requests = sum(len(v) for v in floor.latencies.values())
    floor_errors = sum(floor.errors.values())
    ratings = len(app.latencies.get("POST rate", []))
    all_app = [x for v in app.latencies.values() for x in v]
    floor_latencies = floor.latencies.get("POST floor (one INSERT)", [])
    app_rps = app_requests / app_s
    floor_rps = floor_requests / floor_s
    rate_p99 = percentile(app.latencies.get("POST rate", [0.0]), 0.99)
    app_p99 = percentile(all_app or [0.0], 0.99)

    print(
        f"\nstepwise serve benchmark: the Procfile's web server ({procfile_web_command()}, "
        f"{processes} processes of {args.threads or THREADS} threads), PostgreSQL, "
        f"{args.labelers} labelers, {app_s:.0f} s labeling + {floor_s:.0f} s floor, "
        f"think time {args.think_ms:.0f} ms"
    )
    print_table(table(app, app_s) + table(floor, floor_s))
    print(
        f"labeling: {app_rps:.1f} requests/s ({ratings / app_s:.1f} ratings/s), "
        f"p50 {percentile(all_app or [0.0], 0.5):.1f} ms, p99 {app_p99:.1f} ms, "
        f"{app_errors} errors"
    )
    print(
        f"floor:    {floor_rps:.1f} requests/s, p50 {percentile(floor_latencies or [0.0], 0.5):.1f}"
        f" ms, p99 {percentile(floor_latencies or [0.0], 0.99):.1f} ms, {floor_errors} errors"
    )
    share = app_rps / floor_rps if floor_rps else 0.0
    floor_p50 = percentile(floor_latencies or [0.0], 0.5)
    rate_p50 = percentile(app.latencies.get("POST rate", [0.0]), 0.5)
    print(
        f"labeling requests/s / floor requests/s: {share:.2f}; rating p50 / floor p50: "
        f"{rate_p50 / floor_p50 if floor_p50 else 0.0:.1f}x"
    )
    floor_p99 = percentile(floor_latencies or [0.0], 0.99)
    submit_p99 = percentile(app.latencies.get(SUBMIT, [0.0]), 0.99)

    def verdict(ok: bool) -> str:
        return "met" if ok else "missed"

    print(
        f"targets (at 32 labelers, quiet machine): rating p99 {rate_p99:.1f} ms (< "
        f"{RATING_P99_TARGET_MS:.0f}: {verdict(rate_p99 < RATING_P99_TARGET_MS)}; "
        f"{rate_p99 / floor_p99 if floor_p99 else 0.0:.1f}x the floor's p99 {floor_p99:.1f} ms, "
        f"<= {RATING_P99_PER_FLOOR_P99:.0f}x: "
        f"{verdict(rate_p99 <= RATING_P99_PER_FLOOR_P99 * floor_p99)}); submission p99 "
        f"{submit_p99:.1f} ms (< {SUBMIT_P99_TARGET_MS:.0f}: "
        f"{verdict(submit_p99 < SUBMIT_P99_TARGET_MS)}); throughput {share:.2f} of the floor "
        f"(>= {FLOOR_SHARE_TARGET}: {verdict(share >= FLOOR_SHARE_TARGET)})"
    )
    # The machine's load beside the figures: a busy machine's latencies are not the code's.
    if hasattr(os, "getloadavg"):
        print("load average (1, 5, 15 min): " + ", ".join(f"{x:.2f}" for x in os.getloadavg()))
    for example in app.error_examples + floor.error_examples:
        print(f"  error: {example}")
    checks.append(
        ("no request failed", app_errors + floor_errors == 0, f"{app_errors + floor_errors} errors")
    )
    for name, ok, detail in checks:
        print(f"[{'ok' if ok else 'FAIL'}] {name}: {detail}")
    return 0 if all(ok for _, ok, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
