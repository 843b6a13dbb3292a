"""Held-out evaluation of the simulation: step metrics and best-of-N against the truth.

The test set is generated, never stored: problems no labeler saw, each with many samples of
the simulated generator, whose every step rating is known. From the models' scores it gives
- step AUROC and first-error F1 of the PRM, against the exact labels (up to the first -1);
- best-of-N as PRM800K's protocol computes it (`trainer.evaluation.best_of_n`): per problem, a
random
  subset of N of its samples, pick the highest-scored one (PRM, ORM) or the most frequent
  final answer (majority voting); accuracy is the share of problems whose pick is right,
  mean and std over trials.

The outcome reward model (ORM) it compares with is the same tiny model, trained with the
PRM's recipe on final-answer correctness: each solution as one step, rated by its answer.
"""

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from trainer.evaluation import best_of_n as evaluate
from trainer.evaluation.simulation.domain import Generator, Sample, make_problems
from trainer.training import metrics as m
from trainer.training.dataset import Example
from trainer.training.ml.prm import PRM, solution_score
from trainer.training.ml.train import train_prm
from trainer.training.params import TrainingParams


@dataclass(frozen=True)
class Scored:
    """One test sample with what the verifiers think of it."""

    answer: str
    is_correct: bool
    scores: dict[str, float]  # verifier name -> solution score


def step_metrics(samples: Sequence[Sample], step_scores: Sequence[Sequence[float]]) -> dict:
    """Step AUROC, step accuracy and first-error F1 on the exact labels."""
    labels = [sample.gold_ratings for sample in samples]
    scores = [list(s[: len(gold)]) for s, gold in zip(step_scores, labels, strict=True)]
    return {**m.step_metrics(scores, labels), **m.first_error_metrics(scores, labels)}


def best_of_n_curves(
    groups: Sequence[Sequence[Scored]],
    *,
    sizes: Sequence[int],
    trials: int,
    seed: int,
    verifiers: Sequence[str],
) -> dict[str, dict[str, dict[str, float]]]:
    """{method: {N: {"mean", "std"}}} for each verifier and "majority", by
    `trainer.evaluation.best_of_n`.

    Every method sees the same random subsets (the same seed). Answers here are digits, so
    answers are compared as strings rather than through the math grader.
    """
    samples = [
        evaluate.Sample(
            problem=k,
            answer=scored.answer,
            is_correct=scored.is_correct,
            scores={f"{name}_score": value for name, value in scored.scores.items()},
        )
        for k, group in enumerate(groups)
        for scored in group
    ]
    estimates = evaluate.evaluate(
        samples=samples,
        ns=list(sizes),
        methods=[*(f"{name}_score" for name in verifiers), evaluate.MAJORITY],
        trials=trials,
        seed=seed,
        answer_key={},
    )
    result: dict[str, dict[str, dict[str, float]]] = {}
    for estimate in estimates:
        method = estimate.method.removesuffix("_score")
        result.setdefault(method, {})[str(estimate.n)] = {
            "mean": round(estimate.mean, 4),
            "std": round(estimate.std, 4),
        }
    return result


# --- the test set and the outcome reward model (ORM) baseline ----------------------------------


@dataclass
class TestSet:
    samples: list[Sample]

    @classmethod
    def build(
        cls, *, problems: int, samples_per_problem: int, seed: int, generator: Generator
    ) -> "TestSet":
        test_problems = make_problems(problems, seed=seed, namespace="test")
        return cls([s for p in test_problems for s in generator.samples(p, samples_per_problem)])

    def groups(self, scores: dict[str, list[float]]) -> list[list[Scored]]:
        by_problem: dict[str, list[Scored]] = {}
        for i, sample in enumerate(self.samples):
            by_problem.setdefault(sample.problem.key, []).append(
                Scored(
                    answer=sample.final_answer,
                    is_correct=sample.is_correct,
                    scores={name: values[i] for name, values in scores.items()},
                )
            )
        return list(by_problem.values())


def score_test_set(prm: PRM, samples: list[Sample]) -> tuple[list[list[float]], list[float]]:
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


def train_orm(*, samples: list[Sample], params: TrainingParams) -> PRM:
    """The ORM baseline on these samples, with the PRM's training recipe; returns it loaded."""
    ids: dict[str, int] = {}
    examples = [orm_example(s, ids.setdefault(s.problem.key, len(ids))) for s in samples]
    with tempfile.TemporaryDirectory(prefix="simulate-orm-") as tmp:
        out = Path(tmp) / "orm"
        train_prm(train=examples, eval=[], params=params, base_model=None, out_dir=out)
        return PRM.load(out)


def orm_scores(orm: PRM, samples: list[Sample]) -> list[float]:
    step_scores = orm.score(
        problems=[s.problem.text for s in samples],
        steps=[["\n\n".join(s.texts)] for s in samples],
        batch_size=64,
    )
    return [scores[0] for scores in step_scores]
