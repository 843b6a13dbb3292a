"""The simulation loop: generations of select -> label -> retrain -> evaluate, without humans.

Everything a human loop does goes through the product's own code:
- the pool is imported with `labeling.services.import_problems` / `import_solutions` (which
  grade every final answer against the ground truth);
- generation 1 is a seeded uniform sample (no model exists yet); every later generation is
  published by `trainer.selection.select_generation` with the active model version and the
  strategy under test (`convincing_wrong_answer`, `uniform` or `uncertainty`);
- simulated labelers label through `labeling.services` (assign -> rate until the first -1 ->
  submit), with a configurable noise rate;
- the PRM is retrained from every submitted session as a recorded training run
  (`trainer.services.request_training_run` + `execute_training_run`), and the new model version
  is made active, which rescores the pool (Celery tasks run in-process here).

After each retrain the generation is evaluated on a generated test set no labeler saw (see
`evaluation`): step AUROC, first-error F1, and best-of-N accuracy of the PRM, of an outcome
reward model (ORM: the same tiny model trained on final-answer correctness of as many
uniformly drawn pool solutions as labels were used), and of majority voting.

The simulation owns its database: it refuses one that holds anything it did not write (run it
on an empty one, e.g. `DATABASE_URL=sqlite:///var/simulation.sqlite3`), and clears its own
previous run before starting.
"""

import hashlib
import json
import math
import random
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Count

from labeling import quality
from labeling.models import Generation, LabelingSession, Problem, SelectionReason, Solution
from labeling.services import import_problems, import_solutions
from trainer import selection, services
from trainer.dataset import Example
from trainer.models import ModelVersion, TrainingRun
from trainer.simulation import evaluation
from trainer.simulation.domain import (
    KEY_PREFIX,
    SOURCE,
    SUBJECT,
    Generator,
    Sample,
    make_problems,
)
from trainer.simulation.labelers import USERNAME_PREFIX, label_generation, make_labelers

RESEARCHER = "sim-researcher"  # triggers the simulation's training runs
STRATEGIES = tuple(selection.STRATEGIES)  # convincing_wrong_answer, uniform, uncertainty


class SimulationRefused(Exception):
    """The simulation cannot run here; the message says why."""


@dataclass
class SimulationConfig:
    strategy: str = "convincing_wrong_answer"
    generations: int = 6
    labels_per_generation: int = 500  # submitted sessions per generation, QC included
    pool_size: int = 8000  # candidate solutions (distinct), samples_per_problem per problem
    samples_per_problem: int = 16
    per_problem_cap: int = 4
    wrong_share: float = 0.8
    qc: int = 0  # quality-control solutions (with gold), labeled once by every labeler
    labelers: int = 3
    noise: float = 0.05  # per step, a labeler's rating is a random wrong one
    seed: int = 0
    # The test set: problems no labeler sees, many samples each, exact labels.
    test_problems: int = 100
    test_samples: int = 128
    best_of: tuple[int, ...] = (1, 4, 16, 64)
    trials: int = 200
    # Retraining (the same for the PRM and the ORM).
    epochs: int = 8
    learning_rate: float = 3e-3
    batch_size: int = 32
    max_minutes: float = 5.0
    eval_fraction: float = 0.05  # the training run's own held-out share of labeled problems
    orm: bool = True
    orm_every_generation: bool = True  # False: the ORM baseline at the final label count only

    def check(self) -> None:
        if self.strategy not in STRATEGIES:
            raise SimulationRefused(f"strategy must be one of {', '.join(STRATEGIES)}.")
        positive = ("generations", "labels_per_generation", "pool_size", "samples_per_problem")
        for name in (*positive, "labelers", "test_problems", "test_samples", "trials", "epochs"):
            if getattr(self, name) < 1:
                raise SimulationRefused(f"{name} must be at least 1.")
        if not 0.0 <= self.noise <= 1.0:
            raise SimulationRefused("noise must be between 0 and 1.")
        if self.qc < 0:
            raise SimulationRefused("qc cannot be negative.")
        if self.qc * self.labelers >= self.labels_per_generation:
            raise SimulationRefused("Quality control would use the whole first generation.")


@dataclass
class SimulationResult:
    config: dict
    pool: dict
    generations: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


Emit = Callable[[str], None]


# --- the database the simulation owns ---------------------------------------------------------


def check_database() -> None:
    """SimulationRefused unless everything in the database was written by the simulation."""
    foreign = {
        "problems": Problem.objects.exclude(unique_id__startswith=KEY_PREFIX).count(),
        "labeling sessions": LabelingSession.objects.exclude(
            labeler__user__username__startswith=USERNAME_PREFIX
        ).count(),
        "training runs": TrainingRun.objects.exclude(triggered_by__username=RESEARCHER).count(),
        "model versions": ModelVersion.objects.exclude(
            training_run__triggered_by__username=RESEARCHER
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
        versions = ModelVersion.objects.filter(training_run__triggered_by__username=RESEARCHER)
        paths = [Path(p) for p in versions.values_list("checkpoint_path", flat=True)]
        versions.delete()
        runs = TrainingRun.objects.filter(triggered_by__username=RESEARCHER)
        paths += [
            Path(settings.PRM_MODEL_DIR) / f"run-{pk}" for pk in runs.values_list("pk", flat=True)
        ]
        runs.delete()
    root = Path(settings.PRM_MODEL_DIR).resolve()
    for path in paths:
        if path.resolve().parent == root and path.is_dir():
            shutil.rmtree(path, ignore_errors=True)


@contextmanager
def in_process():
    """Celery tasks run inline (scoring after a model version is activated), errors raised;
    and no selection is chained after a retrain: the loop selects itself."""
    from django.test import override_settings

    from annotate.celery import app

    saved = (app.conf.task_always_eager, app.conf.task_eager_propagates)
    app.conf.task_always_eager = app.conf.task_eager_propagates = True
    try:
        with override_settings(SELECTION_AFTER_RETRAIN="never"):
            yield
    finally:
        app.conf.task_always_eager, app.conf.task_eager_propagates = saved


# --- the pool ---------------------------------------------------------------------------------


def pool_samples(config: SimulationConfig, generator: Generator) -> list[Sample]:
    """Distinct samples, `samples_per_problem` per problem (fewer if a problem has fewer)."""
    count = math.ceil(config.pool_size / config.samples_per_problem)
    samples: list[Sample] = []
    for problem in make_problems(count, seed=config.seed, namespace="pool"):
        seen: set[tuple[str, ...]] = set()
        index = 0
        while len(seen) < config.samples_per_problem and index < 8 * config.samples_per_problem:
            sample = generator.sample(problem, index)
            index += 1
            if tuple(sample.texts) not in seen:
                seen.add(tuple(sample.texts))
                samples.append(sample)
    return samples[: config.pool_size]


def import_pool(samples: list[Sample], *, qc: int, seed: int) -> dict:
    """Import the pool through the product's importers; reserve `qc` gold QC solutions."""
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
        imported_problems = import_problems(path=problems_path, name="simulated problems")
        imported = import_solutions(path=solutions_path, name="simulated solutions")
    reserved = _reserve_quality_control(count=qc, seed=seed)
    pool = Solution.objects.filter(problem__unique_id__startswith=KEY_PREFIX)
    return {
        "problems": imported_problems.created,
        "solutions": imported.created,
        "correct_share": round(pool.filter(is_correct=True).count() / max(1, pool.count()), 4),
        "quality_control": reserved,
    }


def _reserve_quality_control(*, count: int, seed: int) -> int:
    """Seeded solutions of distinct problems become QC, with their exact labels as gold."""
    if not count:
        return 0
    rows = list(Solution.objects.order_by("pk").values_list("pk", "problem_id"))
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


# --- one generation ---------------------------------------------------------------------------


def initial_generation(*, config: SimulationConfig, batch_size: int) -> Generation:
    """Generation 1: no model exists yet, so a seeded uniform sample of the pool, plus QC.

    The order is a seeded hash of each solution's problem and content, not of its database
    id, so every strategy compared with the same seed starts from the same first generation.
    """
    rows = selection.unlabeled_pool().values_list(
        "pk", "problem_id", "problem__unique_id", "content_hash"
    )
    ordered = sorted(rows, key=lambda row: _digest(config.seed, row[2], row[3]))
    taken: Counter = Counter()
    picks: list[int] = []
    for pk, problem_id, _, _ in ordered:
        if len(picks) < batch_size and taken[problem_id] < config.per_problem_cap:
            taken[problem_id] += 1
            picks.append(pk)
    with transaction.atomic():
        generation = Generation.objects.create(
            number=selection.next_generation_number(),
            params={
                "strategy": "uniform",
                "batch_size": batch_size,
                "per_problem_cap": config.per_problem_cap,
                "seed": config.seed,
                "pool": len(ordered),
                "selected": {SelectionReason.UNIFORM.value: len(picks)},
                "note": "simulation: first generation, no model yet",
            },
        )
        Solution.objects.bulk_update(
            [
                Solution(
                    pk=pk,
                    generation=generation,
                    selection_reason=SelectionReason.UNIFORM,
                    priority=float(len(picks) - rank),
                )
                for rank, pk in enumerate(picks)
            ],
            ["generation", "selection_reason", "priority"],
            batch_size=500,
        )
        Solution.objects.filter(is_quality_control=True).update(
            generation=generation, selection_reason=SelectionReason.QUALITY_CONTROL
        )
    return generation


def _digest(*parts) -> bytes:
    return hashlib.blake2b(":".join(map(str, parts)).encode(), digest_size=8).digest()


def retrain(*, researcher, config: SimulationConfig) -> ModelVersion:
    """A recorded training run on every submitted session; its model version becomes active."""
    params = {
        "epochs": config.epochs,
        "learning_rate": config.learning_rate,
        "batch_size": config.batch_size,
        "max_minutes": config.max_minutes,
        "seed": config.seed,
        "eval_fraction": config.eval_fraction,
    }
    run = services.request_training_run(user=researcher, params=params, enqueue=False)
    run = services.execute_training_run(run_id=run.pk, worker_hostname="manage.py simulate")
    if run.status != TrainingRun.Status.SUCCEEDED:
        raise SimulationRefused(f"Training run {run.pk} {run.status}: {run.error}")
    version = run.model_version
    if not version.is_active:
        # The loop always selects with the newest model, as the paper's did.
        version = services.activate_model_version(model_version_id=version.pk)
    return version


@dataclass
class TestSet:
    samples: list[Sample]

    @classmethod
    def build(cls, config: SimulationConfig, generator: Generator) -> "TestSet":
        problems = make_problems(config.test_problems, seed=config.seed, namespace="test")
        return cls([s for p in problems for s in generator.samples(p, config.test_samples)])

    def groups(self, scores: dict[str, list[float]]) -> list[list[evaluation.Scored]]:
        by_problem: dict[str, list[evaluation.Scored]] = {}
        for i, sample in enumerate(self.samples):
            by_problem.setdefault(sample.problem.key, []).append(
                evaluation.Scored(
                    answer=sample.final_answer,
                    is_correct=sample.is_correct,
                    scores={name: values[i] for name, values in scores.items()},
                )
            )
        return list(by_problem.values())


def score_test_set(prm, samples: list[Sample]) -> tuple[list[list[float]], list[float]]:
    from trainer.prm import solution_score

    step_scores = prm.score(
        problems=[s.problem.text for s in samples], steps=[s.texts for s in samples], batch_size=64
    )
    aggregation = prm.settings.aggregation
    return step_scores, [solution_score(s, aggregation=aggregation) for s in step_scores]


def orm_example(sample: Sample, problem_id: int) -> Example:
    """Outcome supervision: the whole solution as one step, rated by its final answer."""
    return Example(
        problem_id=problem_id,
        solution_id=None,
        problem=sample.problem.text,
        steps=["\n\n".join(sample.texts)],
        labels=[1 if sample.is_correct else -1],
    )


def train_orm(*, samples: list[Sample], config: SimulationConfig):
    """The ORM baseline on these samples, with the PRM's training recipe; returns it loaded."""
    from trainer.prm import PRM
    from trainer.train import TrainParams, train_prm

    ids: dict[str, int] = {}
    examples = [orm_example(s, ids.setdefault(s.problem.key, len(ids))) for s in samples]
    params = TrainParams(
        epochs=config.epochs,
        learning_rate=config.learning_rate,
        batch_size=config.batch_size,
        seed=config.seed,
        max_seconds=config.max_minutes * 60,
    )
    with tempfile.TemporaryDirectory(prefix="simulate-orm-") as tmp:
        out = Path(tmp) / "orm"
        train_prm(train=examples, eval=[], params=params, base_model=None, out_dir=out)
        return PRM.load(out)


def orm_scores(orm, samples: list[Sample]) -> list[float]:
    step_scores = orm.score(
        problems=[s.problem.text for s in samples],
        steps=[["\n\n".join(s.texts)] for s in samples],
        batch_size=64,
    )
    return [scores[0] for scores in step_scores]


# --- the whole run ----------------------------------------------------------------------------


def run_simulation(
    config: SimulationConfig,
    *,
    emit: Emit | None = None,
    orm_cache: dict | None = None,
) -> SimulationResult:
    """Run `config.generations` generations from a fresh simulation state; see the module doc.

    `orm_cache` (label count -> ORM scores of the test set) lets runs with the same seed and
    test set share their ORM baselines: the ORM does not depend on the strategy.
    """
    from trainer.prm import PRM

    say = emit or (lambda line: None)
    config.check()
    check_database()
    clear_simulation()
    generator = Generator(seed=config.seed)
    samples = pool_samples(config, generator)
    test = TestSet.build(config, generator)
    orm_cache = {} if orm_cache is None else orm_cache
    orm_order = list(samples)
    random.Random(f"{config.seed}:orm").shuffle(orm_order)

    pool = import_pool(samples, qc=config.qc, seed=config.seed)
    say(
        f"Pool: {pool['solutions']} solutions of {pool['problems']} problems "
        f"({pool['correct_share']:.0%} correct); test set: {len(test.samples)} samples of "
        f"{config.test_problems} problems."
    )
    result = SimulationResult(config=_config_dict(config), pool=pool)
    labelers = make_labelers(count=config.labelers, noise=config.noise, seed=config.seed)
    researcher, _ = get_user_model().objects.get_or_create(username=RESEARCHER)

    version: ModelVersion | None = None
    prm = None
    with in_process():
        for round_ in range(1, config.generations + 1):
            timings: dict[str, float] = {}
            started = time.monotonic()
            if version is None:
                qc_sessions = pool["quality_control"] * config.labelers
                generation = initial_generation(
                    config=config, batch_size=config.labels_per_generation - qc_sessions
                )
            else:
                generation = selection.select_generation(
                    model_version=version,
                    strategy=config.strategy,
                    batch_size=config.labels_per_generation,
                    per_problem_cap=config.per_problem_cap,
                    wrong_share=config.wrong_share,
                    qc_count=pool["quality_control"],
                    seed=config.seed + round_,
                    prm=prm,
                )
            timings["select"] = time.monotonic() - started

            started = time.monotonic()
            labeled = label_generation(
                labelers=labelers, generation=generation, budget=config.labels_per_generation
            )
            timings["label"] = time.monotonic() - started
            labels = LabelingSession.objects.filter(submitted_at__isnull=False).count()
            say(f"Generation {generation.number}: {labeled} labels ({labels} in all); training.")

            started = time.monotonic()
            version = retrain(researcher=researcher, config=config)
            timings["train"] = time.monotonic() - started

            started = time.monotonic()
            prm = PRM.load(version.checkpoint_path)
            step_scores, prm_scores = score_test_set(prm, test.samples)
            scores = {"prm": prm_scores}
            if config.orm and (config.orm_every_generation or round_ == config.generations):
                if labels not in orm_cache:
                    orm = train_orm(samples=orm_order[:labels], config=config)
                    orm_cache[labels] = orm_scores(orm, test.samples)
                scores["orm"] = orm_cache[labels]
            timings["evaluate"] = time.monotonic() - started
            row = {
                "generation": generation.number,
                "labels": labels,
                "new_labels": labeled,
                **_composition(generation),
                **evaluation.step_metrics(test.samples, step_scores),
                "best_of_n": evaluation.best_of_n(
                    test.groups(scores),
                    sizes=config.best_of,
                    trials=config.trials,
                    seed=config.seed,
                    verifiers=list(scores),
                ),
                "model_version": version.pk,
                "training_run": version.training_run_id,
                "seconds": {k: round(v, 1) for k, v in timings.items()},
            }
            result.generations.append(row)
            say(f"{summary_line(row, config.best_of)} ({_seconds(timings)})")
    return result


def _composition(generation: Generation) -> dict:
    """What the labelers saw in this generation: the truth about the labeled solutions."""
    sessions = LabelingSession.objects.filter(generation=generation, submitted_at__isnull=False)
    solutions = Solution.objects.filter(pk__in=sessions.values("solution_id"))
    labeled = solutions.count()
    wrong = solutions.filter(is_correct=False).count()
    with_error = sum(
        1
        for meta in solutions.values_list("meta", flat=True)
        if -1 in meta["simulation"]["gold_ratings"]
    )
    return {
        "labeled_solutions": labeled,
        "wrong_answer_share": round(wrong / labeled, 4) if labeled else None,
        "with_error_share": round(with_error / labeled, 4) if labeled else None,
        "selected": dict(
            Solution.objects.filter(generation=generation)
            .exclude(selection_reason="")
            .values("selection_reason")
            .annotate(n=Count("pk"))
            .values_list("selection_reason", "n")
            .order_by()
        ),
    }


def _seconds(timings: dict[str, float]) -> str:
    return ", ".join(f"{name} {seconds:.0f} s" for name, seconds in timings.items())


def _config_dict(config: SimulationConfig) -> dict:
    data = asdict(config)
    data["best_of"] = list(config.best_of)
    return data


def summary_line(row: dict, sizes) -> str:
    auroc = row.get("step_auroc")
    f1 = row.get("first_error_f1")
    parts = [
        f"gen {row['generation']}",
        f"labels {row['labels']}",
        f"AUROC {auroc:.3f}" if auroc is not None else "AUROC -",
        f"first-error F1 {f1:.3f}" if f1 is not None else "first-error F1 -",
    ]
    largest = str(max(sizes))
    for method, by_n in row["best_of_n"].items():
        parts.append(f"{method}@{largest} {by_n[largest]['mean']:.3f}")
    return ", ".join(parts)


# --- comparing strategies ---------------------------------------------------------------------


def compare(
    config: SimulationConfig, *, strategies=STRATEGIES, emit: Emit | None = None
) -> dict[str, SimulationResult]:
    """Every strategy from the same seed (same pool, same first generation, same test set)."""
    say = emit or (lambda line: None)
    orm_cache: dict = {}
    results = {}
    for strategy in strategies:
        say(f"--- strategy {strategy} ---")
        results[strategy] = run_simulation(
            replace(config, strategy=strategy), emit=emit, orm_cache=orm_cache
        )
    return results


def table(results: dict[str, SimulationResult]) -> str:
    """A plain-text table: one line per strategy and generation."""
    first = next(iter(results.values()))
    sizes = [str(n) for n in first.config["best_of"]]
    # The ORM may be evaluated at the final generation only: its cells are "-" before.
    methods = list(dict.fromkeys(m for row in first.generations for m in row["best_of_n"]))
    header = ["strategy", "gen", "labels", "wrong%", "AUROC", "FE-F1"] + [
        f"{method}@{n}" for method in methods for n in sizes
    ]
    lines = [header]
    for strategy, result in results.items():
        for row in result.generations:
            line = [
                strategy,
                str(row["generation"]),
                str(row["labels"]),
                _fmt(row.get("wrong_answer_share"), percent=True),
                _fmt(row.get("step_auroc")),
                _fmt(row.get("first_error_f1")),
            ]
            line += [
                _fmt(row["best_of_n"][m][n]["mean"] if m in row["best_of_n"] else None)
                for m in methods
                for n in sizes
            ]
            lines.append(line)
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.rjust(width) for cell, width in zip(line, widths, strict=True))
        for line in lines
    )


def _fmt(value, *, percent: bool = False) -> str:
    if value is None:
        return "-"
    return f"{100 * value:.0f}" if percent else f"{value:.3f}"


def data_efficiency(results: dict[str, SimulationResult], *, baseline: str = "uniform") -> dict:
    """Labels each strategy needs to reach the baseline's final step AUROC (interpolated)."""
    if baseline not in results or not results[baseline].generations:
        return {}
    target = results[baseline].generations[-1]["step_auroc"]
    if target is None:
        return {}
    needed = {name: _labels_to_reach(r.generations, target) for name, r in results.items()}
    base = needed[baseline]
    return {
        "target_auroc": round(target, 4),
        "labels_needed": needed,
        "efficiency_vs_" + baseline: {
            name: round(base / labels, 2) if labels and base else None
            for name, labels in needed.items()
        },
    }


def _labels_to_reach(rows: list[dict], target: float) -> float | None:
    previous = (0, 0.5)  # no labels: chance
    for row in rows:
        labels, auroc = row["labels"], row["step_auroc"]
        if auroc is None:
            continue
        if auroc >= target:
            (l0, a0) = previous
            if auroc == a0:
                return float(labels)
            return round(l0 + (target - a0) * (labels - l0) / (auroc - a0), 1)
        previous = (labels, auroc)
    return None


def plot(results: dict[str, SimulationResult], path: Path) -> Path | None:
    """Step AUROC and best-of-N accuracy against labels used; None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    first = next(iter(results.values()))
    largest = str(max(first.config["best_of"]))
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for strategy, result in results.items():
        labels = [row["labels"] for row in result.generations]
        left.plot(labels, [row["step_auroc"] for row in result.generations], "o-", label=strategy)
        right.plot(
            labels,
            [row["best_of_n"]["prm"][largest]["mean"] for row in result.generations],
            "o-",
            label=f"PRM, {strategy}",
        )
    rows = first.generations
    with_orm = [row for row in rows if "orm" in row["best_of_n"]]
    if with_orm:
        right.plot(
            [row["labels"] for row in with_orm],
            [row["best_of_n"]["orm"][largest]["mean"] for row in with_orm],
            "s--",
            color="grey",
            label="ORM (uniform samples)",
        )
    if rows:
        majority = rows[0]["best_of_n"]["majority"][largest]["mean"]
        right.axhline(majority, linestyle=":", color="black", label="majority voting")
    left.set(xlabel="labels used", ylabel="held-out step AUROC", title="PRM step AUROC")
    right.set(
        xlabel="labels used",
        ylabel=f"best-of-{largest} accuracy",
        title=f"Best-of-{largest} on held-out problems",
    )
    for axis in (left, right):
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def result_dict(results: dict[str, SimulationResult]) -> dict:
    return {
        "strategies": {name: r.to_dict() for name, r in results.items()},
        "data_efficiency": data_efficiency(results),
    }
