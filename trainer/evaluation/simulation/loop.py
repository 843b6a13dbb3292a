"""The simulation loop: generations of select -> label -> retrain -> evaluate, without humans.

Over 500 lines on purpose: one simulated round of the product, read top to bottom.

Everything a human loop does goes through the product's own code:
- the pool is imported with `labeling.services.importing.import_problems` /
  `import_solutions` (which grade every final answer against the ground truth);
- generation 1 is a seeded uniform sample (no model exists yet); every later generation is
  published by `trainer.selection.services.publish_generation` with the active model version
  and the strategy under test (`convincing_wrong_answer`, `uniform`, `uncertainty` or
  `ensemble_uncertainty`), its parameters built by `recipe.selection`;
- simulated labelers label through `labeling.services.workbench` (next session -> rate until
  the first -1 -> submit), with a configurable noise rate;
- the PRM is retrained from every submitted session as a recorded training run
  (`trainer.training.runs.request_training_run` + `execute_training_run`), and the new model version
  is made active (`trainer.training.model_versions.activate_model_version`), which rescores the pool
  (Celery tasks run in-process here). Every retrain's parameters are `recipe`'s, the product's
  `TrainingParams` with the simulation's overrides.

After each retrain the generation is evaluated on a generated test set no labeler saw (see
`evaluation`): step AUROC, first-error F1, and best-of-N accuracy of the PRM, of an outcome
reward model (ORM: the same tiny model trained on final-answer correctness of as many
uniformly drawn pool solutions as labels were used), and of majority voting.

The simulation owns its database (`pool`): it refuses one that holds anything it did not
write (run it on an empty one, e.g. `DATABASE_URL=sqlite:///var/simulation.sqlite3`), and
clears its own previous run before starting.

About 500 lines, read top to bottom as one loop; the pool and the evaluation live beside it.
"""

import hashlib
import math
import random
import time
from collections import Counter
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Count

from core.jobs import JobOrigin
from core.params import like, param
from labeling.models import Generation, LabelingSession, SelectionReason, Solution
from trainer.evaluation.simulation import evaluation, pool, recipe
from trainer.evaluation.simulation.domain import Generator
from trainer.evaluation.simulation.labelers import label_generation, make_labelers
from trainer.evaluation.simulation.pool import SimulationRefused
from trainer.selection import services as selection
from trainer.selection import strategies
from trainer.selection.pool import unlabeled_pool
from trainer.training import checkpoints, model_versions, runs
from trainer.training.ml.prm import PRM, solution_score
from trainer.training.models import ModelVersion, TrainingRun
from trainer.training.params import TrainingParams

# The strategies the simulated loop compares. Not `disagreement`: the simulation has no rollout
# or judge labels yet (issue 31, item 7), so it would be a uniform sample under another name.
# `ensemble_uncertainty` needs only the PRM, which the loop trains and passes to the selection.
STRATEGIES = tuple(name for name in strategies.STRATEGIES if name != "disagreement")


@dataclass(frozen=True)
class SimulationConfig(recipe.Common):
    """One simulated run of the loop (`manage.py simulate`, whose options are derived from it);
    the training recipe and the selection's fixed parameters are `recipe`'s."""

    noun = "simulation parameter"

    strategy: str = param(
        "convincing_wrong_answer",
        label="Strategy",
        help="Selects generations 2 on.",
        choices=STRATEGIES,
    )
    generations: int = param(6, label="Generations", low=1)
    labels_per_generation: int = param(
        500,
        label="Labels per generation",
        help="Submitted sessions per generation, quality control included.",
        low=1,
    )
    pool_size: int = param(8000, label="Pool size", help="Candidate solutions (distinct).", low=1)
    samples_per_problem: int = param(16, label="Samples per problem", low=1)
    per_problem_cap: int = recipe.selection_field("per_problem_cap")
    wrong_share: float = recipe.selection_field("wrong_share")
    quality_control: int = param(
        0,
        label="Quality-control solutions",
        help="With gold, labeled by every labeler.",
        low=0,
    )
    labelers: int = param(3, label="Labelers", low=1)
    seed: int = param(0, label="Seed", help="One draw of everything (--seeds for several).", low=0)
    warm_start: bool = like(
        TrainingParams, "warm_start", default=recipe.LOOP_TRAINING["warm_start"]
    )
    orm: bool = param(True, label="ORM baseline", help="Train and evaluate the ORM baseline.")
    orm_every_generation: bool = param(
        True,
        label="ORM every generation",
        help="Off: the ORM baseline at the final label count only.",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.quality_control * self.labelers >= self.labels_per_generation:
            raise recipe.InvalidSimulation("Quality control would use the whole first generation.")


@dataclass
class SimulationResult:
    config: dict
    pool: dict
    generations: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


Emit = Callable[[str], None]

# --- running tasks in process ----------------------------------------------------------------


@contextmanager
def in_process():
    """Celery tasks run inline (scoring after a model version is activated), errors raised;
    and no selection is chained after a retrain: the loop selects itself."""
    from celery import current_app as app
    from django.test import override_settings

    saved = (app.conf.task_always_eager, app.conf.task_eager_propagates)
    app.conf.task_always_eager = app.conf.task_eager_propagates = True
    try:
        with override_settings(SELECTION_AFTER_RETRAIN="never"):
            yield
    finally:
        app.conf.task_always_eager, app.conf.task_eager_propagates = saved


# --- one generation ---------------------------------------------------------------------------


def initial_generation(*, config: SimulationConfig, batch_size: int) -> Generation:
    """Generation 1: no model exists yet, so a seeded uniform sample of the pool, plus QC.

    The order is a seeded hash of each solution's problem and content, not of its database
    id, so every strategy compared with the same seed starts from the same first generation.
    """
    rows = unlabeled_pool().values_list("pk", "problem_id", "problem__unique_id", "content_hash")
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
    params = recipe.loop_training(config, seed=config.seed, warm_start=config.warm_start)
    run = runs.request_training_run(
        user=researcher, params=params, origin=JobOrigin.COMMAND, enqueue=False
    )
    run = runs.execute_training_run(run_id=run.pk, worker_hostname="manage.py simulate")
    if run.status != TrainingRun.Status.SUCCEEDED:
        raise SimulationRefused(f"Training run {run.pk} {run.status}: {run.error}")
    version = run.model_version
    if not version.is_active:
        # The loop always selects with the newest model, as the paper's did.
        version = model_versions.activate_model_version(model_version_id=version.pk, confirm=True)
    return version


# --- the whole run ----------------------------------------------------------------------------


def run_simulation(
    config: SimulationConfig,
    *,
    emit: Emit | None = None,
    orm_cache: dict | None = None,
    advanced: Callable[[], None] | None = None,
) -> SimulationResult:
    """Run `config.generations` generations from a fresh simulation state; see the module doc.

    `advanced` is called after each generation (a command's progress bar).

    `orm_cache` (label count -> ORM scores of the test set) lets runs with the same seed and
    test set share their ORM baselines: the ORM does not depend on the strategy.
    """
    say = emit or (lambda line: None)
    pool.check_database()
    pool.clear_simulation()
    generator = Generator(seed=config.seed)
    samples = pool.pool_samples(
        size=config.pool_size,
        samples_per_problem=config.samples_per_problem,
        seed=config.seed,
        generator=generator,
    )
    test = evaluation.TestSet.build(
        problems=config.test_problems,
        samples_per_problem=config.test_samples,
        seed=config.seed,
        generator=generator,
    )
    orm_cache = {} if orm_cache is None else orm_cache
    orm_order = list(samples)
    random.Random(f"{config.seed}:orm").shuffle(orm_order)

    imported = pool.import_pool(samples, quality_control=config.quality_control, seed=config.seed)
    say(
        f"Pool: {imported['solutions']} solutions of {imported['problems']} problems "
        f"({imported['correct_share']:.0%} correct); test set: {len(test.samples)} samples of "
        f"{config.test_problems} problems."
    )
    result = SimulationResult(config=_config_dict(config), pool=imported)
    labelers = make_labelers(count=config.labelers, noise=config.noise, seed=config.seed)
    researcher, _ = get_user_model().objects.get_or_create(username=pool.RESEARCHER)

    version: ModelVersion | None = None
    prm = None
    with in_process():
        for round_ in range(1, config.generations + 1):
            timings: dict[str, float] = {}
            started = time.monotonic()
            if version is None:
                quality_control_sessions = imported["quality_control"] * config.labelers
                generation = initial_generation(
                    config=config,
                    batch_size=config.labels_per_generation - quality_control_sessions,
                )
            else:
                generation = selection.publish_generation(
                    model_version=version,
                    params=recipe.selection(
                        strategy=config.strategy,
                        batch_size=config.labels_per_generation,
                        per_problem_cap=config.per_problem_cap,
                        wrong_share=config.wrong_share,
                        quality_control_count=imported["quality_control"],
                        seed=config.seed + round_,
                    ),
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
            prm = PRM.load(checkpoints.local_dir(version))
            step_scores, prm_scores = evaluation.score_test_set(prm, test.samples)
            scores = {"prm": prm_scores}
            if prm.settings.aggregation != "min":
                # The same steps' scores under the other common rule (the weakest step), so
                # the aggregation's effect on best-of-N is read from the same model.
                scores["prm_min"] = [solution_score(s, aggregation="min") for s in step_scores]
            if config.orm and (config.orm_every_generation or round_ == config.generations):
                if labels not in orm_cache:
                    orm = evaluation.train_orm(
                        samples=orm_order[:labels],
                        params=recipe.orm_training(config, seed=config.seed),
                    )
                    orm_cache[labels] = evaluation.orm_scores(orm, test.samples)
                scores["orm"] = orm_cache[labels]
            timings["evaluate"] = time.monotonic() - started
            row = {
                "generation": generation.number,
                "labels": labels,
                "new_labels": labeled,
                # Fewer than config.epochs: the run hit --max-minutes.
                "epochs_trained": len(version.training_run.metrics),
                **_composition(generation),
                **evaluation.step_metrics(test.samples, step_scores),
                "best_of_n": evaluation.best_of_n_curves(
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
            if advanced is not None:
                advanced()
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
    data = config.to_dict()
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
    config: SimulationConfig,
    *,
    strategies=STRATEGIES,
    emit: Emit | None = None,
    advanced: Callable[[], None] | None = None,
) -> dict[str, SimulationResult]:
    """Every strategy from the same seed (same pool, same first generation, same test set)."""
    say = emit or (lambda line: None)
    orm_cache: dict = {}
    results = {}
    for strategy in strategies:
        say(f"--- strategy {strategy} ---")
        results[strategy] = run_simulation(
            replace(config, strategy=strategy), emit=emit, orm_cache=orm_cache, advanced=advanced
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
        **mean_efficiency(results, baseline=baseline),
    }


# AUROC levels the averaged statistic reads each learning curve at.
EFFICIENCY_LEVELS = 5


def mean_efficiency(
    results: dict[str, SimulationResult],
    *,
    baseline: str = "uniform",
    levels: int = EFFICIENCY_LEVELS,
) -> dict:
    """Data efficiency that does not hang on one point of one curve.

    The labels each strategy needs to reach an AUROC level (linear between generations) are
    compared with the baseline's at `levels` levels evenly spaced from the highest
    first-generation AUROC to the lowest final one (the range every curve was measured
    over), and the ratios averaged geometrically. On straight learning curves the answer is
    their slopes' ratio at every level (tested). Empty when the curves share no range.
    """
    curves = [
        [row["step_auroc"] for row in r.generations if row["step_auroc"] is not None]
        for r in results.values()
    ]
    if baseline not in results or any(not curve for curve in curves):
        return {}
    low, high = max(curve[0] for curve in curves), min(curve[-1] for curve in curves)
    if high <= low:
        return {}
    steps = [low + (high - low) * k / (levels - 1) for k in range(levels)]
    ratios: dict[str, float | None] = {}
    for name, result in results.items():
        pairs = [
            (
                _labels_to_reach(results[baseline].generations, level),
                _labels_to_reach(result.generations, level),
            )
            for level in steps
        ]
        if any(not base or not labels for base, labels in pairs):
            ratios[name] = None
            continue
        product = math.prod(base / labels for base, labels in pairs)
        ratios[name] = round(product ** (1 / len(pairs)), 3)
    return {
        "auroc_levels": [round(level, 4) for level in steps],
        "mean_efficiency_vs_" + baseline: ratios,
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
    return finish_plot(figure, left, right, path, largest=largest)


def finish_plot(figure, left, right, path: Path, *, largest: str, note: str = "") -> Path:
    """Label, legend and save the two panels of a comparison plot (step AUROC, best-of-N)."""
    import matplotlib.pyplot as plt

    left.set(xlabel="labels used", ylabel="held-out step AUROC", title=f"PRM step AUROC{note}")
    right.set(
        xlabel="labels used",
        ylabel=f"best-of-{largest} accuracy",
        title=f"Best-of-{largest} on held-out problems{note}",
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
