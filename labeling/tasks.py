from celery import shared_task

from labeling import services


@shared_task(acks_late=True)
def regrade_solutions_task(problem_ids: list[int] | None = None) -> int:
    # Idempotent (it only recomputes a verdict), so a redelivery after a crash is harmless.
    return services.regrade_solutions(problem_ids=problem_ids)
