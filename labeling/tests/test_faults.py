"""Faults a labeling team meets in production: PostgreSQL restarting under labelers, the broker
hung or dead while a researcher asks for a training run.

The app runs as deployed (the Procfile's web server) against a PostgreSQL cluster and a Redis
server that these tests start themselves, so they can stop and kill them without touching shared
services or the suite's own database (SQLite or PostgreSQL). The simulated labelers, the seeding
and the consistency check are bench/serve.py's.
"""

import base64
import json
import os
import pwd
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from glob import glob
from pathlib import Path

import pytest
import redis
import requests

from bench import serve
from conftest import require

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.services

# A failed request must come back well inside this; a hang shows up as a timeout, not a stall.
CLIENT_TIMEOUT_S = 10.0
LABELERS = 4
SERVER_USER = "postgres"


# --- a private PostgreSQL cluster -------------------------------------------------------------


def postgres_bindir() -> Path | None:
    candidates = []
    if shutil.which("pg_config"):
        done = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True)
        candidates.append(done.stdout.strip())
    # Debian's pg_config may come from libpq-dev without the server beside it.
    candidates += sorted(glob("/usr/lib/postgresql/*/bin"), key=_version, reverse=True)
    for candidate in candidates:
        if candidate and all((Path(candidate) / tool).exists() for tool in ("initdb", "pg_ctl")):
            return Path(candidate)
    return None


def _version(bindir: str) -> float:
    try:
        return float(Path(bindir).parent.name)
    except ValueError:
        return 0.0


def _as_server_user(command: list[str]) -> list[str]:
    # initdb refuses to run as root, and the server must not own root's files.
    if os.geteuid() == 0:
        return ["runuser", "-u", SERVER_USER, "--", *command]
    return command


@dataclass
class PrivatePostgres:
    bindir: Path
    root: Path  # the cluster (pg/) and the app's var dir (var/)
    port: int

    @property
    def pg_dir(self) -> Path:
        return self.root / "pg"

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/stepwise"

    def pg_ctl(self, *args: str) -> None:
        command = [str(self.bindir / "pg_ctl"), "-D", str(self.pg_dir / "data"), "-w", "-t", "30"]
        command += ["-l", str(self.pg_dir / "server.log"), *args]
        done = subprocess.run(_as_server_user(command), capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, f"pg_ctl {args[0]}: {done.stdout}{done.stderr}{self.log()}"

    def start(self) -> None:
        options = f"-p {self.port} -k {self.pg_dir} -c listen_addresses=127.0.0.1 -c fsync=off"
        self.pg_ctl("start", "-o", options)

    def stop(self, mode: str = "fast") -> None:
        self.pg_ctl("stop", "-m", mode)

    def log(self) -> str:
        path = self.pg_dir / "server.log"
        return path.read_text()[-2000:] if path.exists() else ""

    def app_env(self, *, broker_url: str) -> dict[str, str]:
        return {
            "DATABASE_URL": self.url,
            "DJANGO_SETTINGS_MODULE": "annotate.settings",
            "CELERY_BROKER_URL": broker_url,
            "STEPWISE_VAR_DIR": str(self.root / "var"),
            # Every process (seeding, the web server) must sign sessions alike.
            "SECRET_KEY": "faults-test-secret-key-not-for-production-0123456789",
            "DEBUG": "false",
            # The hard case: persistent connections that outlive the server they were opened to.
            "CONN_MAX_AGE": "60",
        }

    def django(self, script: str, *args: str, stdin: str = "") -> str:
        """Run `script` in a Python process with Django set up on this cluster; its stdout."""
        done = subprocess.run(
            [sys.executable, "-c", script, *args],
            cwd=REPO,
            env=os.environ | self.app_env(broker_url="memory://") | {"PYTHONPATH": str(REPO)},
            input=stdin,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout


SEED = """
import random, sys
from bench.benchdb import setup_django
setup_django(sys.argv[1])
from django.contrib.auth.models import Group, User
from bench.serve import PASSWORD, seed
seed(solutions=int(sys.argv[2]), labelers=int(sys.argv[3]), rng=random.Random(7))
researcher = User.objects.create_user("researcher", password=PASSWORD)
researcher.groups.add(Group.objects.get(name="researcher"))
"""

CHECK = """
import json, sys
from types import SimpleNamespace
from bench.benchdb import setup_django
setup_django(sys.argv[1])
from bench.serve import Expected, check_consistency
sessions = {
    int(sid): Expected(
        ratings={(s, c): r for s, c, r in e["ratings"]},
        finish_reason=e["finish_reason"],
        uncertain=e["uncertain"],
    )
    for sid, e in json.load(sys.stdin).items()
}
print(json.dumps(check_consistency([SimpleNamespace(sessions=sessions)])))
"""


@pytest.fixture(scope="module")
def private_postgres() -> Iterator[PrivatePostgres]:
    bindir = postgres_bindir()
    require(bindir is not None, "PostgreSQL server binaries (initdb, pg_ctl) are not installed")
    if os.geteuid() == 0:
        try:
            server_user = pwd.getpwnam(SERVER_USER)
        except KeyError:
            server_user = None
        require(
            server_user is not None and shutil.which("runuser") is not None,
            f"running as root, but there is no {SERVER_USER} user (and runuser) to run initdb as",
        )
    root = Path(tempfile.mkdtemp(prefix="stepwise-faults-"))
    root.chmod(0o711)  # the server's user reaches its own directory through this one
    (root / "pg").mkdir()
    (root / "var").mkdir()
    if os.geteuid() == 0:
        os.chown(root / "pg", server_user.pw_uid, server_user.pw_gid)
    cluster = PrivatePostgres(bindir=bindir, root=root, port=serve.free_port())
    try:
        initdb = [str(bindir / "initdb"), "-D", str(cluster.pg_dir / "data"), "-U", "postgres"]
        initdb += ["-A", "trust", "-E", "UTF8", "--no-sync"]
        done = subprocess.run(_as_server_user(initdb), capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
        cluster.start()
        createdb = [str(bindir / "createdb"), "-h", "127.0.0.1", "-p", str(cluster.port)]
        subprocess.run([*createdb, "-U", "postgres", "stepwise"], check=True)
        # seed() migrates first, then adds labelers (bench's password) and solutions.
        cluster.django(SEED, cluster.url, "1500", str(LABELERS + 2))
        yield cluster
    finally:
        with suppress(AssertionError, subprocess.SubprocessError):
            cluster.stop("immediate")
        shutil.rmtree(root, ignore_errors=True)


@contextmanager
def running_app(
    cluster: PrivatePostgres, *, broker_url: str, threads: int
) -> Iterator[tuple[str, subprocess.Popen]]:
    port = serve.free_port()
    process = serve.start_server(
        database_url=cluster.url,
        port=port,
        threads=threads,
        env=cluster.app_env(broker_url=broker_url),
    )
    try:
        yield f"http://127.0.0.1:{port}", process
    finally:
        serve.stop_server(process)


# --- what the labelers saw ----------------------------------------------------------------------


@dataclass
class Request:
    started: float
    seconds: float
    endpoint: str
    ok: bool
    detail: str  # "<status> <body>" for an answer, repr() of the exception otherwise

    @property
    def clean_failure(self) -> bool:
        """A 5xx, or a refused/reset connection that a client can simply retry."""
        status = self.detail.split(" ", 1)[0]
        if status.isdigit():
            return int(status) >= 500
        return self.detail.startswith("ConnectionError(")


class Timeline(serve.Stats):
    """bench's request statistics, plus when each request started and how it ended."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[Request] = []

    def add(self, endpoint: str, seconds: float, ok: bool, detail: str = "") -> None:
        super().add(endpoint, seconds, ok, detail)
        with self.lock:
            started = time.monotonic() - seconds
            self.requests.append(Request(started, seconds, endpoint, ok, detail))


def keep_labeling(labeler: serve.Labeler, stats: serve.Stats, deadline: float) -> None:
    while time.monotonic() < deadline:
        labeler.run(stats, deadline)
        # run() gives up on a session at the first failed request; a person reloads the page.
        time.sleep(0.2)


def start_labeling(
    labelers: list[serve.Labeler], stats: serve.Stats, *, seconds: float
) -> list[threading.Thread]:
    deadline = time.monotonic() + seconds
    threads = [
        threading.Thread(target=keep_labeling, args=(labeler, stats, deadline))
        for labeler in labelers
    ]
    for thread in threads:
        thread.start()
    return threads


def join(threads: list[threading.Thread]) -> None:
    for thread in threads:
        thread.join()


def expected_sessions(labelers: list[serve.Labeler]) -> str:
    return json.dumps(
        {
            sid: {
                "ratings": [[s, c, r] for (s, c), r in e.ratings.items()],
                "finish_reason": e.finish_reason,
                "uncertain": e.uncertain,
            }
            for labeler in labelers
            for sid, e in labeler.sessions.items()
        }
    )


# --- PostgreSQL restarts while labelers submit --------------------------------------------------


def test_labelers_ride_out_postgresql_restarts_without_losing_ratings(
    private_postgres, monkeypatch
):
    monkeypatch.setattr(serve, "TIMEOUT_S", CLIENT_TIMEOUT_S)
    with running_app(private_postgres, broker_url="memory://", threads=2) as (base, server):
        labelers = [
            serve.Labeler(base=base, username=f"labeler{i:03d}", rng=random.Random(i), think_s=0.02)
            for i in range(LABELERS)
        ]
        for labeler in labelers:
            labeler.log_in()
        timeline = Timeline()

        threads = start_labeling(labelers, timeline, seconds=14)
        time.sleep(5)
        down_at = time.monotonic()
        # A fast stop cuts off open transactions mid-request. The server then stays down for a
        # few seconds (a bare restart takes 0.2 s), so labelers also hit a refused connection.
        private_postgres.stop("fast")
        time.sleep(3)
        private_postgres.start()
        back_at = time.monotonic()
        join(threads)

        # A restart while nobody is mid-request (a quiet moment, a maintenance window): each
        # worker still holds a persistent connection to the old server, and only the health
        # check keeps the next request from failing on it.
        private_postgres.pg_ctl("restart", "-m", "fast")
        quiet_back_at = time.monotonic()
        join(start_labeling(labelers, timeline, seconds=4))

        assert server.poll() is None, "the web server exited"

    requests_ = timeline.requests
    failed = [r for r in requests_ if not r.ok]
    assert failed, "no request failed: the outage did not hit the labelers"
    before = [r for r in failed if r.started + r.seconds < down_at]
    assert not before, f"requests failed before the outage: {before[:3]}"
    unclean = [r for r in failed if not r.clean_failure]
    assert not unclean, f"failures other than 5xx or a refused connection: {unclean[:3]}"
    slow = [r for r in failed if r.seconds > CLIENT_TIMEOUT_S / 2]
    assert not slow, f"failed requests hung: {slow[:3]}"

    # Recovery without restarting the app: the same workers answer every request at once.
    after = [r for r in requests_ if back_at <= r.started < quiet_back_at]
    assert [r for r in after if not r.ok] == [], "requests failed after PostgreSQL was back"
    rated_after = sum(1 for r in after if r.ok and r.endpoint == "POST rate")
    assert rated_after >= 40, f"only {rated_after} ratings acknowledged after the outage"
    quiet = [r for r in requests_ if r.started >= quiet_back_at]
    assert [r for r in quiet if not r.ok] == [], "stale connections failed requests"
    rated_quiet = sum(1 for r in quiet if r.ok and r.endpoint == "POST rate")
    assert rated_quiet >= 20, f"only {rated_quiet} ratings acknowledged after the quiet restart"

    results = json.loads(
        private_postgres.django(CHECK, private_postgres.url, stdin=expected_sessions(labelers))
    )
    assert [(name, detail) for name, ok, detail in results if not ok] == []
    certain = [e for labeler in labelers for e in labeler.sessions.values() if not e.uncertain]
    assert sum(1 for e in certain if e.finish_reason) >= 10, "too few submissions to prove much"
    print(
        f"{len(requests_)} requests, {len(failed)} failed during the outage "
        f"(slowest {max(r.seconds for r in failed):.2f} s), {rated_after} ratings after it, "
        f"{rated_quiet} after the quiet restart; " + "; ".join(d for _, _, d in results)
    )


# --- the broker hung, dead, then back ---------------------------------------------------------


@contextmanager
def private_redis(port: int, directory: Path) -> Iterator[subprocess.Popen]:
    command = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
    command += ["--appendonly", "no", "--daemonize", "no", "--dir", str(directory)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    try:
        client = redis.Redis(port=port, socket_timeout=1)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis.RedisError:
                assert process.poll() is None, "redis-server exited"
                assert time.monotonic() < deadline, "redis-server did not answer within 10 s"
                time.sleep(0.05)
        yield process
    finally:
        process.kill()  # a stopped (SIGSTOP) process still dies on SIGKILL
        process.wait()


def queued_run_ids(port: int) -> list[int]:
    """The training runs whose message is waiting in the broker's gpu queue."""
    client = redis.Redis(port=port, socket_timeout=5)
    run_ids = []
    for key in client.keys("gpu*"):  # kombu keeps one list per priority step
        for raw in client.lrange(key, 0, -1):
            message = json.loads(raw)
            assert message["headers"]["task"] == "trainer.tasks.train_task"
            body = message["body"]
            if message["properties"].get("body_encoding") == "base64":
                body = base64.b64decode(body)
            args, _kwargs, _embed = json.loads(body)
            run_ids.append(args[0])
    return run_ids


class Researcher:
    def __init__(self, *, base: str) -> None:
        self.base = base
        # bench's labeler knows the login dance and the seeded password.
        account = serve.Labeler(base=base, username="researcher", rng=random.Random(0), think_s=0)
        account.log_in()
        self.http = account.http

    def post(self, path: str, body: dict | None = None) -> tuple[requests.Response, float]:
        started = time.monotonic()
        try:
            response = self.http.post(
                self.base + path,
                json=body or {},
                headers={"X-CSRFToken": self.http.cookies.get("csrftoken", "")},
                timeout=CLIENT_TIMEOUT_S * 2,
            )
        except requests.Timeout:
            pytest.fail(f"POST {path} hung for {CLIENT_TIMEOUT_S * 2:.0f} s", pytrace=False)
        return response, time.monotonic() - started

    def request_run(self) -> tuple[requests.Response, float]:
        return self.post("/api/training-runs/", {"params": {"epochs": 1}})

    def newest_run(self) -> dict:
        response = self.http.get(self.base + "/api/training-runs/", timeout=30)
        assert response.status_code == 200, response.text
        return response.json()["results"][0]


def labeling_works(*, base: str, username: str) -> None:
    labeler = serve.Labeler(base=base, username=username, rng=random.Random(1), think_s=0)
    labeler.log_in()
    stats = serve.Stats()
    labeler.run(stats, time.monotonic() + 2)
    assert not stats.errors, stats.error_examples
    assert len(stats.latencies["POST rate"]) >= 3, "labeling stalled"


def assert_refused_quickly(researcher: Researcher, *, within: float) -> float:
    response, seconds = researcher.request_run()
    assert response.status_code == 503, response.text
    assert seconds < within, f"the request took {seconds:.1f} s"
    detail = response.json()["detail"]
    assert "broker is unreachable" in detail
    # The run is not left queued, which would refuse every later request (one live run).
    run = researcher.newest_run()
    assert (run["status"], run["error"]) == ("failed", detail)
    return seconds


def test_a_hung_or_dead_broker_fails_training_requests_fast_and_labeling_goes_on(
    private_postgres, tmp_path
):
    require(shutil.which("redis-server") is not None, "redis-server is not installed")
    port = serve.free_port()
    broker_url = f"redis://127.0.0.1:{port}/0"
    with (
        private_redis(port, tmp_path) as broker,
        # One worker: the broker connection it pools on the first request is the one that
        # goes stale.
        running_app(private_postgres, broker_url=broker_url, threads=1) as (base, _),
    ):
        researcher = Researcher(base=base)
        response, _ = researcher.request_run()
        assert response.status_code == 201, response.text
        assert queued_run_ids(port) == [response.json()["id"]]
        cancelled, _ = researcher.post(f"/api/training-runs/{response.json()['id']}/cancel/")
        assert cancelled.json()["status"] == "cancelled"

        # Hung (a stuck process, a dropped network path): the connection stays open but
        # nothing answers, so only socket timeouts end the wait.
        broker.send_signal(signal.SIGSTOP)
        hung_s = assert_refused_quickly(researcher, within=10)
        labeling_works(base=base, username=f"labeler{LABELERS:03d}")

        # Dead: connections are refused at once.
        broker.kill()
        broker.wait()
        dead_s = assert_refused_quickly(researcher, within=3)
        labeling_works(base=base, username=f"labeler{LABELERS + 1:03d}")

        with private_redis(port, tmp_path):
            response, seconds = researcher.request_run()
            assert response.status_code == 201, response.text
            assert seconds < 3, f"the request took {seconds:.1f} s"
            run = response.json()
            assert run["status"] == "queued"
            assert queued_run_ids(port) == [run["id"]]
    print(f"refused in {hung_s:.1f} s (hung), {dead_s:.1f} s (dead); queued in {seconds:.2f} s")
