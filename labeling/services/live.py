"""Phase-1 live labeling (PRM800K phase 1): a labeler builds a solution step by step.

Over 500 lines on purpose: proposing, rating, choosing and ending are one lifecycle of one
session, each step guarded by the same lock and rules.

A live generation (`Generation.mode` "live") names problems, a generator and its sampling
settings (`Generation.params["live"]`). A labeler's session on it starts from the problem
alone. At each step the generator proposes k next steps (`propose_steps`, run by a Celery
task: the local backend never runs in the web process); they are stored as the step's
completions, unrated. The labeler rates each (+1/0/-1, may flag), then either chooses one
rated +1 or 0 to continue from (`chosen_completion`) or, when every proposal is -1, writes
their own step (`human_completion`) and continues from it. The trajectory (the session's
Solution, `steps`) grows by that step. It ends:

- "solution" when the chosen or written step is the "# Answer" step (graded then);
- "found_error" when every proposal of the current step is -1 and the labeler writes none
  (phase 1's lines end so: the last step's completions all -1, chosen and human null);
- "give_up" or "bad_problem" with a reason, at any step.

Each problem of a live generation is labeled once by each labeler (`trajectories_per_problem`
labelers in all, default 1 per labeler, no cap across labelers: phase 1 collected several
paths per problem). Every write here is idempotent: a repeated rating, choice or written step
stores nothing twice.
"""

import logging
import uuid
from datetime import datetime
from functools import partial
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone
from kombu.exceptions import OperationalError as BrokerError

from core import prm800k
from core.errors import Invalid
from core.queueing import queue_task
from generators import (
    GeneratorSpec,
    GeneratorUnavailable,
    SamplingSettings,
    open_generator,
    propose_next_steps,
    step_answer,
)
from labeling import grading
from labeling.models import (
    Generation,
    Labeler,
    LabelingSession,
    Problem,
    ProblemReport,
    Solution,
    StepLabel,
    StepRating,
)
from labeling.services import reports
from labeling.services.sessions import (
    HUMAN_COMPLETION_MAX_CHARS,
    LEASE,
    LabelingRefused,
    locked_session,
    session_to_change,
    touch,
)
from labeling.signals import solutions_added

logger = logging.getLogger(__name__)

MAX_PROPOSALS = 8
MAX_PROBLEMS = 10_000
# Phase 1 lines carry the problem and its answer only: no pre-generated solution.
PHASE1_QUESTION_ABSENT = [
    "ground_truth_solution",
    "pre_generated_steps",
    "pre_generated_answer",
    "pre_generated_verifier_score",
]
PENDING, READY, FAILED = "pending", "ready", "failed"
PROPOSE_STEPS_TASK = "labeling.tasks.propose_steps_task"
PREFETCH_TASK = "labeling.tasks.prefetch_next_step_task"
STOPPED = "You stopped waiting for the generator. Try again, or give up this problem below."
# A small model often proposes the step just chosen again (SmolLM2-135M did so in 7 of 12
# samples at step 2 of "What is 2 + 2?"), or an empty step: those are dropped and more samples
# are drawn, with new seeds, for at most this many rounds before the step fails.
PROPOSAL_ROUNDS = 4
# Seeds reserved per step (in blocks of MAX_PROPOSALS): the rounds of every try ("Try again"
# asks with new seeds) draw from the step's own block until it wraps.
SEED_BLOCKS_PER_STEP = 64


class LiveInvalid(Invalid):
    """A live generation or a live labeling request that is malformed."""


# --- creating a live generation ----------------------------------------------------------------


def create_live_generation(
    *,
    user,
    problem_ids: list[int],
    generator: GeneratorSpec,
    settings: SamplingSettings,
    proposals: int,
) -> Generation:
    """A new live generation over `problem_ids`, its generator and settings recorded."""
    if isinstance(proposals, bool) or not isinstance(proposals, int):
        raise LiveInvalid("proposals must be a whole number.")
    if not 1 <= proposals <= MAX_PROPOSALS:
        raise LiveInvalid(f"proposals must be from 1 to {MAX_PROPOSALS}.")
    if not problem_ids or not isinstance(problem_ids, list):
        raise LiveInvalid("Name at least one problem.")
    if len(problem_ids) > MAX_PROBLEMS:
        raise LiveInvalid(f"At most {MAX_PROBLEMS:,} problems.")
    if any(isinstance(p, bool) or not isinstance(p, int) for p in problem_ids):
        raise LiveInvalid("Problems are named by their ids (whole numbers).")
    ids = list(dict.fromkeys(problem_ids))
    found = set(Problem.objects.filter(pk__in=ids).values_list("pk", flat=True))
    missing = [p for p in ids if p not in found]
    if missing:
        raise LiveInvalid(f"No problem {', '.join(map(str, missing[:10]))}.")
    params = {
        "live": {
            "generator": generator.to_dict(),
            "sampling": settings.to_dict(),
            "proposals": proposals,
            "problems": ids,
            "created_by": getattr(user, "pk", None),
        }
    }
    for _attempt in range(5):
        try:
            with transaction.atomic():
                newest = Generation.objects.aggregate(n=Max("number"))["n"]
                return Generation.objects.create(
                    number=max(newest or 0, 0) + 1, mode=Generation.Mode.LIVE, params=params
                )
        except IntegrityError:
            continue  # another generation took the number meanwhile
    raise LabelingRefused("Could not number the generation; try again.")


def _live(generation: Generation) -> dict[str, Any]:
    return generation.params["live"]


# --- serving --------------------------------------------------------------------------------------


def open_live_generations():
    return Generation.objects.filter(mode=Generation.Mode.LIVE).order_by("-number")


def next_live_session(*, labeler: Labeler, now: datetime) -> LabelingSession | None:
    """A new trajectory on the first problem of the newest live generation that this labeler
    has not started (each problem once per labeler), or None."""
    for generation in open_live_generations():
        for problem_id in _unstarted(generation=generation, labeler=labeler):
            return _start(generation=generation, problem_id=problem_id, labeler=labeler, now=now)
    return None


def problems_left(*, labeler: Labeler) -> int:
    """How many problems of the open live generations the labeler has still to start (the
    live page's queue count, as the workbench shows its own)."""
    return sum(
        len(_unstarted(generation=generation, labeler=labeler))
        for generation in open_live_generations()
    )


def _unstarted(*, generation: Generation, labeler: Labeler) -> list[int]:
    """The generation's problems, in its order, that the labeler has not started, has not
    reported, and that are not marked bad."""
    problem_ids = _live(generation)["problems"]
    started = set(
        LabelingSession.objects.filter(labeler=labeler, generation=generation).values_list(
            "solution__problem_id", flat=True
        )
    )
    reported = set(
        ProblemReport.objects.filter(labeler=labeler, problem_id__in=problem_ids).values_list(
            "problem_id", flat=True
        )
    )
    usable = set(
        Problem.objects.filter(pk__in=problem_ids, is_bad=False).values_list("pk", flat=True)
    )
    return [p for p in problem_ids if p in usable and p not in started and p not in reported]


def _start(
    *, generation: Generation, problem_id: int, labeler: Labeler, now: datetime
) -> LabelingSession:
    live = _live(generation)
    solution = Solution.objects.create(
        problem_id=problem_id,
        steps=[],
        answer="",
        is_correct=None,  # ungraded until the labeler writes the answer step
        source=GeneratorSpec.from_dict(live["generator"]).source,
        generation=generation,
        # The trajectory token keys it apart from every other path on the same problem.
        meta={"trajectory": uuid.uuid4().hex},
    )
    session = LabelingSession.objects.create(
        slot=0,
        labeler=labeler,
        solution=solution,
        generation=generation,
        queue="live",
        started_at=now,
        last_activity_at=now,
        lease_expires_at=now + LEASE,
        total_time=0,
        extra={"question": {"absent": PHASE1_QUESTION_ABSENT}},
    )
    _new_step(session=session, index=0)
    return session


def _new_step(
    *, session: LabelingSession, index: int, prefetched: list[str] | None = None
) -> StepLabel:
    """The next step, with the proposals prefetched for it (`prefetch_next_step`), or waiting
    for them: the task is sent once the row is committed."""
    live = _live(session.generation)
    step = StepLabel.objects.create(
        session=session,
        index=index,
        extra={
            "live": {
                "status": READY if prefetched else PENDING,
                "generator": live["generator"],
                "sampling": live["sampling"],
                "proposals": live["proposals"],
                "seed_offset": seed_offset(session_id=session.pk, step_index=index),
                "requested_at": timezone.now().isoformat(),
                "prefetched": bool(prefetched),
            }
        },
    )
    if prefetched:
        _store_proposals(step=step, proposals=prefetched)
    else:
        _enqueue(session_id=session.pk, step_index=index)
    return step


def _store_proposals(*, step: StepLabel, proposals: list[str]) -> None:
    StepRating.objects.bulk_create(
        [
            StepRating(step=step, completion_index=i, text=text[:HUMAN_COMPLETION_MAX_CHARS])
            for i, text in enumerate(proposals)
        ],
        ignore_conflicts=True,
    )


def seed_offset(*, session_id: int, step_index: int) -> int:
    """Deterministic per (session, step): a redelivered task asks for the same proposals."""
    return (session_id * 1024 + step_index) * SEED_BLOCKS_PER_STEP * MAX_PROPOSALS % (2**30)


def _enqueue(*, session_id: int, step_index: int) -> None:
    transaction.on_commit(partial(_queue_proposals, session_id=session_id, step_index=step_index))


def _queue_proposals(*, session_id: int, step_index: int) -> None:
    # By name, so this module never imports the tasks module that imports it. A broker that
    # is down fails the step with a message and "Try again", not the labeler's request.
    try:
        queue_task(PROPOSE_STEPS_TASK, (session_id, step_index))
    except (BrokerError, OSError) as exc:
        # The broker's address (and its password, in a URL) is for the log, not the labeler.
        logger.warning("live step %s/%s: broker unreachable: %s", session_id, step_index, exc)
        _fail_step(
            session_id=session_id,
            step_index=step_index,
            error="Could not ask the generator: the task broker is unreachable.",
        )


# --- proposals (the worker) -------------------------------------------------------------------


def propose_steps(*, session_id: int, step_index: int) -> str:
    """Ask the generator for the step's proposals and store them as its completions.

    Idempotent: a step that has its proposals, or that is no longer the current one, is left
    alone, so a redelivered or doubled task stores nothing twice. Returns the step's status.
    """
    step = (
        StepLabel.objects.select_related("session__solution__problem", "session__generation")
        .filter(session_id=session_id, index=step_index)
        .first()
    )
    if step is None:
        return "gone"
    info = (step.extra or {}).get("live", {})
    if info.get("status") != PENDING:
        return info.get("status", "gone")
    solution = step.session.solution
    proposals, error = _generate(
        info=info,
        problem=solution.problem.text,
        steps=list(solution.steps[:step_index]),
        seed=info["seed_offset"],
        attempt=info.get("attempt", 0),
    )
    return _fill_step(step_pk=step.pk, proposals=proposals, error=error)


def _fill_step(*, step_pk: int, proposals: list[str], error: str) -> str:
    """Store a pending step's proposals (or its failure), unless it is pending no more: the
    first of the step's task and its prefetch to finish fills it, the other's are dropped,
    and so are proposals that come after the labeler stopped waiting."""
    with transaction.atomic():
        step = StepLabel.objects.select_for_update().filter(pk=step_pk).first()
        if step is None or step.extra.get("live", {}).get("status") != PENDING:
            return "gone" if step is None else step.extra["live"]["status"]
        live = dict(step.extra["live"])
        if error:
            live.update(status=FAILED, error=error)
        else:
            _store_proposals(step=step, proposals=proposals)
            live.update(status=READY, error="")
        step.extra = {**step.extra, "live": live}
        step.save(update_fields=["extra"])
    return live["status"]


def _generate(
    *, info: dict[str, Any], problem: str, steps: list[str], seed: int, attempt: int
) -> tuple[list[str], str]:
    """Proposals for the step after `steps`, or the sentence the labeler reads on failure."""
    spec = GeneratorSpec.from_dict(info["generator"])
    settings = SamplingSettings.from_dict(info["sampling"])
    try:
        generator = open_generator(spec)
        try:
            proposals = _new_proposals(
                generator=generator,
                problem=problem,
                steps=steps,
                k=info["proposals"],
                settings=settings,
                seed_offset=seed,
                attempt=attempt,
            )
        finally:
            generator.close()
    # The labeler reads a plain sentence; the generator's address and whatever its backend
    # said (an internal URL, a reply body) go to the worker's log for the operator.
    except GeneratorUnavailable as exc:
        logger.warning("live proposals after step %s: %s", len(steps), exc)
        return [], "The generator did not answer. Try again, or tell a researcher if it persists."
    except Exception:  # noqa: BLE001 - any backend failure is shown, never a 500
        logger.exception("live proposals after step %s: the generator failed", len(steps))
        return [], "The generator failed. Try again, or tell a researcher if it persists."
    if not proposals:
        return [], (
            f"The generator proposed no new step in {PROPOSAL_ROUNDS} rounds of samples: "
            "its replies were empty or repeated a step of the solution so far."
        )
    return proposals, ""


# --- prefetching: the next step's proposals while the labeler rates this one -------------------


def _prefetch(*, step: StepLabel, completion_index: int, text: str) -> None:
    """Start proposing the step after `completion_index` once it is rated +1 (the likeliest
    continuation), one per step: the generator works while the labeler rates the rest, and
    choosing it shows the next proposals without a wait. An answer step has no next step."""
    if step_answer(text):
        return
    live = dict((step.extra or {}).get("live", {}))
    if "prefetch" in live and live["prefetch"]["completion"] != completion_index:
        return  # one per step: the generator's time goes to what the labeler waits for
    if "prefetch" not in live:
        live["prefetch"] = {"completion": completion_index, "status": PENDING}
        step.extra = {**step.extra, "live": live}
        step.save(update_fields=["extra"])
        transaction.on_commit(
            partial(
                _queue_prefetch,
                session_id=step.session_id,
                step_index=step.index,
                completion_index=completion_index,
            )
        )


def _queue_prefetch(*, session_id: int, step_index: int, completion_index: int) -> None:
    try:
        queue_task(PREFETCH_TASK, (session_id, step_index, completion_index))
    except (BrokerError, OSError) as exc:
        # Nothing is lost: choosing the proposal asks for the next step as it always did.
        logger.warning("live prefetch %s/%s: broker unreachable: %s", session_id, step_index, exc)


def prefetch_next_step(*, session_id: int, step_index: int, completion_index: int) -> str:
    """Propose the step after proposal `completion_index` of `step_index`, as the step's own
    task will once it is chosen (same seeds), and keep them on the step; if it was chosen
    meanwhile, fill the next step directly when it still waits."""
    step = (
        StepLabel.objects.select_related("session__solution__problem")
        .filter(session_id=session_id, index=step_index)
        .first()
    )
    if step is None:
        return "gone"
    live = (step.extra or {}).get("live", {})
    prefetch = live.get("prefetch", {})
    if prefetch.get("completion") != completion_index or prefetch.get("status") != PENDING:
        return prefetch.get("status", "gone")
    rating = StepRating.objects.filter(step=step, completion_index=completion_index).first()
    if rating is None:
        return "gone"
    solution = step.session.solution
    proposals, error = _generate(
        info=live,
        problem=solution.problem.text,
        steps=[*solution.steps[:step_index], rating.text],
        seed=seed_offset(session_id=session_id, step_index=step_index + 1),
        attempt=0,
    )
    with transaction.atomic():
        step = StepLabel.objects.select_for_update().filter(pk=step.pk).first()
        if step is None:
            return "gone"
        live = dict(step.extra.get("live", {}))
        live["prefetch"] = {
            "completion": completion_index,
            "status": FAILED if error else READY,
            "proposals": proposals,
        }
        step.extra = {**step.extra, "live": live}
        step.save(update_fields=["extra"])
    following = StepLabel.objects.filter(session_id=session_id, index=step_index + 1).first()
    if following is not None and step.chosen_completion == completion_index and not error:
        # Chosen while the generator was at work: the waiting step takes these proposals,
        # and its own task, finding it filled, stores nothing.
        return _fill_step(step_pk=following.pk, proposals=proposals, error="")
    return live["prefetch"]["status"]


def _prefetched(step: StepLabel, completion_index: int) -> list[str] | None:
    prefetch = (step.extra or {}).get("live", {}).get("prefetch", {})
    if prefetch.get("completion") == completion_index and prefetch.get("status") == READY:
        return prefetch.get("proposals") or None
    return None


def _fail_step(*, session_id: int, step_index: int, error: str) -> None:
    with transaction.atomic():
        step = (
            StepLabel.objects.select_for_update()
            .filter(session_id=session_id, index=step_index)
            .first()
        )
        if step is None or (step.extra or {}).get("live", {}).get("status") != PENDING:
            return
        step.extra = {
            **step.extra,
            "live": {**step.extra["live"], "status": FAILED, "error": error},
        }
        step.save(update_fields=["extra"])


def _new_proposals(
    *,
    generator,
    problem: str,
    steps: list[str],
    k: int,
    settings: SamplingSettings,
    seed_offset: int,
    attempt: int,
) -> list[str]:
    """Up to k distinct proposals, none empty and none repeating a step of `steps`: rounds of
    samples with new seeds, each asking only for what is still missing, at most
    PROPOSAL_ROUNDS of them (fewer than k come back when the generator keeps repeating)."""
    earlier = {step.strip() for step in steps}
    proposals: list[str] = []
    for round_ in range(PROPOSAL_ROUNDS):
        block = (attempt * PROPOSAL_ROUNDS + round_) % SEED_BLOCKS_PER_STEP
        for text in propose_next_steps(
            generator=generator,
            problem=problem,
            steps=steps,
            k=k - len(proposals),
            settings=settings,
            seed_offset=seed_offset + block * MAX_PROPOSALS,
        ):
            if text.strip() and text.strip() not in earlier and text not in proposals:
                proposals.append(text)
        if len(proposals) >= k:
            break
    return proposals[:k]


# --- the labeler's actions --------------------------------------------------------------------


def _live_session(*, session_id: int, labeler: Labeler) -> LabelingSession:
    session = session_to_change(session_id=session_id, labeler=labeler)
    if session.generation is None or session.generation.mode != Generation.Mode.LIVE:
        raise LabelingRefused("This session is not a live one.")
    return session


def _current(session: LabelingSession, step_index: int) -> StepLabel:
    step = StepLabel.objects.filter(session=session).order_by("-index").first()
    if step is None or step.index != step_index:
        where = "none" if step is None else str(step.index + 1)
        raise LabelingRefused(f"Step {step_index + 1} is not the current step (it is {where}).")
    return step


def rate_proposal(
    *,
    session_id: int,
    labeler: Labeler,
    step_index: int,
    completion_index: int,
    rating: int,
    flagged: bool = False,
    now: datetime | None = None,
) -> LabelingSession:
    """Rate (or re-rate) one proposal of the current step. Repeating it changes nothing."""
    now = now or timezone.now()
    if isinstance(rating, bool) or rating not in prm800k.RATINGS:
        raise LabelingRefused("A rating is -1, 0 or 1.")
    with transaction.atomic():
        session = _live_session(session_id=session_id, labeler=labeler)
        step = _current(session, step_index)
        if step.chosen_completion is not None or step.human_completion is not None:
            raise LabelingRefused(f"Step {step_index + 1} is already decided.")
        updated = StepRating.objects.filter(step=step, completion_index=completion_index).update(
            rating=rating, flagged=flagged
        )
        if not updated:
            raise LabelingRefused(f"Step {step_index + 1} has no proposal {completion_index + 1}.")
        if rating == 1:
            text = StepRating.objects.get(step=step, completion_index=completion_index).text
            _prefetch(step=step, completion_index=completion_index, text=text)
        touch(session, now)
        session.save(update_fields=["total_time", "last_activity_at", "lease_expires_at"])
    return session


def choose_proposal(
    *,
    session_id: int,
    labeler: Labeler,
    step_index: int,
    completion_index: int,
    now: datetime | None = None,
) -> LabelingSession:
    """Continue from a proposal rated +1 or 0; the "# Answer" step ends the session.

    The same choice sent twice (a double click, a resent form) is stored once.
    """
    now = now or timezone.now()
    with transaction.atomic():
        session = _locked_any(session_id=session_id, labeler=labeler)
        done = StepLabel.objects.filter(session=session, index=step_index).first()
        if done is not None and done.chosen_completion == completion_index:
            return session  # already chosen: the repeat is a no-op
        session = _live_session(session_id=session_id, labeler=labeler)
        step = _current(session, step_index)
        if step.human_completion is not None:
            raise LabelingRefused(f"Step {step_index + 1} is already decided.")
        ratings = dict(
            StepRating.objects.filter(step=step).values_list("completion_index", "rating")
        )
        if completion_index not in ratings:
            raise LabelingRefused(f"Step {step_index + 1} has no proposal {completion_index + 1}.")
        if None in ratings.values():
            raise LabelingRefused("Rate every proposal of this step first.")
        if ratings[completion_index] not in (0, 1):
            raise LabelingRefused("Continue from a proposal rated +1 or 0.")
        text = StepRating.objects.get(step=step, completion_index=completion_index).text
        step.chosen_completion = completion_index
        step.save(update_fields=["chosen_completion"])
        _advance(
            session=session, text=text, now=now, prefetched=_prefetched(step, completion_index)
        )
    return session


def write_step(
    *,
    session_id: int,
    labeler: Labeler,
    step_index: int,
    text: str,
    now: datetime | None = None,
) -> LabelingSession:
    """Continue from the labeler's own step, once every proposal of the step is rated -1.

    Stored as PRM800K phase 1's `human_completion` (chosen_completion null); the same text
    sent twice is stored once.
    """
    now = now or timezone.now()
    text = (text or "").strip()
    if not text:
        raise LiveInvalid("Write the step first.")
    if len(text) > HUMAN_COMPLETION_MAX_CHARS:
        raise LiveInvalid(f"A written step has at most {HUMAN_COMPLETION_MAX_CHARS:,} characters.")
    with transaction.atomic():
        session = _locked_any(session_id=session_id, labeler=labeler)
        done = StepLabel.objects.filter(session=session, index=step_index).first()
        if done is not None and (done.human_completion or {}).get("text") == text:
            return session
        session = _live_session(session_id=session_id, labeler=labeler)
        step = _current(session, step_index)
        if step.chosen_completion is not None or step.human_completion is not None:
            raise LabelingRefused(f"Step {step_index + 1} is already decided.")
        ratings = list(StepRating.objects.filter(step=step).values_list("rating", flat=True))
        if not ratings or any(r != -1 for r in ratings):
            raise LabelingRefused("Write your own step only when every proposal is rated -1.")
        step.human_completion = {
            "text": text,
            "rating": None,
            "source": "human",
            "flagged": False,
            "corrected_rating": None,
        }
        step.save(update_fields=["human_completion"])
        _advance(session=session, text=text, now=now)
    return session


def retry_proposals(*, session_id: int, labeler: Labeler, step_index: int) -> LabelingSession:
    """Ask again for the proposals of a step whose generator call failed."""
    with transaction.atomic():
        session = _live_session(session_id=session_id, labeler=labeler)
        step = _current(session, step_index)
        live = dict((step.extra or {}).get("live", {}))
        if live.get("status") != FAILED:
            return session  # pending or ready: nothing to retry, and no second task
        # A new try draws new seeds: the same ones would give the same failing replies.
        live.update(
            status=PENDING,
            error="",
            attempt=live.get("attempt", 0) + 1,
            requested_at=timezone.now().isoformat(),
        )
        step.extra = {**step.extra, "live": live}
        step.save(update_fields=["extra"])
        _enqueue(session_id=session.pk, step_index=step_index)
    return session


def stop_waiting(*, session_id: int, labeler: Labeler, step_index: int) -> LabelingSession:
    """Stop waiting for a step's proposals: the step shows "Try again" (and the page's give-up
    stays there); proposals that arrive afterwards are dropped."""
    with transaction.atomic():
        session = _live_session(session_id=session_id, labeler=labeler)
        step = _current(session, step_index)
        live = dict((step.extra or {}).get("live", {}))
        if live.get("status") != PENDING:
            return session  # they came meanwhile, or it was stopped already
        live.update(status=FAILED, error=STOPPED)
        step.extra = {**step.extra, "live": live}
        step.save(update_fields=["extra"])
    return session


def finish_live(
    *,
    session_id: int,
    labeler: Labeler,
    finish_reason: str,
    finish_reason_text: str = "",
    now: datetime | None = None,
) -> LabelingSession:
    """End the trajectory: found_error (every proposal -1, none written), give_up or
    bad_problem (with a reason). "solution" comes only from choosing the answer step.
    Sending the same outcome twice is a no-op."""
    now = now or timezone.now()
    with transaction.atomic():
        session = _locked_any(session_id=session_id, labeler=labeler)
        if session.is_submitted and session.finish_reason == finish_reason:
            return session
        session = _live_session(session_id=session_id, labeler=labeler)
        step = StepLabel.objects.filter(session=session).order_by("-index").first()
        finish_reason_text = (finish_reason_text or "").strip()
        if finish_reason == "found_error":
            ratings = [] if step is None else list(step.ratings.values_list("rating", flat=True))
            if not ratings or any(r != -1 for r in ratings):
                raise LabelingRefused("found_error ends a step whose every proposal is rated -1.")
        elif finish_reason in ("give_up", "bad_problem"):
            if not finish_reason_text:
                raise LiveInvalid("Please give a short reason.")
            if step is not None and not step.ratings.exists():
                # Proposals never shown are no part of the label.
                step.delete()
            if finish_reason == "bad_problem":
                reports.record_report(session=session, reason=finish_reason_text, now=now)
        elif finish_reason == "solution":
            raise LabelingRefused("A trajectory reaches its solution by choosing the answer step.")
        else:
            raise LiveInvalid("finish_reason must be found_error, give_up or bad_problem.")
        _end(
            session=session,
            finish_reason=finish_reason,
            finish_reason_text=finish_reason_text,
            now=now,
        )
    return session


def _locked_any(*, session_id: int, labeler: Labeler) -> LabelingSession:
    return locked_session(session_id=session_id, labeler=labeler)


def _advance(
    *, session: LabelingSession, text: str, now: datetime, prefetched: list[str] | None = None
) -> None:
    solution = session.solution
    solution.steps = [*solution.steps, text]
    # Scores belong to the steps they were computed on: the path is scored again once it ends.
    solution.prm_model_version = solution.prm_score = solution.prm_step_scores = None
    scores = ["prm_model_version", "prm_score", "prm_step_scores"]
    # The answer step may carry its last words before "# Answer" (as PRM800K's do).
    answer = step_answer(text)
    if answer:
        solution.answer = answer
        solution.is_correct = grading.grade_answer(solution.answer, solution.problem.answer)
        solution.save(update_fields=["steps", "answer", "is_correct", "content_hash", *scores])
        _end(session=session, finish_reason="solution", finish_reason_text="", now=now)
        return
    solution.save(update_fields=["steps", "content_hash", *scores])
    _new_step(session=session, index=len(solution.steps), prefetched=prefetched)
    touch(session, now)
    session.save(update_fields=["total_time", "last_activity_at", "lease_expires_at"])


def _end(
    *, session: LabelingSession, finish_reason: str, finish_reason_text: str, now: datetime
) -> None:
    touch(session, now)
    session.finish_reason = finish_reason
    session.finish_reason_text = finish_reason_text
    session.submitted_at = now
    session.save()
    # The path is whole: the active model version scores it, as any solution new to the pool.
    transaction.on_commit(partial(solutions_added.send, sender=Solution, count=1))


# --- what the page and the API show -----------------------------------------------------------


def live_state(*, session: LabelingSession) -> dict[str, Any]:
    """The trajectory so far and the current step: its status, proposals and what is allowed."""
    steps = list(
        StepLabel.objects.filter(session=session).order_by("index").prefetch_related("ratings")
    )
    past, current = [], None
    for step in steps:
        proposals = [
            {
                "completion": r.completion_index,
                "text": r.text,
                "rating": r.rating,
                "flagged": bool(r.flagged),
            }
            for r in step.ratings.all()
        ]
        human = (step.human_completion or {}).get("text")
        entry = {
            "index": step.index,
            "proposals": proposals,
            "chosen_completion": step.chosen_completion,
            "human_completion": human,
            "status": (step.extra or {}).get("live", {}).get("status", READY),
            "error": (step.extra or {}).get("live", {}).get("error", ""),
            "waiting_seconds": _waiting_seconds(step),
        }
        if step.chosen_completion is None and human is None and session.is_open:
            current = entry
        else:
            entry["text"] = (
                human
                if human is not None
                else (
                    proposals[step.chosen_completion]["text"]
                    if step.chosen_completion is not None
                    and step.chosen_completion < len(proposals)
                    else ""
                )
            )
            past.append(entry)
    can_choose = can_write = False
    if current is not None and current["proposals"]:
        ratings = [p["rating"] for p in current["proposals"]]
        all_rated = None not in ratings
        can_choose = all_rated and any(r in (0, 1) for r in ratings)
        can_write = all_rated and all(r == -1 for r in ratings)
    return {
        "session": session.pk,
        "open": session.is_open,
        "finish_reason": session.finish_reason,
        "steps": past,
        "current": current,
        "can_choose": can_choose,
        "can_write": can_write,
        "can_found_error": can_write,
    }


def _waiting_seconds(step: StepLabel) -> int | None:
    """How long the step's proposals have been awaited (None unless they are)."""
    live = (step.extra or {}).get("live", {})
    if live.get("status") != PENDING or not live.get("requested_at"):
        return None
    since = datetime.fromisoformat(live["requested_at"])
    return max(int((timezone.now() - since).total_seconds()), 0)
