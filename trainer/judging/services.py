"""Judge runs: a generator acting as a judge rates the steps of chosen solutions.

A run works through its items (solutions) in position order. Each item's judge labels, the
item's `done_at` and the run's counts are committed in one transaction, so a worker killed
mid-run leaves whole items only and a resumed run does exactly the items not done. Item p is
asked with seed `seed + p`: a resumed run asks what it would have asked anyway.

A reply that cannot be read (`prompts.read_reply` says None) is recorded on its item as
unreadable and counted on the run: no label, no failure; the run goes on. A generator that
cannot answer fails the run (resumable), as a sampling run's does.

A run is a job (`core.jobs`), delivered like sampling runs: acked late, never re-queued when
its worker dies; a run whose worker is gone is marked failed (resumable) by
`mark_stale_judge_runs_failed`, at worker start, periodically, and when a run is requested or
resumed.
"""

import json
import logging
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

from django.db import transaction
from django.utils import timezone

from core import jobs
from core.errors import DomainError, Invalid, NotFound
from core.params import Params, param
from generators import GenerationRequest, GeneratorSpec, SamplingSettings, open_generator
from generators.models import LocalModel
from labeling.models import Solution
from trainer.judging.models import REPLY_MAX_CHARS, JudgeFormat, JudgeLabel, JudgeRun, JudgeRunItem
from trainer.judging.prompts import JUDGE_PROMPT_VERSION, judge_messages, read_reply

logger = logging.getLogger(__name__)

Status = JudgeRun.Status

JUDGE_TASK = "trainer.tasks.judge_task"
MAX_ITEMS = 10_000
MAX_ID = 2**63 - 1
STOPPED = "the worker stopped; resume to continue"
# A judge's defaults: near-greedy (a verdict, not a variety of samples), and room for a line
# per step of a long solution.
JUDGE_SETTINGS = SamplingSettings(temperature=0.2, max_tokens=768)


class InvalidJudgeRun(Invalid):
    """A judge request whose ids, format or settings are wrong."""


class JudgeRefused(jobs.JobRefused):
    """A cancel or resume the run's status does not allow."""


class JudgeRunNotFound(NotFound):
    """No judge run has this id."""


@dataclass(frozen=True)
class JudgeParams(Params):
    """What a judge run asks beside its generator and sampling settings: the one definition
    the page's form, the API's fields and `manage.py judge`'s options come from."""

    invalid = InvalidJudgeRun
    noun = "judge parameter"

    format: str = param(
        JudgeFormat.PER_STEP.value,
        label="Format",
        help="A rating and a reason per step: +1, 0 or -1 and why; or the first wrong step, "
        "ProcessBench's critic: the index of the first wrong step (+1 before it, -1 at it).",
        choices=dict(JudgeFormat.choices),
    )


class NothingStored(DomainError):
    """The run read no reply it could use: it fails, saying so."""


# --- requesting, cancelling, resuming ---------------------------------------------------------


def _solution_ids(ids: list[int] | None) -> list[int]:
    if not isinstance(ids, list | tuple) or not all(
        isinstance(i, int) and not isinstance(i, bool) and 0 < i <= MAX_ID for i in ids
    ):
        raise InvalidJudgeRun("Solution ids are a list of positive whole numbers.")
    ids = list(dict.fromkeys(ids))
    if not ids:
        raise InvalidJudgeRun("A judge run needs solution ids.")
    if len(ids) > MAX_ITEMS:
        raise InvalidJudgeRun(f"At most {MAX_ITEMS} solutions per run, not {len(ids)}.")
    found = set(Solution.objects.filter(pk__in=ids).values_list("pk", flat=True))
    missing = [i for i in ids if i not in found]
    if missing:
        shown = ", ".join(str(i) for i in missing[:10])
        more = f" and {len(missing) - 10} more" if len(missing) > 10 else ""
        raise InvalidJudgeRun(f"No solution with id {shown}{more}.")
    return ids


def request_judge_run(
    *,
    user,
    generator: GeneratorSpec,
    settings: SamplingSettings,
    params: JudgeParams,
    solution_ids: list[int],
    origin: str = jobs.JobOrigin.PAGE,
    enqueue: bool = True,
) -> JudgeRun:
    """Record a queued run with one item per solution, and hand it to a worker once
    committed. Raises InvalidJudgeRun, InvalidGenerator, or BrokerUnavailable (the run is then
    recorded as failed, and resumes)."""
    if not isinstance(generator, GeneratorSpec) or not isinstance(settings, SamplingSettings):
        raise InvalidJudgeRun("A generator spec and sampling settings are needed.")
    if not isinstance(params, JudgeParams):
        raise InvalidJudgeRun("Judge parameters are needed.")
    if (
        generator.backend == "local"
        and not LocalModel.objects.filter(name=generator.model).exists()
    ):
        raise InvalidJudgeRun(
            f"No local model is named {generator.model!r}: register it under PRM_MODEL_DIR first."
        )
    ids = _solution_ids(solution_ids)
    mark_stale_judge_runs_failed(older_than=jobs.stale_cutoff())
    jobs.refuse_past_live_limit(model=JudgeRun, user=user)
    with transaction.atomic():
        run = JudgeRun.objects.create(
            requested_by=user,
            origin=origin,
            generator=generator.to_dict(),
            sampling=settings.to_dict(),
            prompt_version=JUDGE_PROMPT_VERSION,
            format=params.format,
            celery_task_id=str(uuid.uuid4()),
        )
        JudgeRunItem.objects.bulk_create(
            [JudgeRunItem(run=run, position=p, solution_id=pk) for p, pk in enumerate(ids)],
            batch_size=1000,
        )
        _log(run.pk, f"Queued by {run.requester}: {len(ids)} solutions, format {run.format}.")
        if enqueue:
            # A researcher's key for their own server travels in the task's message only.
            jobs.queue_on_commit(
                model=JudgeRun, pk=run.pk, task=JUDGE_TASK, api_key=generator.api_key
            )
    return jobs.queued_or_raise(model=JudgeRun, pk=run.pk)


def get_judge_run(*, run_id: int) -> JudgeRun:
    try:
        return JudgeRun.objects.select_related("requested_by").get(pk=run_id)
    except JudgeRun.DoesNotExist:
        raise JudgeRunNotFound(f"No judge run {run_id}.") from None


def cancel_judge_run(*, run_id: int) -> JudgeRun:
    """A queued run is cancelled at once; a running one stops after its current solution."""
    get_judge_run(run_id=run_id)
    return jobs.request_cancel(
        model=JudgeRun, pk=run_id, stops="after the current solution", refused=JudgeRefused
    )


def resume_judge_run(*, run_id: int, enqueue: bool = True, api_key: str = "") -> JudgeRun:
    """Queue a failed or cancelled run again; it does only the solutions not done yet."""
    get_judge_run(run_id=run_id)
    return jobs.resume_items(
        model=JudgeRun,
        pk=run_id,
        left=JudgeRunItem.objects.filter(run_id=run_id, done_at__isnull=True),
        left_noun="solutions",
        task=JUDGE_TASK,
        refused=JudgeRefused,
        advice=f"{STOPPED}.",
        enqueue=enqueue,
        api_key=api_key,
    )


def mark_stale_judge_runs_failed(*, older_than, worker_hostname: str = "") -> list[int]:
    """Fail running runs whose worker is gone (`jobs.recover_stale`'s rule); they resume."""
    return jobs.recover_stale(
        model=JudgeRun, older_than=older_than, worker_hostname=worker_hostname, advice=f"{STOPPED}."
    )


# --- executing (the body of the Celery task) --------------------------------------------------


def execute_judge_run(*, run_id: int, worker_hostname: str = "", api_key: str = "") -> JudgeRun:
    """Judge the solutions of a queued run not done yet; never raises for the run.

    Only a queued run starts: a redelivered message finds it running or finished and does
    nothing. Cancellation is honoured between solutions; a generator that fails fails the run
    with its message, and the solutions done stay done.
    """
    run, _ = jobs.run_items(
        model=JudgeRun,
        pk=run_id,
        worker_hostname=worker_hostname,
        work=partial(_work, api_key=api_key),
        log=partial(_log, run_id),
        done=lambda run: f"Done: {run.stored} labels stored, {run.unreadable} replies unreadable.",
    )
    return run


def _work(run: JudgeRun, *, api_key: str = "") -> bool:
    """Judge the solutions left; False when cancelled before the last."""
    spec = GeneratorSpec.from_dict(run.generator).with_api_key(api_key)
    settings = SamplingSettings.from_dict(run.sampling)
    todo = list(
        JudgeRunItem.objects.filter(run=run, done_at__isnull=True)
        .order_by("position")
        .values_list("pk", flat=True)
    )
    if not todo:
        return True
    generator = open_generator(spec)
    try:
        for item_id in todo:
            if jobs.cancel_requested(model=JudgeRun, pk=run.pk):
                return False
            item = JudgeRunItem.objects.select_related("solution__problem").get(pk=item_id)
            _judge_item(run=run, item=item, generator=generator, settings=settings)
    finally:
        generator.close()
    done = JudgeRun.objects.only("stored", "unreadable").get(pk=run.pk)
    if done.stored == 0 and done.unreadable:
        # Not a success: a run that stored nothing must not read "Succeeded" (issue 43, item 5).
        raise NothingStored(
            f"No judge label was stored: every reply ({done.unreadable}) was unreadable. The "
            "replies are on this page: try another model or the other format."
        )
    return True


def _judge_item(*, run: JudgeRun, item: JudgeRunItem, generator, settings) -> None:
    solution = item.solution
    steps = list(solution.steps or [])
    # Asked outside the transaction: the run's row stays free for heartbeats and cancels.
    request = GenerationRequest(
        messages=judge_messages(problem=solution.problem.text, steps=steps, format=run.format),
        seed=settings.seed + item.position,
    )
    reply = generator.generate(requests=[request], settings=settings)[0] if steps else ""
    judged = read_reply(reply, steps=len(steps), format=run.format)
    labels = [
        JudgeLabel(solution=solution, index=j.index, run=run, rating=j.rating, reason=j.reason)
        for j in judged or []
    ]
    with transaction.atomic():
        locked = JudgeRun.objects.select_for_update().get(pk=run.pk)
        if locked.status != Status.RUNNING or locked.worker_pid != os.getpid():
            raise jobs.Superseded()
        JudgeLabel.objects.bulk_create(labels)
        now = timezone.now()
        JudgeRunItem.objects.filter(pk=item.pk).update(
            done_at=now,
            stored=len(labels),
            unreadable=judged is None,
            reply=reply[:REPLY_MAX_CHARS],
        )
        what = "unreadable reply" if judged is None else f"{len(labels)} judge labels"
        JudgeRun.objects.filter(pk=run.pk).update(
            stored=locked.stored + len(labels),
            unreadable=locked.unreadable + (judged is None),
            heartbeat_at=now,
            log_tail=jobs.appended(
                locked.log_tail, f"Solution {solution.pk} (item {item.position}): {what}."
            ),
        )


# --- reading ----------------------------------------------------------------------------------


def _log(run_id: int, line: str) -> None:
    jobs.append_log(model=JudgeRun, pk=run_id, text=line)


def progress(run: JudgeRun) -> dict[str, Any]:
    """Solutions done and in all, for pages and the API."""
    items = JudgeRunItem.objects.filter(run=run)
    total = items.count()
    done = items.filter(done_at__isnull=False).count()
    return {"done": done, "total": total, "percent": round(100 * done / total) if total else 0}


def provenance(run: JudgeRun) -> dict[str, Any]:
    """Where a judge label came from: what every exported line carries."""
    return {
        "judge_run": run.pk,
        "generator": run.generator,
        "sampling": run.sampling,
        "prompt_version": run.prompt_version,
        "format": run.format,
    }


def judged_solutions(*, run: JudgeRun, limit: int | None = None) -> list[dict[str, Any]]:
    """The run's judged solutions in order, each with its per-step rating and reason (None
    for a step the judge did not rate), for the page."""
    items = (
        JudgeRunItem.objects.filter(run=run, done_at__isnull=False)
        .select_related("solution__problem")
        .order_by("position")
    )
    if limit is not None:
        items = items[:limit]
    items = list(items)
    labels: dict[int, dict[int, JudgeLabel]] = {}
    for label in JudgeLabel.objects.filter(run=run, solution__in=[i.solution_id for i in items]):
        labels.setdefault(label.solution_id, {})[label.index] = label
    return [_judged(item, labels.get(item.solution_id, {})) for item in items]


def _judged(item: JudgeRunItem, labels: dict[int, JudgeLabel]) -> dict[str, Any]:
    steps = list(item.solution.steps or [])
    return {
        "item": item,
        "solution": item.solution,
        "steps": [
            {
                "index": i,
                "text": text,
                "rating": labels[i].rating if i in labels else None,
                "reason": labels[i].reason if i in labels else "",
            }
            for i, text in enumerate(steps)
        ],
    }


def export_lines(*, run: JudgeRun) -> Iterator[str]:
    """The run's judge labels as JSONL, one line per solution it could read, streamed in
    chunks: the problem, the steps, the judge's rating and reason per step (null where it
    gave none) and the provenance. Never part of the PRM800K export: a label source of its
    own."""
    source = provenance(run)
    items = (
        JudgeRunItem.objects.filter(run=run, done_at__isnull=False, unreadable=False)
        .select_related("solution__problem")
        .order_by("position")
    )
    for item in items.iterator(chunk_size=200):
        by_index = {
            label.index: label
            for label in JudgeLabel.objects.filter(run=run, solution_id=item.solution_id)
        }
        solution = item.solution
        steps = list(solution.steps or [])
        line = {
            "solution_id": solution.pk,
            "problem": {
                "text": solution.problem.text,
                "answer": solution.problem.answer,
                "unique_id": solution.problem.unique_id,
            },
            "steps": steps,
            "ratings": [by_index[i].rating if i in by_index else None for i in range(len(steps))],
            "reasons": [by_index[i].reason if i in by_index else None for i in range(len(steps))],
            "provenance": source,
        }
        yield json.dumps(line, ensure_ascii=False) + "\n"
