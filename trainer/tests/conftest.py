"""Real Celery workers for the trainer tests: a Redis broker, worker subprocesses, waiting."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.db import connection
from kombu import Connection

from annotate.celery import app

ROOT = Path(__file__).resolve().parents[2]


def database_url() -> str:
    """The test database, for a worker subprocess to use the rows this test wrote."""
    settings_dict = connection.settings_dict
    if settings_dict["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{settings_dict['NAME']}"
    return (
        f"postgres://{settings_dict['USER']}@{settings_dict['HOST']}:{settings_dict['PORT']}"
        f"/{settings_dict['NAME']}"
    )


@pytest.fixture
def broker(redis_url):
    """Publish from this process to Redis too, whatever the suite's own broker is."""
    previous = (app.conf.broker_url, app.conf.broker_transport_options)
    app.conf.broker_url, app.conf.broker_transport_options = redis_url, {}
    app._after_fork()  # Celery's own reset of its pooled broker connections
    with Connection(redis_url) as conn:
        for queue in ("gpu", "default"):
            # Messages left by an interrupted earlier run name rows that no longer exist.
            conn.SimpleQueue(queue).clear()
        # So do messages a killed worker took but never acknowledged, which Redis would hand
        # to this test's worker once their visibility timeout passed.
        conn.default_channel.client.delete("unacked", "unacked_index")
    yield redis_url
    app.conf.broker_url, app.conf.broker_transport_options = previous
    app._after_fork()


@pytest.fixture
def start_worker(broker, transactional_db, tmp_path):
    """Start a worker subprocess on queues gpu and default: `start(name, **extra_env)`.

    The process returned carries `log_path`, the file its output goes to.
    """
    processes = []

    def start(name: str, **extra_env: str) -> subprocess.Popen:
        env = dict(
            os.environ,
            DATABASE_URL=database_url(),
            CELERY_BROKER_URL=broker,
            STEPWISE_VAR_DIR=str(tmp_path / "var"),
            PRM_MODEL_DIR=str(tmp_path / "models"),
            PRM_HEARTBEAT_SECONDS="1",
            **extra_env,
        )
        log_path = tmp_path / f"worker-{len(processes)}.log"
        log = log_path.open("w")
        process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "annotate", "worker", "-n", name]
            + ["--queues", "gpu,default", "--concurrency", "1", "--pool", "solo"]
            + ["--loglevel", "INFO"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        process.log_path = log_path
        processes.append((process, log))
        return process

    yield start
    for process, log in processes:
        if process.poll() is None:
            process.terminate()
            process.wait(timeout=60)
        log.close()
    for path in sorted(tmp_path.glob("worker-*.log")):
        print(path.name, path.read_text()[-3000:])


def wait_for(predicate, *, timeout: float, what: str, interval: float = 0.5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
