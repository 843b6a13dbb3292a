"""A sampling run on a real Celery worker (Redis broker) against a real `transformers serve`:
the worker is killed mid-run, the pool holds whole items only, the next worker marks the run
failed, and the resumed run finishes every item once."""

import os
import signal

from annotate.celery import app
from conftest import wait_for
from generators import GeneratorSpec, SamplingSettings
from labeling.models import Problem, Solution
from trainer import tasks
from trainer.models import SamplingRun, SamplingRunItem
from trainer.sampling import services as sampling

ITEMS = 8
SAMPLES = 2


def test_sampling_goes_to_the_gpu_queue_acked_late_and_is_never_requeued_by_the_broker():
    # A local generator needs the model on a GPU worker; a killed worker's run is resumed by
    # a researcher, not redelivered behind their back.
    assert app.amqp.router.route({}, sampling.SAMPLING_TASK)["queue"].name == "gpu"
    assert tasks.sampling_task.name == sampling.SAMPLING_TASK
    assert tasks.sampling_task.acks_late is True
    assert not tasks.sampling_task.reject_on_worker_lost


def done_items(run: SamplingRun) -> dict[int, tuple]:
    return {
        item.position: (item.problem_id, item.done_at, item.stored)
        for item in SamplingRunItem.objects.filter(run=run, done_at__isnull=False)
    }


def assert_whole_items(run: SamplingRun) -> None:
    """Each done item has exactly the solutions it counted; an item not done has none."""
    for item in SamplingRunItem.objects.filter(run=run):
        added = Solution.objects.filter(sampling_run=run, problem_id=item.problem_id).count()
        if item.done_at is None:
            assert added == 0, f"item {item.position} is not done but added {added} solutions"
        else:
            assert added == item.stored, f"item {item.position} counted {item.stored}, has {added}"
    run.refresh_from_db()
    assert run.stored == Solution.objects.filter(sampling_run=run).count()


def test_a_worker_killed_mid_run_leaves_whole_items_and_the_resumed_run_finishes_them_once(
    start_worker, openai_server
):
    problems = [
        Problem.objects.create(text=f"What is ${n} + {n + 1}$?", answer=str(2 * n + 1))
        for n in range(ITEMS)
    ]
    name = f"sampling-kill-{os.getpid()}@%h"
    # The server listens on 127.0.0.1: the operator's allow-list names it (for the worker).
    allowed = {"GENERATOR_ALLOWED_BASE_URLS": openai_server.base_url}
    first = start_worker(name, **allowed)
    wait_for(lambda: " ready." in first.log_path.read_text(), timeout=120, what="the worker")

    run = sampling.request_sampling_run(
        user=None,
        purpose="solutions",
        generator=GeneratorSpec(
            backend="openai", model=openai_server.model, base_url=openai_server.base_url
        ),
        settings=SamplingSettings(temperature=0.8, max_tokens=64, seed=11),
        samples=SAMPLES,
        problem_ids=[p.pk for p in problems],
        solution_ids=None,
        then_select=None,
    )
    # Killed as soon as one item is committed: each item is a few seconds of generation.
    wait_for(lambda: done_items(run), timeout=300, what="an item to be done", interval=0.05)
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=30)
    before = done_items(run)
    assert 0 < len(before) < ITEMS, "the kill did not land mid-run"
    run.refresh_from_db()
    assert run.status == "running"
    assert_whole_items(run)

    # The replacement worker of the same name sees at start-up that the run's worker is gone.
    second = start_worker(name, **allowed)

    def failed() -> bool:
        run.refresh_from_db()
        return run.status == "failed"

    wait_for(failed, timeout=120, what="the killed run to be marked failed")
    assert "the worker stopped; resume to continue" in run.error
    assert done_items(run) == before  # nothing ran it again behind the researcher's back

    sampling.resume_sampling_run(run_id=run.pk)

    def succeeded() -> bool:
        run.refresh_from_db()
        assert run.status != "failed", run.error
        return run.status == "succeeded"

    wait_for(succeeded, timeout=420, what="the resumed run to succeed")
    after = done_items(run)
    assert sorted(after) == list(range(ITEMS))
    # The items done before the kill were not done again (same done_at, same count).
    assert {position: after[position] for position in before} == before
    assert_whole_items(run)
    assert run.stored + sum(run.skipped.values()) == ITEMS * SAMPLES
    hashes = list(Solution.objects.filter(sampling_run=run).values_list("problem", "content_hash"))
    assert len(hashes) == len(set(hashes))
    assert second.poll() is None
