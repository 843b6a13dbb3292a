"""The simulation's pool and the database it owns.

The pool: distinct samples of the simulated generator, imported through the product's own
importers (`labeling.services.importing`, which grade every final answer), with a seeded few
reserved for quality control. The database: the simulation refuses one holding anything it
did not write, and clears its own previous run before starting.
"""

import json
import math
import random
import tempfile
from pathlib import Path

from django.db import transaction

from core import store
from core.errors import Conflict
from labeling import quality
from labeling.models import Generation, LabelingSession, Problem, Solution
from labeling.services import importing
from trainer.evaluation.simulation.domain import (
    KEY_PREFIX,
    SOURCE,
    SUBJECT,
    Generator,
    Sample,
    make_problems,
)
from trainer.evaluation.simulation.labelers import USERNAME_PREFIX
from trainer.training.models import ModelVersion, TrainingRun

RESEARCHER = "sim-researcher"  # triggers the simulation's training runs


class SimulationRefused(Conflict):
    """The simulation cannot run here (a foreign database, a bad configuration); the message
    says why."""


# --- the database the simulation owns ---------------------------------------------------------


def check_database() -> None:
    """SimulationRefused unless everything in the database was written by the simulation."""
    foreign = {
        "problems": Problem.objects.exclude(unique_id__startswith=KEY_PREFIX).count(),
        "labeling sessions": LabelingSession.objects.exclude(
            labeler__user__username__startswith=USERNAME_PREFIX
        ).count(),
        "training runs": TrainingRun.objects.exclude(requested_by__username=RESEARCHER).count(),
        "model versions": ModelVersion.objects.exclude(
            training_run__requested_by__username=RESEARCHER
        ).count(),
    }
    found = {name: count for name, count in foreign.items() if count}
    if found:
        listed = ", ".join(f"{count} {name}" for name, count in found.items())
        raise SimulationRefused(
            f"This database holds data the simulation did not write ({listed}). The simulation "
            "creates problems, labels, generations and model versions and clears its own "
            "between runs: point it at an empty database, e.g. "
            "DATABASE_URL=sqlite:///var/simulation.sqlite3 python manage.py migrate, then "
            "run simulate with the same DATABASE_URL."
        )


def clear_simulation() -> None:
    """Delete what an earlier simulation wrote (after check_database said it is all ours)."""
    with transaction.atomic():
        LabelingSession.objects.filter(labeler__user__username__startswith=USERNAME_PREFIX).delete()
        Problem.objects.filter(unique_id__startswith=KEY_PREFIX).delete()
        # Sessions and solutions are gone, and every generation was the simulation's.
        Generation.objects.all().delete()
        versions = ModelVersion.objects.filter(training_run__requested_by__username=RESEARCHER)
        references = list(versions.values_list("checkpoint", flat=True))
        versions.delete()
        TrainingRun.objects.filter(requested_by__username=RESEARCHER).delete()
    for reference in references:
        store.delete(reference)


# --- the pool ---------------------------------------------------------------------------------


def pool_samples(
    *, size: int, samples_per_problem: int, seed: int, generator: Generator
) -> list[Sample]:
    """`size` distinct samples, `samples_per_problem` per problem (fewer if a problem has
    fewer)."""
    count = math.ceil(size / samples_per_problem)
    samples: list[Sample] = []
    for problem in make_problems(count, seed=seed, namespace="pool"):
        seen: set[tuple[str, ...]] = set()
        index = 0
        while len(seen) < samples_per_problem and index < 8 * samples_per_problem:
            sample = generator.sample(problem, index)
            index += 1
            if tuple(sample.texts) not in seen:
                seen.add(tuple(sample.texts))
                samples.append(sample)
    return samples[:size]


def import_pool(samples: list[Sample], *, quality_control: int, seed: int) -> dict:
    """Import the pool through the product's importers; reserve `quality_control` solutions
    (with their exact labels as gold) for quality control."""
    problems = {s.problem.key: s.problem for s in samples}
    with tempfile.TemporaryDirectory(prefix="simulate-") as tmp:
        problems_path = Path(tmp) / "problems.jsonl"
        solutions_path = Path(tmp) / "solutions.jsonl"
        with problems_path.open("w", encoding="utf-8") as f:
            for problem in problems.values():
                record = {
                    "unique_id": problem.key,
                    "problem": problem.text,
                    "answer": str(problem.answer),
                    "subject": SUBJECT,
                    "level": problem.leaves,
                    "split": "simulation",
                }
                f.write(json.dumps(record, ensure_ascii=False) + "\n")
        with solutions_path.open("w", encoding="utf-8") as f:
            for sample in samples:
                record = {
                    "unique_id": sample.problem.key,
                    "steps": sample.texts,
                    "answer": sample.final_answer,
                    "source": SOURCE,
                    # Not a modelled key: kept in Solution.meta, where simulated labelers
                    # read the truth.
                    "simulation": {
                        "step_ratings": [step.rating for step in sample.steps],
                        "gold_ratings": sample.gold_ratings,
                        "misconception": sample.from_misconception,
                    },
                }
                f.write(json.dumps(record, ensure_ascii=False) + "\n")
        imported_problems = importing.import_problems(path=problems_path, name="simulated problems")
        imported = importing.import_solutions(path=solutions_path, name="simulated solutions")
    reserved = _reserve_quality_control(count=quality_control, seed=seed)
    pool = Solution.objects.filter(problem__unique_id__startswith=KEY_PREFIX)
    return {
        "problems": imported_problems.created,
        "solutions": imported.created,
        "correct_share": round(pool.filter(is_correct=True).count() / max(1, pool.count()), 4),
        "quality_control": reserved,
    }


def _reserve_quality_control(*, count: int, seed: int) -> int:
    """Seeded solutions of distinct problems become quality control, their exact labels gold."""
    if not count:
        return 0
    rows = list(Solution.objects.order_by("pk").values_list("pk", "problem_id"))
    # The seed string keeps its first spelling, so that a seed picks the same solutions as
    # in earlier runs.
    random.Random(f"{seed}:qc").shuffle(rows)
    chosen: dict[int, int] = {}
    for pk, problem_id in rows:
        if len(chosen) < count and problem_id not in chosen:
            chosen[problem_id] = pk
    solutions = Solution.objects.filter(pk__in=chosen.values())
    for solution in solutions:
        solution.gold_ratings = solution.meta["simulation"]["gold_ratings"]
        solution.save(update_fields=["gold_ratings"])
    return quality.mark_solutions(solutions=solutions, role=quality.QUALITY_CONTROL)
