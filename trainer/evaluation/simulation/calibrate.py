"""Calibration: can the tiny built-in PRM learn the synthetic domain, and how fast?

Trains the project's own loop (`trainer.training.ml.train.train_prm`) on N perfectly labeled
synthetic solutions (labels up to and including the first -1, as a careful labeler gives them) and
reports held-out step AUROC after every epoch against training time, optimizer steps and tokens
seen. Wall-clock seconds depend on the machine and on what else runs on it; steps and tokens do
not, so both are reported.
"""

import math
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from trainer.evaluation.simulation import recipe
from trainer.evaluation.simulation.domain import (
    Generator,
    GeneratorConfig,
    Problem,
    Sample,
    make_problems,
)
from trainer.training import metrics as m
from trainer.training.dataset import Example
from trainer.training.ml.train import train_prm
from trainer.training.params import TrainingParams

# The data's defaults; the training recipe's are `recipe`'s (offline).
SAMPLES_PER_PROBLEM = 4
HELD_OUT_PROBLEMS = 200


@dataclass
class CalibrationPoint:
    labels: int  # labeled training solutions
    train_seed: int  # the training run's seed (initial weights, batch order); the data's is apart
    epoch: int
    seconds: float  # wall clock since training started, evaluation time excluded
    optimizer_steps: int
    tokens: int  # training tokens processed so far
    step_auroc: float | None
    first_error_f1: float | None
    eval_loss: float | None

    def to_dict(self) -> dict:
        return asdict(self)


def example(sample: Sample, problem_id: int) -> Example:
    """The training example a careful labeler's session gives for this sample."""
    ratings = sample.gold_ratings
    return Example(
        problem_id=problem_id,
        solution_id=None,
        problem=sample.problem.text,
        steps=sample.texts[: len(ratings)],
        labels=ratings,
    )


def labeled_examples(
    problems: list[Problem], generator: Generator, *, per_problem: int, offset: int = 0
) -> list[Example]:
    return [
        example(sample, offset + i)
        for i, problem in enumerate(problems)
        for sample in generator.samples(problem, per_problem)
    ]


def calibrate(
    *,
    label_counts: list[int],
    seed: int = 0,
    held_out_problems: int = HELD_OUT_PROBLEMS,
    config: GeneratorConfig | None = None,
    on_point: Callable[[CalibrationPoint], None] | None = None,
    train_seeds: Sequence[int] = (),
    **training: Any,
) -> list[CalibrationPoint]:
    """One training run per label count and training seed; a point per epoch. Needs Django.

    `seed` draws the problems, the samples and the held-out set; `train_seeds` (default: just
    `seed`) the training runs' initial weights and batch order on those same data, so their
    spread is the run-to-run spread of one training configuration. `training` changes the
    recipe's knobs (`recipe.Retraining`: epochs, learning_rate, batch_size, max_minutes).
    """
    knobs = recipe.Retraining(**training)
    generator = Generator(seed=seed, config=config or GeneratorConfig())
    held_out = labeled_examples(
        make_problems(held_out_problems, seed=seed, namespace="calibration-eval"),
        generator,
        per_problem=SAMPLES_PER_PROBLEM,
        offset=10**9,
    )
    points: list[CalibrationPoint] = []
    for labels in label_counts:
        problems = make_problems(
            math.ceil(labels / SAMPLES_PER_PROBLEM), seed=seed, namespace="calibration"
        )
        train = labeled_examples(problems, generator, per_problem=SAMPLES_PER_PROBLEM)[:labels]
        for train_seed in train_seeds or (seed,):
            train_params = recipe.offline_training(knobs, seed=train_seed)
            for point in _run(train, held_out, train_params):
                points.append(point)
                if on_point:
                    on_point(point)
    return points


def run_to_run_spread(points: Sequence[CalibrationPoint]) -> dict[int, dict]:
    """Per label count: the final epoch's held-out step AUROC over training seeds (mean, sample
    sd, n, and each seed's value)."""
    final: dict[int, dict[int, CalibrationPoint]] = {}
    for point in points:
        last = final.setdefault(point.labels, {}).get(point.train_seed)
        if last is None or point.epoch > last.epoch:
            final[point.labels][point.train_seed] = point
    return {
        labels: {
            **m.spread([p.step_auroc for p in by_seed.values()]),
            "per_seed": {seed: p.step_auroc for seed, p in by_seed.items()},
        }
        for labels, by_seed in final.items()
    }


def _run(train: list[Example], held_out: list[Example], params: TrainingParams):
    clock = {"start": time.monotonic(), "eval": 0.0, "last_step": None, "step": 0}
    per_epoch: list[tuple[int, float, int, dict]] = []

    def on_progress(event: dict) -> None:
        now = time.monotonic()
        if "step" in event:
            clock["last_step"], clock["step"] = now, event["step"]
        if "metrics" in event:
            trained = (clock["last_step"] or now) - clock["start"] - clock["eval"]
            clock["eval"] += now - (clock["last_step"] or now)
            per_epoch.append((event["epoch"], trained, clock["step"], event["metrics"]))

    with tempfile.TemporaryDirectory(prefix="calibrate-") as tmp:
        out = Path(tmp) / "model"
        train_prm(
            train=train,
            eval=held_out,
            params=params,
            base_model=None,
            out_dir=out,
            on_progress=on_progress,
        )
        tokens_per_example = _mean_tokens(out, train)
    for epoch, seconds, steps, metrics in per_epoch:
        seen = min(steps * params.batch_size, epoch * len(train))
        yield CalibrationPoint(
            labels=len(train),
            train_seed=params.seed,
            epoch=epoch,
            seconds=round(seconds, 1),
            optimizer_steps=steps,
            tokens=round(seen * tokens_per_example),
            step_auroc=metrics.get("step_auroc"),
            first_error_f1=metrics.get("first_error_f1"),
            eval_loss=metrics.get("eval_loss"),
        )


def _mean_tokens(checkpoint: Path, examples: list[Example]) -> float:
    from trainer.training.ml.prm import PRM

    prm = PRM.load(checkpoint, device="cpu")
    sample = examples[:: max(1, len(examples) // 500)]
    return sum(len(prm.encode(e.problem, e.steps).input_ids) for e in sample) / len(sample)


def held_out_metrics(step_scores: list[list[float]], labels: list[list[int]]) -> dict:
    """Step AUROC and first-error F1, as the training loop reports them."""
    return {**m.step_metrics(step_scores, labels), **m.first_error_metrics(step_scores, labels)}
