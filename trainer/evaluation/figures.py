"""The figures of a model version on an evaluation set, each beside its trivial baselines and
with a bootstrap interval: pure functions over items and step scores.

- First-error prediction (ProcessBench's): the first step scored below a FIXED threshold
  (THRESHOLD, 0.5, as ProcessBench's own evaluation code) is the predicted first error. The
  threshold is never tuned. Accuracy on the erroneous items, on the correct items, and F1.
  Baselines on the same items: "no error" (predict -1 everywhere), "random" (say "erroneous"
  at the set's base rate, at a uniformly random step: the expected accuracies) and
  "first step" (predict step 0 everywhere).
- Step AUROC: the steps up to and including the first error, the first error negative and
  the steps before it positive (a correct item's steps all positive). Baselines: "random"
  (0.5) and "first step" (earlier steps scored higher: the score is minus the position).
- Best-of-N, where problems have several solutions: the solution with the highest lowest
  step score is picked; correct when it has no error. Baselines: "random" (a random pick's
  expected accuracy) and "first solution".

Intervals: percentile bootstrap (RESAMPLES resamples of the items, or of the problems for
best-of-N, with a fixed SEED), 2.5th to 97.5th percentile.
"""

import random
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from trainer.training import metrics

# ProcessBench's protocol, as its released evaluation code runs a PRM: a step is wrong when the
# PRM says so (the argmax of its classes: a score below one half); nothing is tuned. One rule
# for the evaluation sets, the `processbench` command and the held-out slice (docs/evaluation.md).
THRESHOLD = metrics.THRESHOLD
THRESHOLD_RULE = "0.5, ProcessBench's rule: a step scored below one half is wrong; never tuned"
RESAMPLES = 1000
SEED = 0
LEVEL = 0.95

# Which baselines a figure must beat (promotion refuses a version at or below any of them).
METRICS = (
    "first_error_f1",
    "first_error_acc_erroneous",
    "first_error_acc_correct",
    "step_auroc",
    "best_of_n",
)


@dataclass(frozen=True)
class EvalItem:
    problem: str  # best-of-N groups the items by problem
    steps: list[str]
    label: int  # the first wrong step, or -1
    correct: bool | None = None  # the final answer's grade, when known (else: label == -1)

    @property
    def ok(self) -> bool:
        return self.label == -1 if self.correct is None else self.correct


def _first_error(scores: Sequence[float], threshold: float) -> int:
    return next((i for i, score in enumerate(scores) if score < threshold), -1)


def _first_error_counts(hits: list[tuple[bool, bool]], weights: Sequence[int]) -> dict:
    """`hits` per item: (is erroneous, prediction right); accuracies and F1 under weights."""
    bad = good = hit_bad = hit_good = 0
    for (erroneous, right), w in zip(hits, weights, strict=True):
        if erroneous:
            bad += w
            hit_bad += w * right
        else:
            good += w
            hit_good += w * right
    acc_bad = hit_bad / bad if bad else None
    acc_good = hit_good / good if good else None
    return {
        "first_error_f1": metrics.harmonic(acc_bad, acc_good),
        "first_error_acc_erroneous": acc_bad,
        "first_error_acc_correct": acc_good,
    }


class _WeightedAuroc:
    """Step AUROC with a weight per item, the steps sorted once (a resample only reweights)."""

    def __init__(self, steps: list[tuple[float, bool, int]]) -> None:
        # (score, positive, item index), grouped by equal scores: ties count half.
        self.groups: list[list[tuple[bool, int]]] = []
        last = None
        for score, positive, item in sorted(steps):
            if score != last:
                self.groups.append([])
                last = score
            self.groups[-1].append((positive, item))

    def __call__(self, weights: Sequence[int]) -> float | None:
        below = total_pos = total_neg = 0.0
        area = 0.0
        for group in self.groups:
            pos = sum(weights[i] for p, i in group if p)
            neg = sum(weights[i] for p, i in group if not p)
            area += pos * (below + 0.5 * neg)
            below += neg
            total_pos += pos
            total_neg += neg
        return area / (total_pos * total_neg) if total_pos and total_neg else None


def _labeled_steps(items: Sequence[EvalItem], step_scores: Sequence[Sequence[float]], key):
    out = []
    for index, (item, scores) in enumerate(zip(items, step_scores, strict=True)):
        last = len(scores) - 1 if item.label == -1 else min(item.label, len(scores) - 1)
        for position in range(last + 1):
            out.append((key(scores, position), position != item.label, index))
    return out


def _interval(values: list[float]) -> tuple[float | None, float | None]:
    values = sorted(v for v in values if v is not None)
    if not values:
        return None, None
    tail = (1 - LEVEL) / 2
    low = values[min(len(values) - 1, int(tail * len(values)))]
    high = values[min(len(values) - 1, int((1 - tail) * len(values)))]
    return low, high


def _resample_weights(n: int, rng: random.Random) -> list[int]:
    counts = Counter(rng.randrange(n) for _ in range(n))
    return [counts.get(i, 0) for i in range(n)]


def _figure(value, low, high, baselines: dict) -> dict:
    return {"value": value, "low": low, "high": high, "baselines": baselines}


def evaluate(
    items: Sequence[EvalItem],
    step_scores: Sequence[Sequence[float]],
    *,
    threshold: float = THRESHOLD,
    threshold_rule: str = THRESHOLD_RULE,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> dict:
    """Every figure of these scores on these items, with baselines and intervals. A threshold
    other than 0.5 must come from other items (`threshold_rule` says which)."""
    n = len(items)
    rng = random.Random(seed)
    ones = [1] * n
    hits = [
        (item.label != -1, _first_error(scores, threshold) == item.label)
        for item, scores in zip(items, step_scores, strict=True)
    ]
    point_fe = _first_error_counts(hits, ones)
    auroc = _WeightedAuroc(_labeled_steps(items, step_scores, lambda s, i: s[i]))
    by_position = _WeightedAuroc(_labeled_steps(items, step_scores, lambda s, i: -i))

    boot_fe: dict[str, list] = defaultdict(list)
    boot_auroc = []
    for _ in range(resamples if n else 0):
        weights = _resample_weights(n, rng)
        for name, value in _first_error_counts(hits, weights).items():
            boot_fe[name].append(value)
        boot_auroc.append(auroc(weights))

    erroneous = [item for item in items if item.label != -1]
    random_bad, random_good = metrics.random_first_error([(i.label, len(i.steps)) for i in items])
    first_bad = sum(i.label == 0 for i in erroneous) / len(erroneous) if erroneous else None
    baselines = {
        "first_error_f1": {
            "no_error": 0.0,
            "random": metrics.harmonic(random_bad, random_good),
            "first_step": 0.0,
        },
        "first_error_acc_erroneous": {
            "no_error": 0.0,
            "random": random_bad,
            "first_step": first_bad,
        },
        "first_error_acc_correct": {"no_error": 1.0, "random": random_good, "first_step": 0.0},
    }
    figures = {
        name: _figure(point_fe[name], *_interval(boot_fe[name]), baselines[name])
        for name in baselines
    }
    figures["step_auroc"] = _figure(
        auroc(ones), *_interval(boot_auroc), {"random": 0.5, "first_step": by_position(ones)}
    )
    best = _best_of_n(items, step_scores, resamples=resamples, rng=rng)
    if best is not None:
        figures["best_of_n"] = best
    return {
        "items": n,
        "erroneous": len(erroneous),
        "threshold": threshold,
        "threshold_rule": threshold_rule,
        "resamples": resamples,
        "seed": seed,
        "level": LEVEL,
        "figures": figures,
    }


def _best_of_n(items, step_scores, *, resamples: int, rng: random.Random) -> dict | None:
    groups: dict[str, list[tuple[float, bool]]] = defaultdict(list)
    for item, scores in zip(items, step_scores, strict=True):
        groups[item.problem].append((min(scores) if scores else 0.0, item.ok))
    several = [g for g in groups.values() if len(g) >= 2]
    if not several:
        return None
    picked = [max(g, key=lambda pair: pair[0])[1] for g in several]
    n = len(several)

    def share(weights: Sequence[int]) -> float:
        return sum(w * p for w, p in zip(weights, picked, strict=True)) / sum(weights)

    boot = [share(_resample_weights(n, rng)) for _ in range(resamples)]
    return _figure(
        share([1] * n),
        *_interval(boot),
        {
            "random": sum(sum(ok for _, ok in g) / len(g) for g in several) / n,
            "first_solution": sum(g[0][1] for g in several) / n,
        },
    ) | {"problems": n}


def best_baseline(figure: dict) -> float | None:
    """The highest of a figure's baselines: what a version must beat."""
    values = [v for v in figure.get("baselines", {}).values() if v is not None]
    return max(values) if values else None


LABELS = metrics.NAMES


def _shown(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def lines(results: dict) -> list[str]:
    """The figures as text: value, interval, baselines (the commands print these)."""
    if not results.get("figures"):
        return []
    out = [
        f"{results['items']} items ({results['erroneous']} erroneous); threshold "
        f"{results['threshold']:.2f} ({results['threshold_rule']}); "
        f"{round(100 * results['level'])}% bootstrap interval, {results['resamples']} "
        f"resamples, seed {results['seed']}"
    ]
    for name, figure in results["figures"].items():
        baselines = ", ".join(
            f"{b.replace('_', ' ')} {_shown(v)}" for b, v in figure["baselines"].items()
        )
        out.append(
            f"{LABELS.get(name, name)}: {_shown(figure['value'])} "
            f"[{_shown(figure['low'])}, {_shown(figure['high'])}]  baselines: {baselines}"
        )
    return out
