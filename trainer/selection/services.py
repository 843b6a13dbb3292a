"""Active learning: choose the next generation of solutions to label and publish it.

One topic read top to bottom: choosing with a strategy (the strategies themselves, pure
functions, are `trainer/selection/strategies.py`), the write that publishes a generation, then its
parameters and the body of the Celery task. How a selection is queued
(web, API, after a retrain) is `trainer.pipeline`'s; the generation pages read
`trainer.training.selectors`.

A generation is built the way *Let's Verify Step by Step* built theirs:

1. The unlabeled pool is every solution that no labeler has submitted, that is not a
   quality-control or screening solution, and whose problem was not reported bad. Solutions
   selected into an earlier generation and still unlabeled stay in the pool: the newer model
   may rank them differently, and selecting one again moves it to the new generation.
2. The pool is scored with the model version (only solutions it has not scored yet), through
   the version's scoring chunks (`trainer.scoring.chunks`): the selection scores the pending chunks
   itself and waits for those gpu workers hold, so a scoring under way is not done twice.
3. The pool is read from the database in one streamed pass that keeps, per problem, only what
   the strategy can still pick (`shortlist`: at most `per_problem_cap` per order it walks), and
   quality control's first seeded-random ones; the strategy then runs on that shortlist and
   picks exactly what it would pick from the whole pool. Memory grows with problems, not the
   pool.
4. A strategy (a named function in STRATEGIES, the SELECTION_STRATEGY setting) picks the batch.
   `convincing_wrong_answer`, the paper's: the highest-scored solutions whose final answer is
   wrong fill `wrong_share` of the batch, the highest-scored of the rest (right or wrong) fill
   the remainder. `uniform` samples at random (the baseline). `uncertainty` takes the scores
   nearest 0.5. `disagreement` takes the solutions whose first error the machine label
   sources (rollouts, judge, this version's PRM: `trainer.selection.disagreement`) put
   furthest apart, then a random sample of the rest. `ensemble_uncertainty` takes the
   solutions whose score the members of the PRM's MC-dropout ensemble put furthest apart
   (`trainer.selection.ensemble`: one more backbone pass over the scored pool). Every
   strategy takes at most `per_problem_cap` solutions per problem, and ties are broken by a
   seeded hash of the solution id, so the same pool and seed give the same generation.
5. `quality_control_count` quality-control solutions are reserved on top of the batch and
   served to every labeler while the generation is current: solutions with gold ratings
   first (agreement is measured against gold), then seeded-random ones from what is left of
   the pool.
6. Each selected solution records its generation, the model version, its score at selection
   and why it was selected (`Solution.selection_*`); the batch's priority is its selection
   order, so the labeling queue serves the newest generation first, most convincing first.
7. `overlap_share` of the batch goes to `overlap_labelers` labelers each
   (`labeling.services.overlap`), for agreement between labelers.
"""

import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.db import IntegrityError, transaction
from django.db.models import Max, QuerySet

from core import locks
from core.errors import Conflict, Invalid
from core.params import Params, like, param
from labeling.models import SOLUTION_WRITE_CHUNK, Generation, SelectionReason, Solution
from labeling.services import overlap
from trainer.selection.pool import (
    SCORE_FIELDS,
    as_candidates,
    ensemble_uncertainties,
    pool_rows,
    score_pool,
    shortlist,
)
from trainer.selection.strategies import (
    DEFAULT_STRATEGY,
    STRATEGIES,
    STRATEGY_WORDS,
    Candidate,
    Pick,
    at_random,
    in_order,
)
from trainer.training.models import ModelVersion

if TYPE_CHECKING:
    from trainer.training.ml.prm import PRM

logger = logging.getLogger(__name__)


class InvalidSelection(Invalid):
    """A selection parameter that is unknown or out of range."""


class SelectionConflict(Conflict):
    """Nothing to select, or another generation was published at the same moment."""


def choose(
    *,
    candidates: Sequence[Candidate],
    strategy: str = DEFAULT_STRATEGY,
    batch_size: int,
    per_problem_cap: int,
    wrong_share: float = 0.8,
    seed: int = 0,
) -> list[Pick]:
    """The batch a strategy picks from in-memory candidates, in selection order."""
    checked = SelectionParams.check(
        strategy=strategy,
        batch_size=batch_size,
        per_problem_cap=per_problem_cap,
        wrong_share=wrong_share,
        seed=seed,
    )
    return _pick(candidates, **checked)


def _pick(candidates: Sequence[Candidate], *, strategy: str, **arguments: Any) -> list[Pick]:
    return STRATEGIES[strategy](candidates, **arguments)


@dataclass(frozen=True)
class SelectionParams(Params):
    """How the next generation is selected: what the generations page's form, the API
    (`POST /api/generations/`, a sampling run's `then_select`) and `manage.py select_generation`
    take, all derived from here. A parameter left out takes its SELECTION_* setting."""

    invalid = InvalidSelection
    noun = "selection parameter"

    strategy: str = param(setting="SELECTION_STRATEGY", label="Strategy", choices=STRATEGY_WORDS)
    batch_size: int = param(
        setting="SELECTION_BATCH_SIZE",
        label="Batch size",
        help="Solutions labeled once each.",
        low=0,
        high=1_000_000,
    )
    per_problem_cap: int = param(
        setting="SELECTION_PER_PROBLEM_CAP", label="Per-problem cap", low=1, high=1_000_000
    )
    wrong_share: float = param(
        setting="SELECTION_WRONG_SHARE",
        label="Wrong-answer share",
        help="Share of the batch that is convincing wrong answers (that strategy only).",
        low=0,
        high=1,
    )
    quality_control_count: int = param(
        setting="SELECTION_QUALITY_CONTROL_COUNT",
        label="Quality-control solutions",
        help="Served to every labeler, on top of the batch.",
        low=0,
        high=100_000,
    )
    overlap_share: float = like(
        overlap.OverlapParams,
        "share",
        setting="SELECTION_OVERLAP_SHARE",
        label="Overlap share",
        help="Share of the batch labeled by several labelers, for agreement.",
    )
    overlap_labelers: int = like(
        overlap.OverlapParams,
        "labelers",
        setting="SELECTION_OVERLAP_LABELERS",
        label="Labelers per overlapping solution",
    )
    seed: int = param(0, label="Seed", help="Breaks ties.", low=0, high=2**31 - 1)
    judge_display: str = param(
        setting="SELECTION_JUDGE_DISPLAY",
        label="Judge labels shown",
        help="What labelers see of the judge's labels: nothing, its rating after they rate "
        "a step, or a suggestion to confirm or change before.",
        choices=dict(Generation.JudgeDisplay.choices),
    )
    ensemble_members: int = param(
        8,
        label="Ensemble members",
        help="Dropout copies of the PRM's head whose spread is its uncertainty "
        "(ensemble uncertainty only; each costs a head evaluation per step).",
        low=2,
        high=64,
    )
    ensemble_dropout: float = param(
        0.1,
        label="Ensemble dropout",
        help="Share of the head's inputs each member drops (ensemble uncertainty only).",
        low=0,
        high=1,
        low_open=True,
        high_open=True,
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.batch_size + self.quality_control_count == 0:
            raise InvalidSelection(
                "batch_size and quality_control_count are both 0: nothing to select."
            )


# --- publishing a generation (the write) ------------------------------------------------------


def _gold() -> QuerySet[Solution]:
    return Solution.objects.filter(
        gold_ratings__isnull=False, is_screening=False, problem__is_bad=False
    )


def _quality_control(
    *,
    count: int,
    candidates: Sequence[Candidate],
    chosen: set[int],
    seed: int,
    model_version: ModelVersion | None,
) -> list[Pick]:
    """Gold solutions first, then seeded-random solutions of the pool; none of the batch."""
    if count <= 0:
        return []
    gold = list(
        as_candidates(
            _gold().exclude(pk__in=chosen).values_list(*SCORE_FIELDS),
            model_version=model_version,
        )
    )
    taken = chosen | {c.solution_id for c in gold}
    rest = [c for c in candidates if c.solution_id not in taken]
    ordered = in_order(gold, seed=seed, key=at_random) + in_order(rest, seed=seed, key=at_random)
    return [Pick(c, SelectionReason.QUALITY_CONTROL) for c in ordered[:count]]


# The name it had before the move: a lock is shared by every process of a deploy.
PUBLISH_LOCK = "trainer.selection.publish"


def next_generation_number() -> int:
    """One past the newest generation (screening's -1 and phase 1's none do not count)."""
    newest = Generation.objects.aggregate(newest=Max("number"))["newest"]
    return max(newest or 0, 0) + 1


def select_generation(
    *,
    model_version: ModelVersion | None,
    strategy: str = DEFAULT_STRATEGY,
    batch_size: int,
    per_problem_cap: int,
    wrong_share: float = 0.8,
    quality_control_count: int = 0,
    overlap_share: float = 0.0,
    overlap_labelers: int = 2,
    seed: int = 0,
    prm: "PRM | None" = None,
    request_id: str = "",
    **more: Any,
) -> Generation:
    """Score the unlabeled pool with `model_version` and publish the next generation.

    Without a model version (a first generation, before any model) nothing is scored and
    every candidate counts as unscored: `uniform` is then a plain random sample, and
    `convincing_wrong_answer` a random one that puts wrong answers first.

    - `batch_size` solutions to be labeled once each, at most `per_problem_cap` per problem,
      chosen by `strategy` (a key of STRATEGIES); `wrong_share` is the convincing wrong
      answers' share of the batch (convincing_wrong_answer only);
    - `quality_control_count` quality-control solutions on top, served to every labeler;
    - `overlap_share` of the batch labeled by `overlap_labelers` labelers each (overlap);
    - `seed` breaks ties (and is the uniform strategy's randomness);
    - `more`: the other `SelectionParams` (judge_display, ensemble_members, ...), else their
      defaults;
    - `prm`: the loaded model of `model_version`, to skip loading its checkpoint (only used
      when some solution lacks this version's score and no worker is scoring it; its scores
      then become those solutions' latest PRM scores, whether or not the version is active);
    - `request_id`: a request already fulfilled returns its generation instead of a second
      one (a redelivered task message).

    Returns the new Generation; its `params` record the parameters and what was selected.
    Raises InvalidSelection for bad parameters, SelectionConflict for an empty selection or a
    generation published at the same moment by someone else.
    """
    params = SelectionParams(
        strategy=strategy,
        batch_size=batch_size,
        per_problem_cap=per_problem_cap,
        wrong_share=wrong_share,
        quality_control_count=quality_control_count,
        overlap_share=overlap_share,
        overlap_labelers=overlap_labelers,
        seed=seed,
        **more,
    )
    return publish_generation(
        model_version=model_version, params=params, prm=prm, request_id=request_id
    )


def publish_generation(
    *,
    model_version: ModelVersion | None,
    params: SelectionParams,
    prm: "PRM | None" = None,
    request_id: str = "",
) -> Generation:
    """`select_generation` with its parameters checked already (`SelectionParams`)."""
    if request_id:
        done = Generation.objects.filter(params__request_id=request_id).first()
        if done is not None:
            logger.info("Selection %s already published %s.", request_id, done)
            return done
    scored = score_pool(model_version=model_version, prm=prm)
    # A backbone pass over the pool, like the scoring: before the lock, not inside it.
    epistemic = ensemble_uncertainties(
        model_version=model_version,
        strategy=params.strategy,
        seed=params.seed,
        members=params.ensemble_members,
        dropout=params.ensemble_dropout,
        prm=prm,
    )
    try:
        with transaction.atomic():
            # Publications take turns from here: one that read the pool while another was
            # publishing would pick that one's quality-control and batch solutions too, move
            # them into its own generation, and leave the first holding fewer than it records
            # (its quality control never served). The second now reads the pool, the request
            # ids and the next number once the first has committed.
            locks.hold(PUBLISH_LOCK)
            if request_id:
                done = Generation.objects.filter(params__request_id=request_id).first()
                if done is not None:
                    logger.info("Selection %s already published %s.", request_id, done)
                    return done
            # Enough random ones for quality control whatever the batch and the gold take.
            qc_count = params.quality_control_count
            listed = shortlist(
                pool_rows(
                    model_version=model_version, strategy=params.strategy, epistemic=epistemic
                ),
                strategy=params.strategy,
                per_problem_cap=params.per_problem_cap,
                random_count=qc_count and (qc_count + params.batch_size + _gold().count()),
                seed=params.seed,
            )
            picks = _pick(
                listed.candidates,
                strategy=params.strategy,
                batch_size=params.batch_size,
                per_problem_cap=params.per_problem_cap,
                wrong_share=params.wrong_share,
                seed=params.seed,
            )
            chosen = {pick.candidate.solution_id for pick in picks}
            quality_control_picks = _quality_control(
                count=qc_count,
                candidates=listed.random,
                chosen=chosen,
                seed=params.seed,
                model_version=model_version,
            )
            if not picks and not quality_control_picks:
                raise SelectionConflict(
                    "Nothing to select: every solution is labeled, reserved for quality control "
                    "or screening, or belongs to a problem reported bad."
                )
            recorded: dict[str, Any] = {
                **params.to_dict(),
                "pool": listed.pool,
                "scored": scored,
                "selected": dict(
                    Counter(str(pick.reason) for pick in picks + quality_control_picks)
                ),
            }
            if epistemic is not None:
                recorded["ensemble"] = {"uncertain": len(epistemic)}
            if request_id:
                recorded["request_id"] = request_id
            generation = Generation.objects.create(
                number=next_generation_number(),
                model_version=model_version,
                params=recorded,
                judge_display=params.judge_display,
            )
            _record(
                generation=generation,
                picks=picks,
                quality_control_picks=quality_control_picks,
                model_version=model_version,
            )
            overlap.set_overlap(
                generation=generation, share=params.overlap_share, labelers=params.overlap_labelers
            )
    except IntegrityError:
        raise SelectionConflict(
            "Another generation was published at the same moment; try again."
        ) from None
    logger.info("Published %s: %s", generation, recorded["selected"])
    return generation


def _record(
    *,
    generation: Generation,
    picks: list[Pick],
    quality_control_picks: list[Pick],
    model_version: ModelVersion | None,
) -> None:
    updates = [
        Solution(
            pk=pick.candidate.solution_id,
            generation=generation,
            selection_model_version=model_version,
            selection_score=pick.candidate.score,
            selection_reason=pick.reason,
            # The generation queue serves higher priority first: selection order.
            priority=float(len(picks) - rank) if rank < len(picks) else 0.0,
            is_quality_control=pick.reason == SelectionReason.QUALITY_CONTROL,
        )
        for rank, pick in enumerate(picks + quality_control_picks)
    ]
    Solution.objects.bulk_update(
        updates,
        [
            "generation",
            "selection_model_version",
            "selection_score",
            "selection_reason",
            "priority",
            "is_quality_control",
        ],
        batch_size=SOLUTION_WRITE_CHUNK,
    )


# --- the task's body -------------------------------------------------------------------------


def selection_params(overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Every selection parameter: the given ones, the SELECTION_* settings for the rest."""
    return SelectionParams.from_dict(overrides).to_dict()


def execute_selection(
    *, model_version_id: int, params: Mapping[str, Any], request_id: str = ""
) -> Generation | None:
    """The body of the Celery task: select with the given version, or log why not."""
    version = ModelVersion.objects.get(pk=model_version_id)
    try:
        return publish_generation(
            model_version=version,
            params=SelectionParams.from_dict(params),
            request_id=request_id,
        )
    except (InvalidSelection, SelectionConflict) as exc:
        logger.warning("No generation selected with %s: %s", version, exc)
        return None
