"""Score stored solutions with a PRM and write the scores back in bulk.

Solutions are read in chunks (PRM_SCORE_CHUNK); within a chunk the PRM sorts them by length
into batches (one forward pass per batch, under torch.inference_mode, bf16 autocast on CUDA),
and the chunk's step scores, solution scores and model version are written in bulk, in one
transaction per chunk: a worker killed mid-scoring leaves every solution with the complete
scores of one model version, the old one or the new. `trainer.scoring.chunks` cuts a pool into
chunks that many workers score at once with `scored_updates` and `write_scores`, committing
each chunk's scores with its done mark.

One solution never fails a scoring. A solution longer than the model's context is scored on
the steps that fit (`PRM.score_solutions`); its `prm_step_scores` is then shorter than its
steps, and `Solution.meta["prm_truncated"]` says so. A solution the model still cannot score
(a chunk fails, then it alone) gets no score, `meta["prm_failed"]` with the error, and the
version, so a rescoring does not stop on it again. Only a chunk whose every solution fails
alone (a broken model, a device out of memory) stops the scoring, to be run again.
"""

import json
import logging
from collections.abc import Callable, Iterable, Iterator
from functools import partial

from django.conf import settings
from django.db import connection, transaction
from django.db.models import QuerySet

from labeling.models import SOLUTION_WRITE_CHUNK, Solution
from trainer.training.ml.prm import PRM, Scored, configure_threads, solution_score

logger = logging.getLogger(__name__)

# Keys of Solution.meta that describe the latest scoring (schema-free: meta is a JSON field).
TRUNCATED = "prm_truncated"
FAILED = "prm_failed"


def score_and_store(
    *,
    prm: PRM,
    solution_ids: Iterable[int],
    model_version_id: int | None,
    batch_size: int = 32,
    chunk_size: int | None = None,
) -> int:
    """Score the given solutions with `prm` and store each one's step scores; returns how many
    were written."""
    configure_threads()
    ids = sorted(set(solution_ids))
    chunk = chunk_size or settings.PRM_SCORE_CHUNK
    written = 0
    for start in range(0, len(ids), chunk):
        updates = scored_updates(
            prm=prm,
            solutions=Solution.objects.filter(pk__in=ids[start : start + chunk]),
            model_version_id=model_version_id,
            batch_size=batch_size,
        )
        with transaction.atomic():
            write_scores(updates)
        written += len(updates)
    return written


def scored_updates(
    *,
    prm: PRM,
    solutions: QuerySet[Solution],
    model_version_id: int | None,
    batch_size: int = 32,
) -> list[Solution]:
    """Score these solutions (one chunk: they are held in memory) without writing anything.

    Returns unsaved Solution objects for `write_scores`, one per solution, scored or not.
    """
    configure_threads()
    rows = list(solutions.order_by("pk").values_list("pk", "problem__text", "steps", "meta"))
    # A solution without steps gets no score rather than a made-up one.
    to_score = [(pk, text, steps) for pk, text, steps, _ in rows if steps]
    results = _score_chunk(prm, to_score, batch_size=batch_size) if to_score else {}
    updates = []
    for pk, _, steps, meta in rows:
        result = results.get(pk)
        scores = result.step_scores if isinstance(result, Scored) else None
        flags = {}
        if isinstance(result, Scored) and result.truncated:
            flags[TRUNCATED] = {
                "model_version": model_version_id,
                "steps_scored": len(scores),
                "steps": len(steps),
            }
        elif isinstance(result, str):
            flags[FAILED] = {"model_version": model_version_id, "error": result}
        solution = Solution(
            pk=pk,
            prm_step_scores=scores,
            prm_score=(
                solution_score(scores, aggregation=prm.settings.aggregation) if scores else None
            ),
            prm_model_version_id=model_version_id,
        )
        solution.scoring_flags = flags
        other = {k: v for k, v in (meta or {}).items() if k not in (TRUNCATED, FAILED)}
        solution.meta = {**other, **flags}
        updates.append(solution)
    return updates


def member_scores(
    *,
    prm: PRM,
    solution_ids: Iterable[int],
    members: int,
    dropout: float,
    seed: int,
    batch_size: int = 32,
    chunk_size: int | None = None,
) -> Iterator[tuple[int, list[list[float]]]]:
    """`score_and_store`'s chunks and batches for an ensemble of heads, writing nothing: per
    solution id (with steps), each member's step scores (`PRM.member_step_scores`). A solution
    that cannot be scored alone is left out."""
    configure_threads()
    ids = sorted(set(solution_ids))
    chunk = chunk_size or settings.PRM_SCORE_CHUNK
    score = partial(prm.member_step_scores, members=members, dropout=dropout, seed=seed)
    for start in range(0, len(ids), chunk):
        rows = [
            row
            for row in Solution.objects.filter(pk__in=ids[start : start + chunk])
            .order_by("pk")
            .values_list("pk", "problem__text", "steps")
            if row[2]
        ]
        if rows:
            for pk, result in _score_chunk(prm, rows, batch_size=batch_size, score=score).items():
                if not isinstance(result, str):
                    yield pk, result


def write_scores(updates: list[Solution]) -> None:
    """Write what `scored_updates` made; the caller holds the chunk's transaction."""
    for start in range(0, len(updates), SOLUTION_WRITE_CHUNK):
        _write_scores(updates[start : start + SOLUTION_WRITE_CHUNK])


def _score_chunk(
    prm: PRM,
    rows: list[tuple[int, str, list[str]]],
    *,
    batch_size: int,
    score: Callable | None = None,
) -> dict[int, Scored | str]:
    """Per solution id, its scores (by `score`, default `prm.score_solutions`), or the error that
    kept that solution alone from a score."""
    score = score or prm.score_solutions
    try:
        scored = score(
            problems=[text for _, text, _ in rows],
            steps=[steps for _, _, steps in rows],
            batch_size=batch_size,
        )
        return dict(zip((pk for pk, _, _ in rows), scored, strict=True))
    except Exception:
        if len(rows) <= 1:
            raise
        logger.exception("Scoring %s solutions together failed; scoring them one by one", len(rows))
    results: dict[int, Scored | str] = {}
    for pk, text, steps in rows:
        try:
            results[pk] = score(problems=[text], steps=[steps])[0]
        except Exception as exc:
            logger.exception("Solution %s cannot be scored; it keeps no score", pk)
            results[pk] = f"{type(exc).__name__}: {exc}"[:500]
    if all(isinstance(result, str) for result in results.values()):
        # Not one solution's fault: let the scoring fail, to be run again.
        raise RuntimeError(f"No solution of the chunk could be scored: {results[rows[0][0]]}")
    return results


def _write_scores(solutions: list[Solution]) -> None:
    fields = ["prm_step_scores", "prm_score", "prm_model_version"]
    if connection.vendor != "postgresql":
        Solution.objects.bulk_update(solutions, [*fields, "meta"])
        return
    # One UPDATE ... FROM (VALUES ...): bulk_update's CASE WHEN per row and column took about
    # a fifth of the tiny PRM's scoring time, nearly all of it in Python.
    meta, quote = Solution._meta, connection.ops.quote_name
    columns = [quote(meta.get_field(name).column) for name in fields]
    sets = ", ".join(f"{c} = v.{c}" for c in columns)
    # The scoring's own keys of meta are replaced in place: the rest of meta is not rewritten
    # from a copy read earlier.
    meta_column = quote(meta.get_field("meta").column)
    sets += f", {meta_column} = (s.{meta_column} - %s - %s) || v.flags"
    row = "(%s::bigint, %s::jsonb, %s::double precision, %s::bigint, %s::jsonb)"
    params = [TRUNCATED, FAILED]
    for s in solutions:
        scores = None if s.prm_step_scores is None else json.dumps(s.prm_step_scores)
        flags = json.dumps(s.scoring_flags)
        params += [s.pk, scores, s.prm_score, s.prm_model_version_id, flags]
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {quote(meta.db_table)} AS s SET {sets} "
            f"FROM (VALUES {', '.join([row] * len(solutions))}) "
            f"AS v(pk, {', '.join(columns)}, flags) "
            f"WHERE s.{quote(meta.pk.column)} = v.pk",
            params,
        )
