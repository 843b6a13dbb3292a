"""Celery shells around trainer.training.runs, trainer.pipeline, trainer.scoring.chunks,
trainer.selection.services and
trainer.sampling.services.
Routing: training, scoring, selection and sampling on `gpu` (a local generator needs the model),
the periodic check on `default` (CELERY_TASK_ROUTES).

Nothing imports this module: `trainer.pipeline` queues these tasks by name.

Delivery choices for training: `acks_late=True` so a message taken by a worker that dies
before it starts the run is delivered again, and `reject_on_worker_lost` left off so a run
that kills its worker (out of memory, a hard time limit) is not re-queued forever. A
redelivered message is harmless either way: `execute_training_run` only starts a *queued*
run, and a run whose worker died is failed by `mark_stale_runs_failed` (at worker start and
from the periodic task) instead of being re-run behind the researcher's back.

Scoring is the opposite case: it is idempotent and resumable (a version's scores never change,
and a chunk writes only what lacks them), so a scoring whose worker was killed must finish.
`score_task` plans the version's chunks and queues one `score_chunk_task` per chunk; each
commits its scores with its done mark. A chunk whose worker died is not left to the broker
(the filesystem transport deletes a message as a worker takes it, Redis gives an
unacknowledged one back only after its visibility timeout, an hour by default, and
`reject_on_worker_lost` would loop forever on a chunk that kills its worker every time): a
worker starting under the dead one's name queues its chunks again (status and message), the
periodic task does the same for chunks whose heartbeat went stale, and a duplicate message
finds its chunk done or taken and returns.
"""

from datetime import timedelta

from celery import shared_task
from celery.signals import worker_ready
from django.conf import settings
from django.utils import timezone

from trainer import pipeline
from trainer.evaluation import sets as evaluation_sets
from trainer.judging import services as judging
from trainer.sampling import services as sampling
from trainer.scoring import chunks as scoring
from trainer.selection import services as selection
from trainer.training import runs


@shared_task(
    bind=True,
    acks_late=True,
    soft_time_limit=settings.PRM_TRAIN_SOFT_TIME_LIMIT,
    time_limit=settings.PRM_TRAIN_TIME_LIMIT,
)
def train_task(self, run_id: int) -> str:
    run = runs.execute_training_run(run_id=run_id, worker_hostname=self.request.hostname or "")
    return run.status


@shared_task(
    acks_late=True,
    soft_time_limit=settings.PRM_SCORE_SOFT_TIME_LIMIT,
    time_limit=settings.PRM_SCORE_TIME_LIMIT,
)
def score_task(model_version_id: int, solution_ids: list[int] | None = None) -> int:
    # Planning is idempotent and a chunk queued twice is scored once, so a redelivery is
    # harmless. Given ids (a message queued before scoring fanned out), it scores them here.
    if solution_ids is not None:
        return pipeline.score_with_model_version(
            model_version_id=model_version_id, solution_ids=solution_ids
        )
    return pipeline.fan_out_scoring(model_version_id=model_version_id)


@shared_task(
    bind=True,
    acks_late=True,
    soft_time_limit=settings.PRM_SCORE_SOFT_TIME_LIMIT,
    time_limit=settings.PRM_SCORE_TIME_LIMIT,
)
def score_chunk_task(self, chunk_id: int) -> int:
    return scoring.run_chunk(chunk_id=chunk_id, worker_hostname=self.request.hostname or "")


@shared_task(
    bind=True,
    acks_late=True,
    soft_time_limit=settings.PRM_SCORE_SOFT_TIME_LIMIT,
    time_limit=settings.PRM_SCORE_TIME_LIMIT,
)
def select_generation_task(self, model_version_id: int, params: dict) -> int | None:
    # Scores the pool, so it runs where the model does (queue gpu). A redelivered message
    # finds the generation its task id already published and selects nothing twice.
    generation = selection.execute_selection(
        model_version_id=model_version_id, params=params, request_id=self.request.id or ""
    )
    return generation.number if generation else None


@shared_task
def periodic_retrain_task() -> int | None:
    now = timezone.now()
    pipeline.requeue_unfinished_scoring(
        activated_before=now - timedelta(seconds=settings.PRM_SCORE_TIME_LIMIT),
        stale_before=now - timedelta(seconds=settings.PRM_RUN_STALE_SECONDS),
    )
    # A sampling run whose worker died without a restart under its name is found here.
    sampling.mark_stale_sampling_runs_failed(
        older_than=timezone.now() - timedelta(seconds=settings.PRM_RUN_STALE_SECONDS)
    )
    evaluation_sets.mark_stale_evaluations_failed(
        older_than=timezone.now() - timedelta(seconds=settings.PRM_RUN_STALE_SECONDS)
    )
    judging.mark_stale_judge_runs_failed(
        older_than=timezone.now() - timedelta(seconds=settings.PRM_RUN_STALE_SECONDS)
    )
    run = runs.maybe_start_scheduled_training()
    return run.pk if run else None


@worker_ready.connect
def fail_runs_of_dead_workers(sender=None, **kwargs) -> None:
    # A worker that starts under the name of one that was killed mid-run finds that run
    # at once, without waiting for its heartbeat to go stale.
    runs.mark_stale_runs_failed(
        older_than=timezone.now() - timedelta(seconds=settings.PRM_RUN_STALE_SECONDS),
        worker_hostname=getattr(sender, "hostname", "") or "",
    )


@worker_ready.connect
def finish_interrupted_scoring(sender=None, **kwargs) -> None:
    # A worker killed mid-scoring left part of the pool with the previous version's scores,
    # and the chunk it held marked running under its name.
    pipeline.requeue_unfinished_scoring(worker_hostname=getattr(sender, "hostname", "") or "")


@shared_task(
    bind=True,
    acks_late=True,
    soft_time_limit=settings.PRM_TRAIN_SOFT_TIME_LIMIT,
    time_limit=settings.PRM_TRAIN_TIME_LIMIT,
)
def sampling_task(self, run_id: int, api_key: str = "") -> str:
    # Delivered like training (acks_late, never re-queued when its worker dies): a resumed
    # run, not a redelivery, is what continues a run whose worker was killed. `api_key` is a
    # researcher's key for their own server, which only the message carries.
    run = sampling.execute_sampling_run(
        run_id=run_id, worker_hostname=self.request.hostname or "", api_key=api_key
    )
    return run.status


@worker_ready.connect
def fail_sampling_runs_of_dead_workers(sender=None, **kwargs) -> None:
    # Marked failed, not re-run: the researcher resumes it, and it does only the items left.
    sampling.mark_stale_sampling_runs_failed(
        older_than=timezone.now() - timedelta(seconds=settings.PRM_RUN_STALE_SECONDS),
        worker_hostname=getattr(sender, "hostname", "") or "",
    )


@shared_task(
    bind=True,
    acks_late=True,
    soft_time_limit=settings.PRM_SCORE_SOFT_TIME_LIMIT,
    time_limit=settings.PRM_SCORE_TIME_LIMIT,
)
def evaluate_task(self, evaluation_id: int) -> str:
    # Only a queued evaluation starts: a redelivered message finds it running or done.
    evaluation = evaluation_sets.run_evaluation(
        evaluation_id=evaluation_id, worker_hostname=self.request.hostname or ""
    )
    return evaluation.status


@worker_ready.connect
def fail_evaluations_of_dead_workers(sender=None, **kwargs) -> None:
    # Failed, not re-run: the researcher evaluates it again (a version's promotion waits).
    evaluation_sets.mark_stale_evaluations_failed(
        older_than=timezone.now() - timedelta(seconds=settings.PRM_RUN_STALE_SECONDS),
        worker_hostname=getattr(sender, "hostname", "") or "",
    )


@shared_task(
    bind=True,
    acks_late=True,
    soft_time_limit=settings.PRM_TRAIN_SOFT_TIME_LIMIT,
    time_limit=settings.PRM_TRAIN_TIME_LIMIT,
)
def judge_task(self, run_id: int, api_key: str = "") -> str:
    # Delivered like sampling: a resumed run, not a redelivery, continues a run whose worker
    # was killed; `api_key` (a researcher's own server's key) travels in the message only.
    run = judging.execute_judge_run(
        run_id=run_id, worker_hostname=self.request.hostname or "", api_key=api_key
    )
    return run.status


@worker_ready.connect
def fail_judge_runs_of_dead_workers(sender=None, **kwargs) -> None:
    judging.mark_stale_judge_runs_failed(
        older_than=timezone.now() - timedelta(seconds=settings.PRM_RUN_STALE_SECONDS),
        worker_hostname=getattr(sender, "hostname", "") or "",
    )
