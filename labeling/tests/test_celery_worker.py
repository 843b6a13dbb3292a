"""Celery is wired for real: a worker process picks a task off Redis and writes the database."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.db import connection
from kombu import Connection

from labeling.models import Problem, Solution
from labeling.tasks import regrade_solutions_task

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def worker(redis_url, transactional_db, tmp_path):
    settings_dict = connection.settings_dict
    if settings_dict["ENGINE"].endswith("sqlite3"):
        database_url = f"sqlite:///{settings_dict['NAME']}"
    else:
        database_url = (
            f"postgres://{settings_dict['USER']}@{settings_dict['HOST']}:{settings_dict['PORT']}"
            f"/{settings_dict['NAME']}"
        )
    queue = f"test-{os.getpid()}-{time.monotonic_ns()}"
    env = dict(os.environ, DATABASE_URL=database_url, CELERY_BROKER_URL=redis_url)
    log = (tmp_path / "worker.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "annotate", "worker", "--queues", queue]
        + ["--concurrency", "1", "--pool", "solo", "--loglevel", "INFO"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    yield queue, redis_url
    process.terminate()
    process.wait(timeout=30)
    log.close()
    print((tmp_path / "worker.log").read_text()[-3000:])


def test_a_real_worker_regrades_solutions_through_redis(worker):
    queue, redis_url = worker
    problem = Problem.objects.create(text="What is half of 3?", answer="\\frac{3}{2}")
    solution = Solution.objects.create(
        problem=problem, steps=["# Answer\n\n1.5"], answer="1.5", is_correct=False
    )
    # Publish through Redis even when the suite's own broker is the embedded default.
    with Connection(redis_url) as broker:
        regrade_solutions_task.apply_async(queue=queue, producer=broker.Producer())

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        solution.refresh_from_db()
        if solution.is_correct:
            break
        time.sleep(0.5)
    assert solution.is_correct, "the worker did not regrade the solution within 60 s"
