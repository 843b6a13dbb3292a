"""Held-out evaluation of the simulation: step metrics and best-of-N against the truth.

The test set is generated, never stored: problems no labeler saw, each with many samples of
the simulated generator, whose every step rating is known. From the models' scores it gives
- step AUROC and first-error F1 of the PRM, against the exact labels (up to the first -1);
- best-of-N as PRM800K's protocol computes it (`trainer.evaluate`): per problem, a random
  subset of N of its samples, pick the highest-scored one (PRM, ORM) or the most frequent
  final answer (majority voting); accuracy is the share of problems whose pick is right,
  mean and std over trials.
"""

from collections.abc import Sequence
from dataclasses import dataclass

from trainer import metrics as m
from trainer.simulation.domain import Sample


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


def best_of_n(
    groups: Sequence[Sequence[Scored]],
    *,
    sizes: Sequence[int],
    trials: int,
    seed: int,
    verifiers: Sequence[str],
) -> dict[str, dict[str, dict[str, float]]]:
    """{method: {N: {"mean", "std"}}} for each verifier and "majority", by `trainer.evaluate`.

    Every method sees the same random subsets (the same seed). Answers here are digits, so
    answers are compared as strings rather than through the math grader.
    """
    from trainer import evaluate

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
