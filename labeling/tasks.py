from dataclasses import asdict

from celery import shared_task
from celery.signals import worker_ready

from core import jobs
from labeling import grading, tallies
from labeling.services import import_jobs


@shared_task(acks_late=True)
def regrade_solutions_task(problem_ids: list[int] | None = None) -> dict[str, int]:
    # Idempotent (it only recomputes a verdict), so a redelivery after a crash is harmless.
    return asdict(grading.regrade_solutions(problem_ids=problem_ids))


@shared_task(bind=True, acks_late=True)
def run_import_job_task(self, job_id: int) -> str:
    # A redelivered job that already started is not run twice (see run_import_job).
    job = import_jobs.run_import_job(job_id=job_id, worker_hostname=self.request.hostname or "")
    if job.status == jobs.JobStatus.SUCCEEDED:
        # The quality figures' counts of the new labels, made here rather than on the first
        # look at the quality page (seconds at PRM800K's size; labeling/tallies.py).
        tallies.refresh()
    return job.status


@worker_ready.connect
def fail_import_jobs_of_dead_workers(sender=None, **kwargs) -> None:
    # A worker starting under the name of one killed mid-import finds that job at once (and
    # any worker, one whose heartbeat went stale): its transaction was rolled back, so it is
    # failed and its file discarded, never run again.
    import_jobs.fail_stale_import_jobs(
        older_than=jobs.stale_cutoff(), worker_hostname=getattr(sender, "hostname", "") or ""
    )


@shared_task(acks_late=True)
def propose_steps_task(session_id: int, step_index: int) -> str:
    # Idempotent: a step that already has its proposals is left alone (see propose_steps),
    # so a redelivery after a worker died stores nothing twice.
    from labeling.services import live

    return live.propose_steps(session_id=session_id, step_index=step_index)


@shared_task(acks_late=True)
def prefetch_next_step_task(session_id: int, step_index: int, completion_index: int) -> str:
    # Idempotent as propose_steps_task: a prefetch that ran (or whose step moved on) is skipped.
    from labeling.services import live

    return live.prefetch_next_step(
        session_id=session_id, step_index=step_index, completion_index=completion_index
    )
