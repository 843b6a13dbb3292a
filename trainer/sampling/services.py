"""Sampling runs: ask a generator for solutions (or rollouts) and keep what it wrote.

A run works through its items (problems, or solutions for rollouts) in position order. Each
item's output (the solutions it added, or its rollout labels), the item's `done_at` and the
run's counts are committed in one transaction, so a worker killed mid-run leaves whole items
only and a resumed run does exactly the items not done. Sample i of item p is drawn with seed
`seed + p * samples + i`: a resumed run asks for the samples it would have drawn anyway.

A run is a job (`core.jobs`), delivered like training runs: the task is acked late but
never re-queued when its worker dies; a run whose worker is gone is marked failed (resumable) by
`mark_stale_sampling_runs_failed`, at worker start and whenever a run is requested or resumed.
"""

import logging
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from core import jobs
from core.errors import Invalid, NotFound
from core.params import Params, param, refused
from generators import (
    GeneratorSpec,
    InvalidGenerator,
    Metered,
    SamplingSettings,
    Usage,
    open_generator,
    sample_solutions,
)
from generators.models import LocalModel
from labeling.grading import grade_answer
from labeling.models import Problem, Solution, solution_digest
from labeling.signals import solutions_added
from trainer.sampling.models import RolloutLabel, SamplingRun, SamplingRunItem
from trainer.sampling.signals import sampling_run_succeeded

logger = logging.getLogger(__name__)

Status = SamplingRun.Status
Purpose = SamplingRun.Purpose
Search = SamplingRun.Search

SAMPLING_TASK = "trainer.tasks.sampling_task"

MAX_SAMPLES = {Purpose.SOLUTIONS: 1024, Purpose.ROLLOUTS: 64}
# A run is one row per item and a page lists them: beyond this, split the work into runs.
MAX_ITEMS = 10_000
# The largest primary key (BigAutoField): a larger id is no row, and PostgreSQL would refuse it.
MAX_ID = 2**63 - 1
STOPPED = "the worker stopped; resume to continue"


class InvalidSamplingRun(Invalid):
    """A sampling request whose purpose, ids, sample count or selection is wrong."""


@dataclass(frozen=True)
class RolloutParams(Params):
    """How a run of rollouts labels a solution: the one definition of the option that the
    sampling form, the API and `manage.py sample` take (`trainer.sampling.rollouts`)."""

    invalid = InvalidSamplingRun
    noun = "rollout parameter"

    search: str = param(
        Search.EVERY_STEP.value,
        label="Rollout search",
        help="Every step: k rollouts from every step (Math-Shepherd). First-error search: a "
        "binary search for the first step whose prefix can no longer reach the answer (OmegaPRM), "
        "about log2(n) steps rolled out instead of n - 1. Rollout runs only.",
        choices={choice.value: choice.label for choice in Search},
    )


class SamplingRefused(jobs.JobRefused):
    """A cancel or resume the run's status does not allow."""


class SamplingRunNotFound(NotFound):
    """No sampling run has this id."""


# --- choosing problems ------------------------------------------------------------------------


def problem_ids_matching(
    *, split: str = "", subject: str = "", level: int | None = None, limit: int = 100
) -> list[int]:
    """Ids of the good problems a filter names (empty filters match all), lowest first."""
    problems = Problem.objects.filter(is_bad=False)
    if split:
        problems = problems.filter(split=split)
    if subject:
        problems = problems.filter(subject=subject)
    if level is not None:
        problems = problems.filter(level=level)
    return list(problems.order_by("pk").values_list("pk", flat=True)[: max(0, limit)])


# --- requesting, cancelling, resuming ---------------------------------------------------------


def _unique(ids: list[int] | None, *, what: str) -> list[int]:
    if ids is None:
        return []
    if not isinstance(ids, list | tuple) or not all(
        isinstance(i, int) and not isinstance(i, bool) and 0 < i <= MAX_ID for i in ids
    ):
        raise InvalidSamplingRun(f"{what} ids are a list of positive whole numbers.")
    return list(dict.fromkeys(ids))


def _check_ids(model, ids: list[int], *, what: str) -> None:
    found = set(model.objects.filter(pk__in=ids).values_list("pk", flat=True))
    missing = [i for i in ids if i not in found]
    if missing:
        shown = ", ".join(str(i) for i in missing[:10])
        more = f" and {len(missing) - 10} more" if len(missing) > 10 else ""
        raise InvalidSamplingRun(f"No {what} with id {shown}{more}.")


def _check_generator(spec: GeneratorSpec) -> None:
    if spec.backend == "local" and not LocalModel.objects.filter(name=spec.model).exists():
        raise InvalidGenerator(
            f"No local model is named {spec.model!r}: register it under PRM_MODEL_DIR first."
        )


def request_sampling_run(
    *,
    user,
    purpose: str,
    generator: GeneratorSpec,
    settings: SamplingSettings,
    samples: int,
    problem_ids: list[int] | None = None,
    solution_ids: list[int] | None = None,
    then_select: Mapping[str, Any] | None = None,
    search: str = Search.EVERY_STEP,
    origin: str = jobs.JobOrigin.PAGE,
    enqueue: bool = True,
) -> SamplingRun:
    """Record a queued run with one item per problem (or solution), and hand it to a worker
    once committed.

    Purpose `solutions` takes problem ids and draws `samples` (1..1024) solutions of each;
    `rollouts` takes solution ids and rolls each step out `samples` (1..64) times.
    `then_select` (selection parameters, `{}` for the SELECTION_* settings) queues the
    selection of the next generation once the run succeeds. `search` (RolloutParams) is how a
    run of rollouts labels each solution. Raises InvalidSamplingRun,
    InvalidGenerator, or BrokerUnavailable (the run is then recorded as failed).
    """
    if purpose not in Purpose.values:
        raise InvalidSamplingRun(f"purpose must be one of {', '.join(Purpose.values)}.")
    if not isinstance(generator, GeneratorSpec) or not isinstance(settings, SamplingSettings):
        raise InvalidSamplingRun("A generator spec and sampling settings are needed.")
    _check_generator(generator)
    search = RolloutParams(search=search).search
    if purpose == Purpose.SOLUTIONS and search != Search.EVERY_STEP:
        raise refused(
            InvalidSamplingRun,
            "search",
            "Only a run of rollouts searches: a run of solutions takes search every_step.",
        )
    high = MAX_SAMPLES[purpose]
    if isinstance(samples, bool) or not isinstance(samples, int) or not 1 <= samples <= high:
        raise InvalidSamplingRun(f"samples must be a whole number from 1 to {high}.")
    problems = _unique(problem_ids, what="Problem")
    solutions = _unique(solution_ids, what="Solution")
    if purpose == Purpose.SOLUTIONS:
        if solutions or not problems:
            raise InvalidSamplingRun("A run of solutions takes problem ids, and only those.")
        ids, model, field = problems, Problem, "problem_id"
    else:
        if problems or not solutions:
            raise InvalidSamplingRun("A run of rollouts takes solution ids, and only those.")
        if then_select is not None:
            raise InvalidSamplingRun("Only a run of solutions can select the next generation.")
        ids, model, field = solutions, Solution, "solution_id"
    if len(ids) > MAX_ITEMS:
        raise InvalidSamplingRun(f"At most {MAX_ITEMS} items per run, not {len(ids)}.")
    _check_ids(model, ids, what=model._meta.verbose_name)
    if then_select is not None:
        # Checked by the edge that takes it (the form, the API) with the selection's own
        # parameters, so a bad one is refused there, not logged after hours of sampling; and
        # again when the selection is requested.
        then_select = dict(then_select)

    mark_stale_sampling_runs_failed(older_than=jobs.stale_cutoff())
    jobs.refuse_past_live_limit(model=SamplingRun, user=user)
    with transaction.atomic():
        run = SamplingRun.objects.create(
            purpose=purpose,
            requested_by=user,
            origin=origin,
            generator=generator.to_dict(),
            sampling=settings.to_dict(),
            samples=samples,
            search=search,
            then_select=then_select,
            celery_task_id=str(uuid.uuid4()),
        )
        SamplingRunItem.objects.bulk_create(
            [
                SamplingRunItem(run=run, position=position, **{field: pk})
                for position, pk in enumerate(ids)
            ],
            batch_size=1000,
        )
        how = "" if search == Search.EVERY_STEP else f", {Search(search).label.lower()}"
        _log_to_run(
            run.pk, f"Queued by {run.requester}: {len(ids)} items, {samples} samples each{how}."
        )
        if enqueue:
            # A key the researcher gave for their own server travels in the task's message
            # only: never in the run's row, never in a log.
            jobs.queue_on_commit(
                model=SamplingRun, pk=run.pk, task=SAMPLING_TASK, api_key=generator.api_key
            )
    return jobs.queued_or_raise(model=SamplingRun, pk=run.pk)


def _get(run_id: int) -> SamplingRun:
    try:
        return SamplingRun.objects.get(pk=run_id)
    except SamplingRun.DoesNotExist:
        raise SamplingRunNotFound(f"No sampling run {run_id}.") from None


def cancel_sampling_run(*, run_id: int) -> SamplingRun:
    """A queued run is cancelled at once; a running one stops after its current item."""
    _get(run_id)
    return jobs.request_cancel(
        model=SamplingRun, pk=run_id, stops="after the current item", refused=SamplingRefused
    )


def resume_sampling_run(*, run_id: int, enqueue: bool = True, api_key: str = "") -> SamplingRun:
    """Queue a failed or cancelled run again; it does only the items not done yet. A run
    whose server takes the researcher's own key needs `api_key` again (it was never stored).

    Raises SamplingRefused for a run that is live or succeeded, BrokerUnavailable when the
    task cannot be queued (the run is failed again, still resumable).
    """
    _get(run_id)
    return jobs.resume_items(
        model=SamplingRun,
        pk=run_id,
        left=SamplingRunItem.objects.filter(run_id=run_id, done_at__isnull=True),
        left_noun="items",
        task=SAMPLING_TASK,
        refused=SamplingRefused,
        advice=f"{STOPPED}.",
        enqueue=enqueue,
        api_key=api_key,
    )


def mark_stale_sampling_runs_failed(
    *, older_than: datetime, worker_hostname: str = ""
) -> list[int]:
    """Fail running runs whose worker is gone (`jobs.recover_stale`'s rule); return their ids.
    A failed run resumes."""
    return jobs.recover_stale(
        model=SamplingRun,
        older_than=older_than,
        worker_hostname=worker_hostname,
        advice=f"{STOPPED}.",
    )


# --- executing (the body of the Celery task) --------------------------------------------------


def execute_sampling_run(
    *, run_id: int, worker_hostname: str = "", api_key: str = ""
) -> SamplingRun:
    """Work through the items of a queued run not done yet; never raises for the run.

    Only a queued run starts: a redelivered message finds it running or finished and does
    nothing. Cancellation is honoured between items; a generator that fails fails the run with
    its message, and the items done stay done.
    """
    run, succeeded = jobs.run_items(
        model=SamplingRun,
        pk=run_id,
        worker_hostname=worker_hostname,
        work=partial(_work, api_key=api_key),
        log=partial(_log_to_run, run_id),
        done=lambda run: f"Done: {run.stored} stored, skipped {run.skipped or 'none'}.",
    )
    if run.stored:
        # What it stored is in the pool whatever became of the run (cancelled, failed): the
        # active model version scores it as it does an import's (trainer.pipeline).
        transaction.on_commit(partial(solutions_added.send, sender=Solution, count=run.stored))
    if succeeded and run.then_select is not None:
        # The selection it chains listens (trainer.pipeline): sampling stays below it.
        transaction.on_commit(
            partial(sampling_run_succeeded.send, sender=SamplingRun, run_id=run_id)
        )
    return run


def _work(run: SamplingRun, *, api_key: str = "") -> bool:
    """Do the items left; False when cancelled before the last."""
    spec = GeneratorSpec.from_dict(run.generator).with_api_key(api_key)
    sampling = SamplingSettings.from_dict(run.sampling)
    todo = list(
        SamplingRunItem.objects.filter(run=run, done_at__isnull=True)
        .order_by("position")
        .values_list("pk", flat=True)
    )
    if not todo:
        return True
    handle = _sample_item if run.purpose == Purpose.SOLUTIONS else _roll_out_item
    # Counted per item and committed with it: the run's cost is that of the items done.
    generator = Metered(open_generator(spec))
    try:
        for item_id in todo:
            if jobs.cancel_requested(model=SamplingRun, pk=run.pk):
                return False
            item = SamplingRunItem.objects.select_related("problem", "solution__problem").get(
                pk=item_id
            )
            handle(run=run, item=item, generator=generator, settings=sampling)
    finally:
        generator.close()
    return True


def _claim(run: SamplingRun) -> SamplingRun:
    """Inside the item's transaction: lock the run and check it is still this worker's."""
    locked = SamplingRun.objects.select_for_update().get(pk=run.pk)
    if locked.status != Status.RUNNING or locked.worker_pid != os.getpid():
        raise jobs.Superseded()
    return locked


def _complete(
    *,
    locked: SamplingRun,
    item: SamplingRunItem,
    stored: int,
    skipped: dict[str, int],
    spent: Usage,
    line: str,
) -> None:
    now = timezone.now()
    SamplingRunItem.objects.filter(pk=item.pk).update(done_at=now, stored=stored)
    totals = dict(locked.skipped or {})
    for reason, count in skipped.items():
        totals[reason] = totals.get(reason, 0) + count
    SamplingRun.objects.filter(pk=locked.pk).update(
        stored=locked.stored + stored,
        skipped=totals,
        generator_calls=locked.generator_calls + spent.calls,
        completion_tokens=locked.completion_tokens + spent.completion_tokens,
        tokens_unreported=locked.tokens_unreported + spent.unreported,
        heartbeat_at=now,
        log_tail=jobs.appended(locked.log_tail, line),
    )


def _sample_item(*, run: SamplingRun, item: SamplingRunItem, generator: Metered, settings) -> None:
    problem = item.problem
    before = generator.usage.copy()
    seed_offset = item.position * run.samples
    samples = sample_solutions(
        generator=generator,
        problem=problem.text,
        n=run.samples,
        settings=settings,
        seed_offset=seed_offset,
    )
    # Graded before the transaction opens, which keeps it short.
    verdicts = [
        grade_answer(sample.answer, problem.answer) if sample.finished else None
        for sample in samples
    ]
    source = GeneratorSpec.from_dict(run.generator).source
    seed = settings.seed + seed_offset
    skipped = {"duplicate": 0, "unfinished": 0}
    stored = 0
    with transaction.atomic():
        locked = _claim(run)
        seen = set(Solution.objects.filter(problem=problem).values_list("content_hash", flat=True))
        for index, (sample, correct) in enumerate(zip(samples, verdicts, strict=True)):
            if not sample.finished:
                skipped["unfinished"] += 1
                continue
            digest = solution_digest(steps=sample.steps, answer=sample.answer)
            if digest in seen:
                skipped["duplicate"] += 1
                continue
            seen.add(digest)
            try:
                # A savepoint: an import may add the same solution between read and write.
                with transaction.atomic():
                    Solution.objects.create(
                        problem=problem,
                        steps=sample.steps,
                        answer=sample.answer,
                        is_correct=correct,
                        source=source,
                        sampling_run=run,
                        meta={"sampling": {"seed": seed + index, "sample": index}},
                    )
            except IntegrityError:
                skipped["duplicate"] += 1
                continue
            stored += 1
        line = (
            f"Problem {problem.pk} (item {item.position}): {stored} stored, "
            f"{skipped['duplicate']} duplicate, {skipped['unfinished']} unfinished."
        )
        spent = generator.usage.since(before)
        _complete(locked=locked, item=item, stored=stored, skipped=skipped, spent=spent, line=line)


def _roll_out_item(
    *, run: SamplingRun, item: SamplingRunItem, generator: Metered, settings
) -> None:
    # Imported here: rollouts are their own module, and only a worker needs them.
    from trainer.sampling.rollouts import estimate_solution

    before = generator.usage.copy()
    # Generated outside the transaction: the run's row stays free for heartbeats and cancels.
    labels = estimate_solution(
        run=run, solution=item.solution, generator=generator, settings=settings
    )
    spent = generator.usage.since(before)
    with transaction.atomic():
        locked = _claim(run)
        RolloutLabel.objects.bulk_create(labels)
        stored = len(labels)
        implied = sum(1 for label in labels if label.implied)
        line = (
            f"Solution {item.solution_id} (item {item.position}): {stored} rollout labels"
            f"{f' ({implied} implied)' if implied else ''}, {spent.calls} generator calls."
        )
        _complete(locked=locked, item=item, stored=stored, skipped={}, spent=spent, line=line)


# --- recording --------------------------------------------------------------------------------


def _log_to_run(run_id: int, line: str) -> None:
    jobs.append_log(model=SamplingRun, pk=run_id, text=line)


def progress(run: SamplingRun) -> dict[str, Any]:
    """Items done and in all, for pages and the API."""
    items = SamplingRunItem.objects.filter(run=run)
    total = items.count()
    done = items.filter(done_at__isnull=False).count()
    return {"done": done, "total": total, "percent": round(100 * done / total) if total else 0}
