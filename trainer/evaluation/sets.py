"""Evaluation sets as records: register one, evaluate a model version on it, compare versions.

A researcher registers a ProcessBench file (its items stored in one step) or problems held out
from training (their labeled solutions are the items). The problems of every set are never
trained on, whatever route they arrive by: `evaluation_problem_keys` (matched by
`problem_key`) is what the training dataset leaves out, through `trainer.training.gates`.
After a run records a version,
`trainer.pipeline` queues one evaluation per set; `run_evaluation` is the job's body: it
scores the items, stores the figures (`trainer.evaluation.figures`) and, on the set that
decides promotion, hands the comparison with the active version to
`model_versions.promote_after_evaluation`.
"""

import logging
import threading
from pathlib import Path

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import QuerySet

from core import jobs
from core.errors import Conflict, Invalid
from core.jobs import JobStatus
from labeling.models import Problem, Solution, problem_key
from trainer.evaluation import figures, processbench
from trainer.evaluation.figures import EvalItem
from trainer.evaluation.models import Evaluation, EvaluationSet
from trainer.training import checkpoints, dataset, gates, model_versions
from trainer.training.gates import Comparison
from trainer.training.models import ModelVersion
from trainer.training.selectors import active_model_version

logger = logging.getLogger(__name__)

# Items are scored shortest first, in batches of similar length under a budget of characters
# (about a quarter of them in tokens), with a progress write after each: long and short
# solutions never share a padded batch (a 135M model took 44 minutes on 162 items in file
# order, 16 at a time; issue 46, item 1).
BATCH_CHARS = 64_000
BATCH_MAX = 64


class EvaluationSetInvalid(Invalid):
    """A registration that cannot be: no items, an unknown problem, a taken name."""


# --- registering ------------------------------------------------------------------------------


def _create(*, name: str, kind: str, user, **fields) -> EvaluationSet:
    name = name.strip()
    if not name:
        raise EvaluationSetInvalid("An evaluation set needs a name.")
    if EvaluationSet.objects.filter(name=name).exists():
        raise EvaluationSetInvalid(f"An evaluation set is already named {name!r}.")
    # The first set registered decides promotion until another is chosen.
    first = not EvaluationSet.objects.filter(decides_promotion=True).exists()
    try:
        with transaction.atomic():
            return EvaluationSet.objects.create(
                name=name, kind=kind, created_by=user, decides_promotion=first, **fields
            )
    except IntegrityError:
        raise EvaluationSetInvalid(f"An evaluation set is already named {name!r}.") from None


def register_processbench_set(*, name: str, path: Path | str, user=None) -> EvaluationSet:
    """Read a ProcessBench file (JSONL or Parquet) and store its items as an evaluation set."""
    try:
        items = processbench.read_items(path=path)
    except OSError as exc:
        raise EvaluationSetInvalid(f"Cannot read {Path(path).name}: {exc.strerror}") from None
    if not items:
        raise EvaluationSetInvalid(f"{Path(path).name}: no items.")
    stored = [{"problem": i.problem, "steps": i.steps, "label": i.label} for i in items]
    return _create(
        name=name,
        kind=EvaluationSet.Kind.PROCESSBENCH,
        user=user,
        source=Path(path).name,
        items=stored,
    )


def register_held_out_set(*, name: str, problem_ids: list[int], user=None) -> EvaluationSet:
    """Hold these problems out of every training run from now on; their labeled solutions are
    the set's items."""
    wanted = set(problem_ids)
    if not wanted:
        raise EvaluationSetInvalid("Name at least one problem to hold out.")
    found = set(Problem.objects.filter(pk__in=wanted).values_list("pk", flat=True))
    if missing := sorted(wanted - found):
        raise EvaluationSetInvalid(f"No such problems: {', '.join(map(str, missing))}.")
    with transaction.atomic():
        evaluation_set = _create(name=name, kind=EvaluationSet.Kind.HELD_OUT, user=user)
        evaluation_set.problems.set(found)
    return evaluation_set


def choose_for_promotion(*, evaluation_set_id: int) -> EvaluationSet:
    with transaction.atomic():
        EvaluationSet.objects.filter(decides_promotion=True).update(decides_promotion=False)
        EvaluationSet.objects.filter(pk=evaluation_set_id).update(decides_promotion=True)
    return EvaluationSet.objects.get(pk=evaluation_set_id)


# --- selectors --------------------------------------------------------------------------------


def evaluation_sets():
    return EvaluationSet.objects.prefetch_related("problems")


def sets_not_evaluated_on(*, model_version: ModelVersion) -> QuerySet[EvaluationSet]:
    """The registered sets this version has no evaluation on (registered after it)."""
    return EvaluationSet.objects.exclude(evaluations__model_version=model_version).order_by("pk")


def held_out_problem_ids() -> set[int]:
    """Problems of held-out evaluation sets: the training dataset leaves them out."""
    return set(
        EvaluationSet.problems.through.objects.filter(
            evaluationset__kind=EvaluationSet.Kind.HELD_OUT
        ).values_list("problem_id", flat=True)
    )


def evaluation_problem_keys() -> set[str]:
    """The `problem_key` of every problem any evaluation set holds: a held-out set's
    problems and a ProcessBench set's items. Training leaves out every example of them,
    whatever route (an import of the same file as labels, another spelling) it came by."""
    texts = set(
        Problem.objects.filter(evaluation_sets__isnull=False).values_list("text", flat=True)
    )
    for items in EvaluationSet.objects.filter(kind=EvaluationSet.Kind.PROCESSBENCH).values_list(
        "items", flat=True
    ):
        texts.update(item["problem"] for item in items or [])
    return {problem_key(text) for text in texts}


def promotion_set() -> EvaluationSet | None:
    return EvaluationSet.objects.filter(decides_promotion=True).first()


def items_of(evaluation_set: EvaluationSet) -> list[EvalItem]:
    """The set's items: the stored ProcessBench items, or each labeled solution of the
    held-out problems (its steps up to its first -1, graded by its final answer)."""
    if evaluation_set.kind == EvaluationSet.Kind.PROCESSBENCH:
        return [EvalItem(i["problem"], i["steps"], i["label"]) for i in evaluation_set.items]
    problem_ids = set(evaluation_set.problems.values_list("pk", flat=True))
    examples = [
        e
        for e in dataset.build_examples(include_screening=True)
        if e.problem_id in problem_ids and e.solution_id is not None and e.steps
    ]
    graded = dict(
        Solution.objects.filter(pk__in={e.solution_id for e in examples}).values_list(
            "pk", "is_correct"
        )
    )
    return [
        EvalItem(
            problem=e.problem,
            steps=e.steps,
            label=e.labels.index(-1) if -1 in e.labels else -1,
            correct=graded.get(e.solution_id),
        )
        for e in examples
    ]


def evaluations_of(*, model_version: ModelVersion) -> list[Evaluation]:
    return list(
        Evaluation.objects.filter(model_version=model_version).select_related("evaluation_set")
    )


def figure(evaluation: Evaluation | None, metric: str) -> dict | None:
    if evaluation is None or evaluation.status != JobStatus.SUCCEEDED:
        return None
    return evaluation.results.get("figures", {}).get(metric)


def compare(*, new_id: int, active_id: int) -> Comparison | None:
    """Two versions on the promotion set's PRM_PROMOTE_METRIC, when both were evaluated."""
    chosen = promotion_set()
    if chosen is None:
        return None
    done = {
        e.model_version_id: e
        for e in Evaluation.objects.filter(
            evaluation_set=chosen,
            model_version_id__in=[new_id, active_id],
            status=JobStatus.SUCCEEDED,
        )
    }
    if new_id not in done or active_id not in done:
        return None
    return _comparison(chosen, new=done[new_id], active=done[active_id])


def _comparison(chosen: EvaluationSet, *, new: Evaluation, active: Evaluation | None):
    metric = settings.PRM_PROMOTE_METRIC
    mine = figure(new, metric) or {}
    theirs = figure(active, metric) or {}
    baselines = {k: v for k, v in mine.get("baselines", {}).items() if v is not None}
    best = max(baselines, key=baselines.get) if baselines else ""
    return Comparison(
        metric=metric,
        where=f"evaluation set {chosen.name}",
        new=mine.get("value"),
        active=theirs.get("value"),
        active_high=theirs.get("high"),
        baseline=baselines.get(best),
        baseline_name=best.replace("_", " "),
    )


def register_gates() -> None:
    """Tell training what it cannot import (the app's start, `trainer.pipeline`)."""
    gates.register(
        evaluation_problem_keys=evaluation_problem_keys,
        promotion_set=lambda: getattr(promotion_set(), "name", None),
        compare=compare,
    )


# --- evaluating -------------------------------------------------------------------------------


class EvaluationRefused(Conflict):
    """What an evaluation's state does not allow: cancelling a finished one, running again
    one that did not fail or stop."""


def request_evaluations(*, model_version_id: int) -> list[Evaluation]:
    """One queued evaluation of this version per registered set that lacks one."""
    created = []
    for evaluation_set in EvaluationSet.objects.all():
        evaluation, new = Evaluation.objects.get_or_create(
            model_version_id=model_version_id, evaluation_set=evaluation_set
        )
        if new:
            created.append(evaluation)
    return created


def run_evaluation(*, evaluation_id: int, worker_hostname: str = "") -> Evaluation:
    """Score the set's items with the version, store the figures, then decide a waiting
    version's promotion if this set decides it. Never raises for the evaluation.

    It beats while it scores (a worker killed mid-way is found by
    `mark_stale_evaluations_failed`) and stops between batches once cancelled."""
    if not jobs.start(model=Evaluation, pk=evaluation_id, worker_hostname=worker_hostname):
        return Evaluation.objects.get(pk=evaluation_id)
    evaluation = Evaluation.objects.select_related("evaluation_set", "model_version").get(
        pk=evaluation_id
    )
    try:
        with jobs.heartbeat(model=Evaluation, pk=evaluation_id) as beat:
            results = _score_and_figure(evaluation, cancelled=beat.cancelled)
    except Exception as exc:
        logger.exception("%s failed", evaluation)
        jobs.finish(model=Evaluation, pk=evaluation_id, status=JobStatus.FAILED, error=str(exc))
        return Evaluation.objects.get(pk=evaluation_id)
    if results is None:
        jobs.finish(model=Evaluation, pk=evaluation_id, status=JobStatus.CANCELLED)
        done = Evaluation.objects.get(pk=evaluation_id)
        jobs.append_log(
            model=Evaluation,
            pk=evaluation_id,
            text=f"Cancelled after {done.done} of {done.total} items; no figures. {STOPPED}",
        )
        return Evaluation.objects.get(pk=evaluation_id)
    jobs.finish(
        model=Evaluation,
        pk=evaluation_id,
        status=JobStatus.SUCCEEDED,
        values={"results": results},
    )
    evaluation.refresh_from_db()
    _decide_promotion(evaluation)
    return Evaluation.objects.get(pk=evaluation_id)


def _score_and_figure(evaluation: Evaluation, *, cancelled: threading.Event) -> dict | None:
    """The figures, or None when a cancel came before the last batch was scored."""
    # Imported here to keep torch out of the web process, which never scores.
    from trainer.training.ml.prm import PRM

    items = items_of(evaluation.evaluation_set)
    if not items:
        raise EvaluationSetInvalid(f"{evaluation.evaluation_set} has no items to evaluate on.")
    Evaluation.objects.filter(pk=evaluation.pk).update(total=len(items), done=0)
    prm = PRM.load(checkpoints.local_dir(evaluation.model_version))
    scores: list[list[float] | None] = [None] * len(items)
    done = 0
    for batch in length_batches([_chars(item) for item in items]):
        # The heartbeat notices a cancel within a beat; asked here too, a short evaluation
        # (or one inside a caller's transaction, where no beat runs) stops as promptly.
        if cancelled.is_set() or jobs.cancel_requested(model=Evaluation, pk=evaluation.pk):
            return None
        scored = prm.score(
            problems=[items[i].problem for i in batch],
            steps=[items[i].steps for i in batch],
            batch_size=len(batch),
        )
        for i, step_scores in zip(batch, scored, strict=True):
            scores[i] = step_scores
        done += len(batch)
        Evaluation.objects.filter(pk=evaluation.pk).update(done=done)
    return figures.evaluate(items, scores)


def _chars(item) -> int:
    return len(item.problem) + sum(len(step) for step in item.steps)


def length_batches(lengths: list[int]) -> list[list[int]]:
    """Indices of items in batches of similar length, shortest first: a batch takes items
    while (items x its longest) stays within BATCH_CHARS, and at most BATCH_MAX of them."""
    batches: list[list[int]] = []
    for i in sorted(range(len(lengths)), key=lambda i: lengths[i]):
        batch = batches[-1] if batches else None
        if (
            batch is None
            or len(batch) >= BATCH_MAX
            or (len(batch) + 1) * max(lengths[i], 1) > BATCH_CHARS
        ):
            batches.append([i])
        else:
            batch.append(i)
    return batches


# --- cancel, evaluate again, recover ----------------------------------------------------------

STOPS = "after the batch of items it is scoring"
STOPPED = "Evaluate it again from the model version's page or the API."


def cancel_evaluation(*, evaluation_id: int) -> Evaluation:
    """A queued evaluation is cancelled at once; a running one stops after its batch."""
    return jobs.request_cancel(
        model=Evaluation, pk=evaluation_id, stops=STOPS, refused=EvaluationRefused
    )


def reopen_evaluation(*, evaluation_id: int) -> Evaluation:
    """A failed or cancelled evaluation, queued again from its first item (`trainer.pipeline`
    sends it). A version whose promotion waited on it is decided when it succeeds."""
    with transaction.atomic():
        jobs.reopen(
            model=Evaluation,
            pk=evaluation_id,
            refused=EvaluationRefused,
            again="runs again",
            values={"done": 0, "total": 0, "results": {}, "started_at": None},
        )
        jobs.append_log(model=Evaluation, pk=evaluation_id, text="Queued again.")
    return Evaluation.objects.get(pk=evaluation_id)


def mark_stale_evaluations_failed(*, older_than, worker_hostname: str = "") -> list[int]:
    """Fail running evaluations whose worker is gone (`jobs.recover_stale`'s rule); they can
    be evaluated again."""
    return jobs.recover_stale(
        model=Evaluation, older_than=older_than, worker_hostname=worker_hostname, advice=STOPPED
    )


def _decide_promotion(evaluation: Evaluation) -> None:
    chosen = evaluation.evaluation_set
    version = evaluation.model_version
    if not chosen.decides_promotion or version.is_active or version.promoted_at is not None:
        return
    if version.training_run_id is None:
        return  # imported or hand-made versions are activated by hand
    active = active_model_version()
    active_evaluation = None
    if active is not None:
        # The active version may predate the set: evaluate it on the same items first.
        active_evaluation, _ = Evaluation.objects.get_or_create(
            model_version=active, evaluation_set=chosen
        )
        if active_evaluation.status == JobStatus.QUEUED:
            active_evaluation = run_evaluation(evaluation_id=active_evaluation.pk)
    promoted, reason = model_versions.promote_after_evaluation(
        model_version_id=version.pk,
        comparison=_comparison(chosen, new=evaluation, active=active_evaluation),
    )
    jobs.append_log(model=Evaluation, pk=evaluation.pk, text=reason)
