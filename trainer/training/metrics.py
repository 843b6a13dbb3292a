"""Held-out metrics of a PRM: pure functions over step scores and human labels.

A step counts as ok when its label is +1, or 0 too when neutral steps count as positive (the
same rule that turns class probabilities into a step score). A predicted step is ok when its
score is at least THRESHOLD.
"""

from collections.abc import Sequence

THRESHOLD = 0.5

# Each metric as pages, logs and the API's labels name it (the key is its name in the API).
NAMES = {
    "train_loss": "Training loss",
    "eval_loss": "Held-out loss",
    "step_accuracy": "Step accuracy",
    "step_auroc": "Step AUROC",
    "first_error_f1": "First-error F1",
    "first_error_acc_erroneous": "Accuracy on erroneous items",
    "first_error_acc_correct": "Accuracy on correct items",
    "best_of_n": "Best-of-N",
}


def name_of(metric: str) -> str:
    """A metric's name as a person reads it; an unknown one with its underscores as spaces."""
    return NAMES.get(metric, metric.replace("_", " "))


def is_ok(label: int, *, neutral_as_positive: bool = True) -> bool:
    return label == 1 or (neutral_as_positive and label == 0)


def auroc(scores: Sequence[float], positives: Sequence[bool]) -> float | None:
    """Area under the ROC curve (Mann-Whitney U, ties counted half); None with one class."""
    n_pos = sum(1 for p in positives if p)
    n_neg = len(positives) - n_pos
    if n_pos == 0 or n_neg == 0:
        return None
    order = sorted(range(len(scores)), key=lambda i: scores[i])
    rank_sum = 0.0
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and scores[order[j + 1]] == scores[order[i]]:
            j += 1
        average_rank = (i + j) / 2 + 1  # ranks are 1-based; tied scores share their mean
        rank_sum += average_rank * sum(1 for k in order[i : j + 1] if positives[k])
        i = j + 1
    return (rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


def step_metrics(
    step_scores: Sequence[Sequence[float]],
    labels: Sequence[Sequence[int]],
    *,
    neutral_as_positive: bool = True,
) -> dict:
    scores = [s for row in step_scores for s in row]
    truth = [is_ok(x, neutral_as_positive=neutral_as_positive) for row in labels for x in row]
    correct = sum(1 for s, t in zip(scores, truth, strict=True) if (s >= THRESHOLD) == t)
    return {
        "step_accuracy": correct / len(scores) if scores else None,
        "step_auroc": auroc(scores, truth),
        "eval_steps": len(scores),
    }


def harmonic(a: float | None, b: float | None) -> float:
    """F1 of two accuracies, ProcessBench's way: 0 when either is 0 or missing."""
    return 2 * a * b / (a + b) if a and b else 0.0


def random_first_error(items: Sequence[tuple[int, int]]) -> tuple[float | None, float | None]:
    """The expected accuracies, on the erroneous and on the correct items, of a guess that
    says "erroneous" at the items' base rate, at a uniformly random step. `items`: (first
    error or -1, number of steps). Its F1 is the first-error F1's baseline: the F1 of always
    saying "no error" is 0 by construction and says nothing about the data."""
    erroneous = [steps for label, steps in items if label != -1]
    if not items:
        return None, None
    rate = len(erroneous) / len(items)
    bad = rate * sum(1 / max(1, n) for n in erroneous) / len(erroneous) if erroneous else None
    good = 1 - rate if len(items) > len(erroneous) else None
    return bad, good


def first_error_metrics(
    step_scores: Sequence[Sequence[float]], labels: Sequence[Sequence[int]]
) -> dict:
    """ProcessBench-style: find the first wrong step, or say there is none.

    Accuracy on erroneous solutions (the predicted first error is the labeled one), on
    correct ones (no step predicted wrong), and their harmonic mean.
    """
    hits = {True: 0, False: 0}
    totals = {True: 0, False: 0}
    firsts = [(row.index(-1) if -1 in row else -1, len(row)) for row in labels]
    for scores, row in zip(step_scores, labels, strict=True):
        truth = row.index(-1) if -1 in row else None
        predicted = next((i for i, s in enumerate(scores) if s < THRESHOLD), None)
        erroneous = truth is not None
        totals[erroneous] += 1
        hits[erroneous] += predicted == truth
    acc_erroneous = hits[True] / totals[True] if totals[True] else None
    acc_correct = hits[False] / totals[False] if totals[False] else None
    if acc_erroneous is None or acc_correct is None:
        f1 = None
    elif acc_erroneous + acc_correct == 0:
        f1 = 0.0
    else:
        f1 = 2 * acc_erroneous * acc_correct / (acc_erroneous + acc_correct)
    random_bad, random_good = random_first_error(firsts)
    return {
        "first_error_f1": f1,
        "first_error_acc_erroneous": acc_erroneous,
        "first_error_acc_correct": acc_correct,
        "first_error_f1_random": (harmonic(random_bad, random_good) if f1 is not None else None),
    }


def best_of_n_accuracy(candidates: Sequence[Sequence[tuple[float, bool]]]) -> dict:
    """Per problem, pick the highest-scored solution; how often is its final answer correct?

    `candidates` holds, per problem with at least two solutions, (solution score, is correct)
    pairs. Also reports a random pick's expected accuracy, the floor the PRM should beat.
    """
    groups = [g for g in candidates if len(g) >= 2]
    if not groups:
        return {"best_of_n": None, "best_of_n_random": None, "best_of_n_problems": 0}
    picked = [max(g, key=lambda pair: pair[0])[1] for g in groups]
    random_pick = [sum(ok for _, ok in g) / len(g) for g in groups]
    return {
        "best_of_n": sum(picked) / len(groups),
        "best_of_n_random": sum(random_pick) / len(groups),
        "best_of_n_problems": len(groups),
    }


def spread(values: Sequence[float | None]) -> dict:
    """Mean and sample standard deviation of the values that are not None (n of them).

    What every multi-seed figure reports: one seed's number is one draw, and the spread says
    how far the next seed's may land (std is 0.0 for a single value, None for none).
    """
    kept = [float(v) for v in values if v is not None]
    if not kept:
        return {"mean": None, "std": None, "n": 0}
    mean = sum(kept) / len(kept)
    var = sum((v - mean) ** 2 for v in kept) / (len(kept) - 1) if len(kept) > 1 else 0.0
    return {"mean": mean, "std": var**0.5, "n": len(kept)}
