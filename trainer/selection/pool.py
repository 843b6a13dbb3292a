"""The pool as a selection reads it: the unlabeled solutions, scored by the selecting model
version, as strategy candidates (`trainer.selection.strategies.Candidate`), and the shortlist a
strategy can still pick from, read in chunks so that a pool of 100,000 solutions never sits in
memory as candidates. Only the strategy that orders by a signal pays for reading it: the
machine label sources for `disagreement`, the PRM's ensemble for `ensemble_uncertainty`."""

import heapq
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.db.models import QuerySet

from labeling.models import Solution
from labeling.selectors import has_submitted_label
from trainer.selection import disagreement
from trainer.selection.strategies import SHORTLISTS, Candidate, at_random, tiebreak
from trainer.training.models import ModelVersion

if TYPE_CHECKING:
    from trainer.training.ml.prm import PRM


def unlabeled_pool() -> QuerySet[Solution]:
    """Solutions selection may pick: unlabeled, not quality control or screening, problem not
    marked bad (an open report alone keeps it in the pool)."""
    return Solution.objects.filter(
        problem__is_bad=False, is_quality_control=False, is_screening=False
    ).exclude(has_submitted_label())


def score_pool(*, model_version: ModelVersion | None, prm: "PRM | None") -> int:
    """Score what this version has not scored yet, through its chunks (`trainer.scoring.chunks`):
    pending chunks are scored here, chunks other workers hold are waited for. Returns how many
    solutions this selection scored."""
    if model_version is None:
        return 0
    from trainer.scoring import chunks as scoring

    return scoring.score_in_process(model_version=model_version, prm=prm)


def as_candidates(
    rows,
    *,
    model_version: ModelVersion | None,
    disagreements: Mapping[int, float] | None = None,
    epistemic: Mapping[int, float] | None = None,
) -> Iterator[Candidate]:
    # A score written by another version (a rescore raced this selection) is not this
    # version's opinion: such a solution counts as unscored, as every one does without a model.
    own = model_version.pk if model_version is not None else None
    apart = disagreements or {}
    unsure = epistemic or {}
    return (
        Candidate(
            pk,
            problem_id,
            score if own is not None and version_id == own else None,
            ok,
            apart.get(pk),
            unsure.get(pk),
        )
        for pk, problem_id, score, version_id, ok in rows
    )


SCORE_FIELDS = ("pk", "problem_id", "prm_score", "prm_model_version_id", "is_correct")
POOL_READ_CHUNK = 5000


class _Best:
    """The `size` first candidates of an order, kept in a bounded heap as they stream by."""

    def __init__(self, *, size: int, key: Callable) -> None:
        self.size, self.key = size, key
        self._heap: list[tuple] = []

    def offer(self, candidate: Candidate, *, tie: int) -> None:
        """`tie`: the candidate's `tiebreak` with the selection's seed."""
        if self.size <= 0:
            return
        # `in_order`'s sort key, negated: the heap's top is the last one kept.
        order = (*self.key(candidate), tie)
        entry = (tuple(-x for x in order), -candidate.solution_id, candidate)
        if len(self._heap) < self.size:
            heapq.heappush(self._heap, entry)
        elif entry > self._heap[0]:
            heapq.heapreplace(self._heap, entry)

    def __iter__(self):
        return (candidate for _, _, candidate in self._heap)


@dataclass
class Shortlist:
    """What a selection can still pick, read from the pool in one pass: per problem what the
    strategy can reach (SHORTLISTS), and the first seeded-random ones quality control can."""

    candidates: list[Candidate]
    random: list[Candidate]
    pool: int  # solutions read


def shortlist(
    rows: Iterable[Candidate],
    *,
    strategy: str,
    per_problem_cap: int,
    random_count: int,
    seed: int,
) -> Shortlist:
    """Stream candidates into bounded heaps: memory grows with problems × cap, not the pool.
    The strategies pick the same from `candidates` as from every row (same seed)."""
    per_problem: dict[int, list[tuple[Callable | None, _Best]]] = {}
    random = _Best(size=random_count, key=at_random)
    pool = 0
    for candidate in rows:
        pool += 1
        tie = tiebreak(seed=seed, solution_id=candidate.solution_id)
        heaps = per_problem.get(candidate.problem_id)
        if heaps is None:
            heaps = per_problem[candidate.problem_id] = [
                (which, _Best(size=per_problem_cap, key=key)) for which, key in SHORTLISTS[strategy]
            ]
        for which, best in heaps:
            if which is None or which(candidate):
                best.offer(candidate, tie=tie)
        random.offer(candidate, tie=tie)
    kept: dict[int, Candidate] = {}
    for heaps in per_problem.values():
        for _, best in heaps:
            kept.update((c.solution_id, c) for c in best)
    return Shortlist(candidates=list(kept.values()), random=list(random), pool=pool)


def pool_rows(
    *,
    model_version: ModelVersion | None,
    strategy: str,
    epistemic: Mapping[int, float] | None = None,
) -> Iterator[Candidate]:
    rows = unlabeled_pool().values_list(*SCORE_FIELDS).iterator(chunk_size=POOL_READ_CHUNK)
    # Only the strategy that orders by it pays for reading the label sources.
    apart = (
        disagreement.disagreements(pool=unlabeled_pool(), model_version=model_version)
        if strategy == "disagreement"
        else None
    )
    return as_candidates(
        rows, model_version=model_version, disagreements=apart, epistemic=epistemic
    )


def ensemble_uncertainties(
    *,
    model_version: ModelVersion | None,
    strategy: str,
    seed: int,
    members: int,
    dropout: float,
    prm: "PRM | None",
) -> dict[int, float] | None:
    """The PRM's ensemble uncertainty about the pool (`trainer.selection.ensemble`), for the
    strategy that orders by it only; None for the others."""
    if strategy != "ensemble_uncertainty":
        return None
    # Imported here: it needs torch, which the web process does not load.
    from trainer.selection import ensemble

    return ensemble.uncertainties(
        pool=unlabeled_pool(),
        model_version=model_version,
        seed=seed,
        members=members,
        dropout=dropout,
        prm=prm,
    )
