"""Celery is wired for real: a worker process picks a task off Redis and writes the database."""

import os
import time

from conftest import wait_for
from labeling.models import Problem, Solution
from labeling.tasks import regrade_solutions_task


def test_a_real_worker_regrades_solutions_through_redis(start_worker):
    # A queue of this test's own, so that no other worker on the same Redis takes the task.
    queue = f"test-{os.getpid()}-{time.monotonic_ns()}"
    start_worker("regrader", queues=queue)
    problem = Problem.objects.create(text="What is half of 3?", answer="\\frac{3}{2}")
    solution = Solution.objects.create(
        problem=problem, steps=["# Answer\n\n1.5"], answer="1.5", is_correct=False
    )
    # The broker fixture publishes through Redis even when the suite's own broker is the
    # embedded default.
    regrade_solutions_task.apply_async(queue=queue)

    def regraded() -> bool:
        solution.refresh_from_db()
        return solution.is_correct

    wait_for(regraded, timeout=60, what="the worker to regrade the solution")
