"""Hostile and slow clients against the web server, started exactly as the Procfile starts it.

Each test runs the Procfile's `web:` command (what `make run` runs through honcho) in a
subprocess on the test database, so the tests judge whatever server that line names: against
the old `gunicorn annotate.wsgi --workers 2` the first two fail. gunicorn's worker timeout is
lowered to 5 s through GUNICORN_CMD_ARGS, so that a download a few times longer than that,
rather than one over 30 s, shows whether a server cuts long responses; a server that is not
gunicorn ignores it.
"""

import contextlib
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from conftest import database_url, require

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.services

SLOW_CLIENTS = 20
SLOW_SECONDS = 20
HEADER_EVERY_S = 2
# A request may take this long, or this many times its slowest time before the slow clients
# came (measured in the same run, so a slow or busy machine does not fail the test). A server
# that lets slow clients hold its threads makes requests wait for a slow client's headers,
# which never end: they time out.
ANSWER_WITHIN_S = 1.0
TIMES_UNLOADED = 4
PATHS = ("/accounts/login/", "/api/schema/")

READ_BYTES_PER_S = 1024 * 1024
# About 16 MB of export: 16 s at 1 MB/s, three times the lowered worker timeout and several
# times what the kernel buffers between the two sockets.
EXPORT_LINES = 1600
STEP_CHARS = 1000
STEPS = 10


def procfile_web_command() -> str:
    for line in (ROOT / "Procfile").read_text().splitlines():
        name, _, command = line.partition(":")
        if name.strip() == "web":
            return command.strip()
    raise AssertionError("the Procfile has no web: line")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Server:
    port: int
    process: subprocess.Popen
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_tail(self) -> str:
        return self.log_path.read_text(errors="replace")[-3000:]


@contextlib.contextmanager
def running_server(tmp_path: Path, **env_overrides: str):
    """The Procfile's web process on a free port, serving the test database."""
    port = free_port()
    env = dict(
        os.environ,
        PORT=str(port),
        DATABASE_URL=database_url(),
        STEPWISE_VAR_DIR=str(tmp_path / "var"),
        # Nothing a view might enqueue may reach a real broker.
        CELERY_BROKER_URL="memory://",
        DEBUG="false",
        # As `make run` does: the virtual environment's commands first.
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        GUNICORN_CMD_ARGS="--timeout 5",
        # The slow-client test asks for the schema, the heaviest page, without logging in.
        API_SCHEMA_PUBLIC="true",
        **env_overrides,
    )
    log_path = tmp_path / "web.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(
            ["sh", "-c", f"exec {procfile_web_command()}"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, to stop a server and its workers
        )
    server = Server(port=port, process=process, log_path=log_path)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, f"the server exited:\n{server.log_tail()}"
            try:
                if requests.get(f"{server.url}/accounts/login/", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            assert time.monotonic() < deadline, f"no answer in 60 s:\n{server.log_tail()}"
            time.sleep(0.2)
        yield server
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        print(server.log_tail())


@pytest.fixture
def server(transactional_db, tmp_path):
    with running_server(tmp_path) as server:
        yield server


def open_slow_request(port: int) -> socket.socket:
    """A request whose headers never end; the caller sends one more header line now and then."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(b"GET /accounts/login/ HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    return sock


def timed_get(url: str, *, timeout: float) -> tuple[int | str, float]:
    """(status, or the error's name; seconds) of one GET."""
    asked = time.monotonic()
    try:
        status: int | str = requests.get(url, timeout=timeout).status_code
    except requests.RequestException as error:
        status = type(error).__name__
    return status, time.monotonic() - asked


def test_slow_header_senders_do_not_starve_the_server(server):
    # A first request pays for imports and the first database connection: not the point.
    assert requests.get(f"{server.url}/accounts/login/", timeout=30).status_code == 200
    before = [timed_get(f"{server.url}{path}", timeout=30) for _ in range(3) for path in PATHS]
    assert {status for status, _ in before} == {200}
    unloaded = max(seconds for _, seconds in before)
    within = max(ANSWER_WITHIN_S, TIMES_UNLOADED * unloaded)
    slow = [open_slow_request(server.port) for _ in range(SLOW_CLIENTS)]
    answers = []
    try:
        started = time.monotonic()
        beat = 0
        while time.monotonic() - started < SLOW_SECONDS:
            for sock in slow:
                # Raises if the server gave up on a slow client: the test needs them open.
                sock.sendall(b"X-Slow-%d: still sending\r\n" % beat)
            for path in PATHS:
                answers.append((path, *timed_get(f"{server.url}{path}", timeout=within + 5)))
            beat += 1
            time.sleep(max(0.0, started + beat * HEADER_EVERY_S - time.monotonic()))
    finally:
        for sock in slow:
            sock.close()
    late = [(p, s, f"{t:.2f} s") for p, s, t in answers if s != 200 or t > within]
    assert not late, (
        f"{len(late)} of {len(answers)} requests failed or took over {within:.2f} s "
        f"(the slowest before the slow clients came: {unloaded:.2f} s) while {SLOW_CLIENTS} "
        f"clients sent headers slowly: {late[:5]}"
    )
    assert len(answers) >= 2 * SLOW_SECONDS // HEADER_EVERY_S


@pytest.fixture
def submitted_sessions(make_labeler, make_solution):
    """`submitted_sessions(n)`: n submitted sessions of one solution with long steps, so that
    each export line is about 10 kB."""
    from django.utils import timezone

    from labeling.models import LabelingSession, Problem

    def make(n: int) -> int:
        labeler = make_labeler("slow-reader-labeler")
        problem = Problem.objects.create(text="What is 1 + 1?", answer="2")
        steps = [f"Step {i}: " + "x" * STEP_CHARS for i in range(STEPS)] + ["# Answer\n\n2"]
        solution = make_solution(problem, steps=steps)
        now = timezone.now()
        sessions = [
            LabelingSession(
                labeler=labeler,
                solution=solution,
                started_at=now,
                submitted_at=now,
                finish_reason="solution",
                total_time=1000 + i,
            )
            for i in range(n)
        ]
        LabelingSession.objects.bulk_create(sessions, batch_size=500)
        return n

    return make


@pytest.fixture
def researcher_token(make_user) -> str:
    from labeling.tokens import create_api_token

    return create_api_token(user=make_user("slow-reader", role="researcher")).token


class SmallWindowConnection(http.client.HTTPConnection):
    """A connection with a small receive buffer: the server feels the client's pace at once."""

    def connect(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        self.sock.settimeout(self.timeout)
        self.sock.connect((self.host, self.port))


def request_export(server: Server, token: str) -> tuple[SmallWindowConnection, object]:
    connection = SmallWindowConnection("127.0.0.1", server.port, timeout=30)
    connection.request("GET", "/api/labels/export/", headers={"Authorization": f"Token {token}"})
    response = connection.getresponse()
    assert response.status == 200
    return connection, response


def test_a_slow_reader_gets_every_line_of_a_large_export(
    server, submitted_sessions, researcher_token
):
    expected = submitted_sessions(EXPORT_LINES)
    connection, response = request_export(server, researcher_token)
    body = bytearray()
    started = time.monotonic()
    try:
        while chunk := response.read(64 * 1024):
            body += chunk
            ahead = len(body) / READ_BYTES_PER_S - (time.monotonic() - started)
            if ahead > 0:
                time.sleep(ahead)
    except (http.client.IncompleteRead, OSError) as error:
        # A clear failure, not a silent one; but nothing here should fail.
        pytest.fail(
            f"the export broke off after {len(body):,} bytes and "
            f"{time.monotonic() - started:.1f} s: {error!r}\n{server.log_tail()}"
        )
    finally:
        connection.close()
    elapsed = time.monotonic() - started
    lines = bytes(body).decode().splitlines()
    assert len(lines) == expected, (
        f"{len(lines):,} of {expected:,} lines in {elapsed:.1f} s, a clean end of a 200 response"
    )
    records = [json.loads(line) for line in (lines[0], lines[-1])]
    assert all(len(r["question"]["pre_generated_steps"]) == STEPS + 1 for r in records)
    # The client really was slow: the download outlasted the worker timeout several times.
    assert elapsed > 3 * 5


def test_an_export_that_fails_half_way_is_an_error_to_the_client(
    server, submitted_sessions, researcher_token
):
    from django.db import connection as db

    require(db.vendor == "postgresql", "this test cuts the server's PostgreSQL connections")
    # More than the server may hold unsent for a slow client (16 MB) plus what the kernel
    # buffers, so the export is still running when the database goes away under it.
    expected = submitted_sessions(3000)
    connection, response = request_export(server, researcher_token)
    body = bytearray(response.read(64 * 1024))
    time.sleep(2)  # the server fills its buffers and waits for this client
    with db.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        assert cursor.fetchone()[0] >= 1
    try:
        with pytest.raises((http.client.IncompleteRead, OSError)):
            while chunk := response.read(1024 * 1024):
                body += chunk
    finally:
        connection.close()
    lines = bytes(body).decode(errors="replace").splitlines()
    assert 0 < len(lines) < expected


def server_processes(parent: int) -> set[int]:
    children = Path(f"/proc/{parent}/task/{parent}/children")
    return {int(pid) for pid in children.read_text().split()} if children.exists() else set()


def wait_for(condition, *, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while not (value := condition()):
        assert time.monotonic() < deadline, f"not within {seconds} s: {what}"
        time.sleep(0.1)
    return value


def two_processes(parent: int) -> set[int]:
    return wait_for(
        lambda: len(server_processes(parent)) == 2 and server_processes(parent),
        seconds=10,
        what="two server processes",
    )


def test_the_server_forks_processes_and_replaces_one_that_dies(transactional_db, tmp_path):
    require(Path("/proc/self/task").exists(), "counts the server's processes through /proc")
    with running_server(tmp_path, WEB_PROCESSES="2") as server:
        parent = server.process.pid
        first = two_processes(parent)
        killed = min(first)
        os.kill(killed, signal.SIGKILL)
        replaced = wait_for(
            lambda: (
                len(server_processes(parent)) == 2
                and killed not in server_processes(parent)
                and server_processes(parent)
            ),
            seconds=15,
            what=f"a process in place of the killed {killed}",
        )
        assert len(replaced - first) == 1
        # Every request answers, from whichever process takes it.
        statuses = [
            requests.get(f"{server.url}/accounts/login/", timeout=5).status_code for _ in range(20)
        ]
        assert statuses == [200] * 20
        assert f"server process {killed} ended (signal SIGKILL); starting another" in (
            server.log_tail()
        )


def test_sigterm_to_the_server_stops_every_process(transactional_db, tmp_path):
    require(Path("/proc/self/task").exists(), "counts the server's processes through /proc")
    with running_server(tmp_path, WEB_PROCESSES="2") as server:
        parent = server.process.pid
        children = two_processes(parent)
        # The parent alone, as a process manager that knows one pid sends it.
        os.kill(parent, signal.SIGTERM)
        assert server.process.wait(timeout=15) == 0
        for pid in children:
            wait_for(
                lambda pid=pid: (
                    not Path(f"/proc/{pid}").exists()
                    or "zombie" in Path(f"/proc/{pid}/status").read_text()
                ),
                seconds=10,
                what=f"server process {pid} stopped",
            )
        with pytest.raises(requests.ConnectionError):
            requests.get(f"{server.url}/accounts/login/", timeout=2)
