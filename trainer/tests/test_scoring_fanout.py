"""Scoring fans out: a pool cut into chunks that several real workers score at once, each
solution once, with the scores one process gives; chunks of dead workers taken over, done ones
left alone; selection scoring only what is left; and selection's shortlist read from the
database picking exactly what the whole pool in memory would."""

import os
import random
from collections import Counter
from datetime import timedelta
from unittest import mock

import pytest
from celery.signals import worker_ready
from django.utils import timezone

from annotate.celery import app
from conftest import wait_for
from labeling.models import Problem, Solution, solution_digest
from trainer import pipeline, tasks
from trainer.models import ModelVersion, ScoringChunk
from trainer.scoring import chunks as scoring
from trainer.selection import services as selection
from trainer.selection.pool import shortlist
from trainer.selection.services import choose
from trainer.selection.strategies import SHORTLISTS, STRATEGIES, Candidate, in_order
from trainer.training.ml.prm import PRM, PRMSettings


def make_pool(*, size: int, problems: int = 12, first_problem: int = 0) -> list[Solution]:
    made = [
        Problem.objects.create(text=f"What is {n} times 3?", answer=str(3 * n))
        for n in range(first_problem, first_problem + problems)
    ]
    solutions = []
    for i in range(size):
        problem = made[i % problems]
        answer = str(3 * (i % problems) + (i % 3 == 0))
        steps = [f"Take {i} and step {j} of it." for j in range(1 + i % 4)]
        steps.append(f"# Answer\n\n{answer}")
        solutions.append(
            Solution(
                problem=problem,
                steps=steps,
                answer=answer,
                is_correct=answer == problem.answer,
                content_hash=solution_digest(steps=steps, answer=answer),
            )
        )
    return Solution.objects.bulk_create(solutions, batch_size=500)


def tiny_prm(path) -> PRM:
    corpus = [s for steps in Solution.objects.values_list("steps", flat=True)[:60] for s in steps]
    prm = PRM.build(base_model=None, corpus=corpus, settings=PRMSettings(), seed=3)
    prm.save(path)
    return PRM.load(path, device="cpu")


def active_version(path) -> ModelVersion:
    return ModelVersion.objects.create(
        name="v", checkpoint=str(path), is_active=True, promoted_at=timezone.now()
    )


def assert_chunks_partition(
    version: ModelVersion, solution_ids: list[int], *, fresh: bool = True
) -> list[ScoringChunk]:
    """The chunks are disjoint, lie in order, and every solution id is in exactly one (and, in
    a fresh plan, each chunk counts the solutions of its range)."""
    chunks = list(ScoringChunk.objects.filter(model_version=version).order_by("first_solution_id"))
    for before, after in zip(chunks, chunks[1:], strict=False):
        assert before.last_solution_id < after.first_solution_id
    covering = Counter()
    for pk in solution_ids:
        inside = [c.pk for c in chunks if c.first_solution_id <= pk <= c.last_solution_id]
        assert len(inside) == 1, f"solution {pk} is in chunks {inside}"
        covering[inside[0]] += 1
    assert not fresh or all(covering[c.pk] == c.solutions for c in chunks)
    return chunks


# --- two real workers -------------------------------------------------------------------------

POOL = 240
CHUNK = "6"


def test_two_workers_score_one_pool_at_once_each_solution_once_with_one_processs_scores(
    start_worker, tmp_path
):
    pool = make_pool(size=POOL)
    prm = tiny_prm(tmp_path / "checkpoint")
    names = [f"fanout-{n}-{os.getpid()}@%h" for n in (1, 2)]
    workers = [start_worker(name, PRM_SCORE_CHUNK=CHUNK) for name in names]
    for worker in workers:
        wait_for(lambda w=worker: " ready." in w.log_path.read_text(), timeout=120, what="a worker")
    version = active_version(tmp_path / "checkpoint")

    pipeline.queue_scoring(model_version_id=version.pk)

    def all_done() -> bool:
        chunks = ScoringChunk.objects.filter(model_version=version)
        return chunks.exists() and not chunks.exclude(status="succeeded").exists()

    wait_for(all_done, timeout=400, what="every chunk to be done")
    chunks = assert_chunks_partition(version, [s.pk for s in pool])
    assert len(chunks) == POOL // int(CHUNK)
    # Each chunk was claimed once and wrote each of its solutions: every solution scored once.
    assert [c.attempts for c in chunks] == [1] * len(chunks)
    assert sum(c.scored for c in chunks) == POOL
    assert Solution.objects.filter(prm_model_version=version).count() == POOL
    by_worker = Counter(c.worker_hostname.split("@")[0] for c in chunks)
    assert set(by_worker) == {name.split("@")[0] for name in names}, by_worker

    stored = list(Solution.objects.order_by("pk").select_related("problem"))
    expected = prm.score_solutions(
        problems=[s.problem.text for s in stored], steps=[s.steps for s in stored]
    )
    for solution, want in zip(stored, expected, strict=True):
        assert solution.prm_step_scores == pytest.approx(want.step_scores, abs=1e-5)
    assert all(w.poll() is None for w in workers)


# --- chunks in one process --------------------------------------------------------------------


@pytest.fixture
def scored_setup(db, tmp_path):
    pool = make_pool(size=30, problems=5)
    prm = tiny_prm(tmp_path / "checkpoint")
    return pool, prm, active_version(tmp_path / "checkpoint")


def test_a_chunk_whose_worker_died_is_taken_over_and_a_done_chunk_is_not_scored_again(
    scored_setup,
):
    pool, prm, version = scored_setup
    assert scoring.plan_scoring(model_version=version, chunk_size=4) == 8
    assert scoring.plan_scoring(model_version=version, chunk_size=4) == 0  # idempotent
    done = scoring.claim_chunk(model_version_id=version.pk, worker_hostname="w-done")
    assert scoring.score_chunk(chunk=done, prm=prm) == 4
    done.refresh_from_db()
    dead = scoring.claim_chunk(model_version_id=version.pk, worker_hostname="w-dead")
    # Its worker stopped beating long ago.
    ScoringChunk.objects.filter(pk=dead.pk).update(heartbeat_at=timezone.now() - timedelta(hours=1))

    written = scoring.score_in_process(model_version=version, prm=prm, worker_hostname="w-here")

    assert written == len(pool) - 4
    taken = ScoringChunk.objects.get(pk=dead.pk)
    assert taken.status == "succeeded" and taken.attempts == 2 and taken.worker_hostname == "w-here"
    again = ScoringChunk.objects.get(pk=done.pk)
    assert (again.attempts, again.finished_at, again.worker_hostname) == (
        1,
        done.finished_at,
        "w-done",
    )
    assert not scoring.unscored(version).exists()
    # The dead worker coming back late finds its claim gone and writes nothing.
    assert scoring.score_chunk(chunk=dead, prm=prm) == 0


def test_a_version_activated_again_reopens_its_done_chunks_and_new_solutions_get_new_ones(
    scored_setup,
):
    pool, prm, version = scored_setup
    scoring.score_in_process(model_version=version, prm=prm)
    first_plan = ScoringChunk.objects.count()
    # Another version scored a few; then new solutions arrived.
    other = ModelVersion.objects.create(name="other", checkpoint="/other")
    Solution.objects.filter(pk__in=[pool[0].pk, pool[1].pk]).update(prm_model_version=other)
    added = make_pool(size=3, problems=1, first_problem=100)

    assert scoring.plan_scoring(model_version=version) == 2
    assert ScoringChunk.objects.count() == first_plan + 1
    assert scoring.score_in_process(model_version=version, prm=prm) == 5
    assert_chunks_partition(version, [s.pk for s in pool + added], fresh=False)
    assert not scoring.unscored(version).exists()


def test_selection_after_a_partial_scoring_scores_only_what_is_left(scored_setup):
    pool, prm, version = scored_setup
    scoring.plan_scoring(model_version=version, chunk_size=4)
    for _ in range(3):
        chunk = scoring.claim_chunk(model_version_id=version.pk, worker_hostname="gpu-1")
        scoring.score_chunk(chunk=chunk, prm=prm)

    generation = selection.select_generation(
        model_version=version, batch_size=5, per_problem_cap=2, prm=prm
    )

    assert generation.params["scored"] == len(pool) - 12
    assert generation.params["pool"] == len(pool)
    chunks = ScoringChunk.objects.filter(model_version=version)
    assert {c.attempts for c in chunks} == {1} and {c.status for c in chunks} == {"succeeded"}
    assert not scoring.unscored(version).exists()


@pytest.mark.django_db
def test_a_restarted_worker_and_the_periodic_task_put_back_chunks_whose_worker_died(tmp_path):
    make_pool(size=12, problems=2)
    version = active_version(tmp_path / "nowhere")
    scoring.plan_scoring(model_version=version, chunk_size=4)
    gpu2 = scoring.claim_chunk(model_version_id=version.pk, worker_hostname="celery@gpu2")
    silent = scoring.claim_chunk(model_version_id=version.pk, worker_hostname="celery@gpu3")
    ScoringChunk.objects.filter(pk=silent.pk).update(
        heartbeat_at=timezone.now() - timedelta(hours=1)
    )

    class Consumer:
        hostname = "celery@gpu2"

    with (
        mock.patch("trainer.tasks.score_chunk_task.apply_async") as queue_chunk,
        mock.patch("trainer.tasks.score_task.apply_async"),
    ):
        worker_ready.send(sender=Consumer())
        queue_chunk.assert_called_once_with((gpu2.pk,), task_id=None)
        assert ScoringChunk.objects.get(pk=gpu2.pk).status == "queued"
        assert ScoringChunk.objects.get(pk=silent.pk).status == "running"

        queue_chunk.reset_mock()
        tasks.periodic_retrain_task()
        queue_chunk.assert_called_once_with((silent.pk,), task_id=None)
        assert ScoringChunk.objects.get(pk=silent.pk).status == "queued"


def test_scoring_chunks_go_to_the_gpu_queue():
    assert app.amqp.router.route({}, pipeline.SCORE_CHUNK_TASK)["queue"].name == "gpu"
    assert tasks.score_chunk_task.name == pipeline.SCORE_CHUNK_TASK
    assert tasks.score_chunk_task.acks_late is True


# --- selection from a shortlist ---------------------------------------------------------------


def tied_pool(seed: int) -> list[Candidate]:
    """Problems of 1 to 40 solutions; scores on a coarse grid (many ties) or missing."""
    rng = random.Random(seed)
    out, pk = [], 1
    for problem in range(60):
        for _ in range(rng.randint(1, 40)):
            score = rng.choice([None, *[round(0.1 * k, 1) for k in range(11)]])
            out.append(Candidate(pk, problem, score, rng.random() < 0.3))
            pk += rng.randint(1, 3)
    rng.shuffle(out)
    return out


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_the_shortlist_picks_exactly_what_the_whole_pool_in_memory_picks(strategy):
    for pool_seed in range(3):
        pool = tied_pool(pool_seed)
        for cap in (1, 2, 3, 7):
            for batch_size in (1, 9, 60, 400, 2000):
                for wrong_share in (0.0, 0.5, 0.8, 1.0):
                    seed = pool_seed * 7 + cap
                    listed = shortlist(
                        pool, strategy=strategy, per_problem_cap=cap, random_count=0, seed=seed
                    )
                    params = dict(
                        strategy=strategy,
                        batch_size=batch_size,
                        per_problem_cap=cap,
                        wrong_share=wrong_share,
                        seed=seed,
                    )
                    want = choose(candidates=pool, **params)
                    assert choose(candidates=listed.candidates, **params) == want
                    assert listed.pool == len(pool)
                    assert len(listed.candidates) <= 60 * cap * len(SHORTLISTS[strategy])


def test_the_shortlist_keeps_quality_controls_first_random_ones():
    pool = tied_pool(11)
    listed = shortlist(pool, strategy="uniform", per_problem_cap=2, random_count=25, seed=4)
    ordered = in_order(pool, seed=4, key=lambda c: ())
    assert sorted(listed.random, key=lambda c: c.solution_id) == sorted(
        ordered[:25], key=lambda c: c.solution_id
    )


@pytest.mark.django_db
@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_a_generation_read_from_the_database_is_the_one_the_whole_pool_gives(strategy):
    pool = make_pool(size=150, problems=9)
    version = ModelVersion.objects.create(name="v", checkpoint="/v", is_active=True)
    rng = random.Random(5)
    for solution in pool:
        # Coarse scores: many ties, broken by the seeded hash.
        solution.prm_score = rng.choice([None, 0.2, 0.5, 0.8])
        solution.prm_model_version = version
    Solution.objects.bulk_update(pool, ["prm_score", "prm_model_version"])
    Solution.objects.filter(pk=pool[0].pk).update(gold_ratings=[1, 1, 1])
    everything = [
        Candidate(s.pk, s.problem_id, s.prm_score, s.is_correct) for s in Solution.objects.all()
    ]
    params = dict(strategy=strategy, batch_size=20, per_problem_cap=3, wrong_share=0.8, seed=9)
    want = choose(candidates=everything, **params)
    chosen = {p.candidate.solution_id for p in want}
    gold = [] if pool[0].pk in chosen else [pool[0].pk]
    rest = [c for c in everything if c.solution_id not in chosen and c.solution_id not in gold]
    want_qc = gold + [c.solution_id for c in in_order(rest, seed=9, key=lambda c: ())]

    generation = selection.select_generation(
        model_version=version, quality_control_count=6, **params
    )

    picked = Solution.objects.filter(generation=generation)
    batch = sorted(picked.exclude(is_quality_control=True), key=lambda s: -s.priority)
    assert [s.pk for s in batch] == [p.candidate.solution_id for p in want]
    assert [s.selection_reason for s in batch] == [str(p.reason) for p in want]
    qc = set(picked.filter(is_quality_control=True).values_list("pk", flat=True))
    assert qc == set(want_qc[:6])
    assert generation.params["pool"] == 150 and generation.params["scored"] == 0
