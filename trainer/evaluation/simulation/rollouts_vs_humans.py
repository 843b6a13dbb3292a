"""Rollout labels against human labels, at equal cost (`manage.py simulate --label-sources`).

The domain's generator is exact, so it can do what Math-Shepherd does with a real model: from
the prefix ending at each step it finishes the solution k times (`Generator.finish`), and the
step's label is hard (+1 when some rollout reaches the right answer, else -1) or soft (the
share that does). Simulated labelers give the other kind of label: each step's own rating,
with their noise (`labelers.session_ratings`, the same rule as the workbench labelers).

The cost model, in one unit, a generator completion (one rollout from some step to the end,
whatever its length):
- a human label of a solution (one labeling session) costs `human_cost` completions;
- rolling out a solution costs k completions for every step rolled out from. Steps are
  rolled out in order and labeling stops at the first step no rollout rescues (the labels
  end at the first -1, as the product's training examples do; OmegaPRM's binary search
  saves the same way). The answer step needs no rollout: its prefix is the whole solution,
  and the pre-answer prefix already told whether it is right.
A budget B buys floor(B / human_cost) human-labeled solutions, or rollout-labeled solutions
from the same stream until the next one does not fit; "mixed" spends `mixed_share` of B on
human labels and the rest on rollouts of the following solutions.

Each source trains the tiny PRM with the same recipe (calibration's) and is evaluated on the
same held-out test set: step AUROC against the exact step ratings, first-error F1, and
best-of-N, over several seeds. Nothing touches the database.

Soft labels are computed (`RolloutLabels.soft`) but not trained on: the trainer's loss takes
one class per step (`trainer.training.ml.prm`), so the PRM learns from hard labels only.
"""

import math
import random
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from core.params import like, param
from trainer.evaluation.simulation import evaluation, recipe
from trainer.evaluation.simulation.domain import Generator, Sample, make_problems
from trainer.evaluation.simulation.labelers import session_ratings
from trainer.evaluation.simulation.pool import SimulationRefused
from trainer.sampling.rollouts import bisect_first_bad
from trainer.training.dataset import Example
from trainer.training.metrics import spread
from trainer.training.ml.prm import PRM
from trainer.training.ml.train import train_prm

SOURCES = ("human", "rollout", "mixed")
NAMESPACE = "label-sources"  # the training problems; the test set's are disjoint ("test")

Emit = Callable[[str], None]


@dataclass(frozen=True)
class CostModel:
    human_cost: float = 64.0  # completions one human-labeled solution costs
    rollouts: int = 8  # k: completions from each step's prefix

    def human_solutions(self, budget: float) -> int:
        return math.floor(budget / self.human_cost)


@dataclass(frozen=True)
class RolloutLabels:
    """A solution's rollout labels: for each labeled step, how many of the k rollouts from
    its prefix reached the right answer."""

    reached: tuple[int, ...]
    rollouts: int
    completions: int  # what it cost

    @property
    def hard(self) -> list[int]:
        return [1 if r > 0 else -1 for r in self.reached]

    @property
    def soft(self) -> list[float]:
        return [r / self.rollouts for r in self.reached]


def rollout_labels(generator: Generator, sample: Sample, *, rollouts: int) -> RolloutLabels:
    """Math-Shepherd's estimates for `sample`'s steps, up to the first step no rollout rescues.

    Rollouts are seeded by the solution's text and the step, so the same solution gets the same
    labels whichever source or budget asked for them.
    """
    if not sample.states:
        raise ValueError("The sample has no states to roll out from.")
    reached: list[int] = []
    completions = 0
    salt = "\x1e".join(sample.texts)
    last = len(sample.steps) - 1
    for index, state in enumerate(sample.states):
        if index == last:
            # The prefix is the whole solution: it reached the right answer or it did not.
            reached.append(rollouts if sample.is_correct else 0)
            break
        answers = [
            generator.finish(sample.problem, state, salt=f"{salt}\x1f{index}\x1f{r}")
            for r in range(rollouts)
        ]
        completions += rollouts
        reached.append(sum(1 for a in answers if a == sample.problem.answer))
        if reached[-1] == 0:
            break
    return RolloutLabels(reached=tuple(reached), rollouts=rollouts, completions=completions)


@dataclass(frozen=True)
class SearchCost:
    every_step: int  # completions of the product's every-step run (every step but the answer)
    every_step_stopping: int  # ... stopping at the first step no rollout reaches from
    search: int  # completions of the first-error search
    same_first_error: bool


def search_cost(generator: Generator, sample: Sample, *, rollouts: int) -> SearchCost:
    """What the first-error search spends on `sample` against every-step rollouts, with the
    same seeded rollouts (`rollout_labels`' salts), so a probe of a step gives
    what every-step rolling out of that step gives."""
    salt = "\x1e".join(sample.texts)
    last = len(sample.steps) - 1
    calls = 0

    def reaches(index: int) -> bool:
        nonlocal calls
        calls += rollouts
        answers = (
            generator.finish(sample.problem, sample.states[index], salt=f"{salt}\x1f{index}\x1f{r}")
            for r in range(rollouts)
        )
        return any(answer == sample.problem.answer for answer in answers)

    every = rollout_labels(generator, sample, rollouts=rollouts)
    every_first_bad = next((i for i, r in enumerate(every.reached) if r == 0), None)
    # A correct solution's answer step reaches: every step is good, nothing rolled out.
    found = None if sample.is_correct else bisect_first_bad(end=last, reaches=reaches)
    return SearchCost(
        every_step=rollouts * last,
        every_step_stopping=every.completions,
        search=calls,
        same_first_error=found == every_first_bad,
    )


def training_stream(generator: Generator, *, seed: int, per_problem: int) -> Iterator[Sample]:
    """The solutions every source labels from, in one fixed order: `per_problem` samples of
    each training problem."""
    made = 0
    wanted = 64
    while True:
        # make_problems(n) is a prefix of make_problems(m) for m > n: extend it lazily.
        problems = make_problems(wanted, seed=seed, namespace=NAMESPACE)
        for problem in problems[made:]:
            yield from generator.samples(problem, per_problem)
        made, wanted = wanted, wanted * 2


@dataclass
class LabeledSet:
    """What one source bought with its budget."""

    source: str
    examples: list[Example] = field(default_factory=list)
    human_solutions: int = 0
    rollout_solutions: int = 0
    completions: float = 0.0  # spent, in completions
    agreeing_steps: int = 0  # labeled steps whose label says what the exact rating says

    @property
    def step_labels(self) -> int:
        return sum(len(e.labels) for e in self.examples)

    @property
    def label_accuracy(self) -> float | None:
        return self.agreeing_steps / self.step_labels if self.step_labels else None


def buy_labels(
    *,
    source: str,
    budget: float,
    cost: CostModel,
    generator: Generator,
    seed: int,
    noise: float,
    per_problem: int = 4,
    mixed_share: float = 0.5,
) -> LabeledSet:
    """The labeled solutions `source` gets for `budget` completions (see the module doc)."""
    if source not in SOURCES:
        raise SimulationRefused(f"source must be one of {', '.join(SOURCES)}.")
    human_budget = {"human": budget, "rollout": 0.0, "mixed": budget * mixed_share}[source]
    humans = cost.human_solutions(human_budget)
    left = budget - humans * cost.human_cost
    bought = LabeledSet(source=source, completions=humans * cost.human_cost)
    problem_ids: dict[str, int] = {}
    stream = training_stream(generator, seed=seed, per_problem=per_problem)
    for index, sample in enumerate(stream):
        truth = [step.rating for step in sample.steps]
        if index < humans:
            rng = random.Random(f"{seed}:{NAMESPACE}:human:{index}")
            labels = session_ratings(truth, noise=noise, rng=rng)
            bought.human_solutions += 1
        elif source == "human":
            break
        else:
            rolled = rollout_labels(generator, sample, rollouts=cost.rollouts)
            if rolled.completions > left:
                break
            left -= rolled.completions
            bought.completions += rolled.completions
            bought.rollout_solutions += 1
            labels = rolled.hard
        bought.agreeing_steps += sum(
            1 for given, true in zip(labels, truth, strict=False) if (given == -1) == (true == -1)
        )
        problem_id = problem_ids.setdefault(sample.problem.key, len(problem_ids))
        bought.examples.append(
            Example(
                problem_id=problem_id,
                solution_id=None,
                problem=sample.problem.text,
                steps=sample.texts[: len(labels)],
                labels=labels,
            )
        )
    return bought


# --- the comparison -----------------------------------------------------------------------------


@dataclass(frozen=True)
class LabelSourcesConfig(recipe.Common):
    """One comparison of label sources (`manage.py simulate --label-sources`, whose options are
    derived from it); the training recipe is `recipe`'s (offline)."""

    noun = "label-sources parameter"

    budget: float = param(
        40_000.0,
        label="Budget",
        help="Generator completions each source may spend.",
        low=0,
        low_open=True,
    )
    human_cost: float = param(
        64.0,
        label="Human cost",
        help="Completions one human-labeled solution costs.",
        low=0,
        low_open=True,
    )
    rollouts: int = param(8, label="Rollouts", help="k, rollouts from each step's prefix.", low=1)
    mixed_share: float = param(
        0.5,
        label="Mixed share",
        help="Share of the budget 'mixed' spends on human labels.",
        low=0,
        high=1,
    )
    sources: tuple[str, ...] = param(SOURCES, label="Sources", choices=SOURCES)
    seeds: tuple[int, ...] = param(
        recipe.SEEDS, label="Seeds", help="One comparison per seed.", low=0, high=2**31 - 1
    )
    per_problem: int = param(
        4, label="Solutions per problem", help="Of the training stream.", low=1
    )
    test_problems: int = like(recipe.Common, "test_problems", default=60)
    test_samples: int = like(recipe.Common, "test_samples", default=64)

    @property
    def cost(self) -> CostModel:
        return CostModel(human_cost=self.human_cost, rollouts=self.rollouts)

    def __post_init__(self) -> None:
        super().__post_init__()
        if max(self.best_of) > self.test_samples:
            raise recipe.InvalidSimulation("best_of cannot exceed the test samples per problem.")


def compare_label_sources(config: LabelSourcesConfig, *, emit: Emit | None = None) -> dict:
    """{"config", "runs": [one row per seed and source]}: every source, every seed, the same
    test set per seed."""
    say = emit or (lambda line: None)
    rows: list[dict] = []
    for seed in config.seeds:
        generator = Generator(seed=seed)
        test = evaluation.TestSet.build(
            problems=config.test_problems,
            samples_per_problem=config.test_samples,
            seed=seed,
            generator=generator,
        )
        for source in config.sources:
            started = time.monotonic()
            bought = buy_labels(
                source=source,
                budget=config.budget,
                cost=config.cost,
                generator=generator,
                seed=seed,
                noise=config.noise,
                per_problem=config.per_problem,
                mixed_share=config.mixed_share,
            )
            if not bought.examples:
                raise SimulationRefused(f"A budget of {config.budget:g} buys {source} nothing.")
            prm = train(bought.examples, config=config, seed=seed)
            step_scores, prm_scores = evaluation.score_test_set(prm, test.samples)
            row = {
                "seed": seed,
                "source": source,
                "human_solutions": bought.human_solutions,
                "rollout_solutions": bought.rollout_solutions,
                "step_labels": bought.step_labels,
                "completions": bought.completions,
                "label_accuracy": bought.label_accuracy,
                **evaluation.step_metrics(test.samples, step_scores),
                "best_of_n": evaluation.best_of_n_curves(
                    test.groups({"prm": prm_scores}),
                    sizes=config.best_of,
                    trials=config.trials,
                    seed=seed,
                    verifiers=["prm"],
                ),
                "seconds": round(time.monotonic() - started, 1),
            }
            rows.append(row)
            say(
                f"seed {seed} {source}: {row['human_solutions']} human + "
                f"{row['rollout_solutions']} rollout-labeled solutions, AUROC "
                f"{_fmt(row['step_auroc'])} ({row['seconds']:.0f} s)"
            )
    data = config.to_dict()
    data.update(sources=list(config.sources), seeds=list(config.seeds))
    data["best_of"] = list(config.best_of)
    return {"config": data, "runs": rows}


def train(examples: list[Example], *, config: recipe.Retraining, seed: int) -> PRM:
    """The tiny PRM trained on `examples` with the offline recipe and `config`'s knobs
    (learning rate, batch size, epochs, time limit)."""
    params = recipe.offline_training(config, seed=seed)
    with tempfile.TemporaryDirectory(prefix="label-sources-") as tmp:
        out = Path(tmp) / "prm"
        train_prm(train=examples, eval=[], params=params, base_model=None, out_dir=out)
        return PRM.load(out)


def summarize(result: dict) -> list[dict]:
    """One row per source: means and standard deviations over the seeds."""
    sizes = [str(n) for n in result["config"]["best_of"]]
    summary = []
    for source in result["config"]["sources"]:
        runs = [r for r in result["runs"] if r["source"] == source]
        row = {"source": source, "seeds": len(runs)}
        for key in ("human_solutions", "rollout_solutions", "step_labels", "label_accuracy"):
            row[key] = spread([r[key] for r in runs])
        row["step_auroc"] = spread([r["step_auroc"] for r in runs])
        row["first_error_f1"] = spread([r["first_error_f1"] for r in runs])
        for method in ("prm", "majority"):
            for n in sizes:
                row[f"{method}@{n}"] = spread([r["best_of_n"][method][n]["mean"] for r in runs])
        summary.append(row)
    return summary


def table(result: dict) -> str:
    """A plain-text table, one line per source: mean ± std over the seeds."""
    sizes = [str(n) for n in result["config"]["best_of"]]
    largest = sizes[-1]
    header = ["source", "human sol.", "rollout sol.", "step labels", "label acc", "AUROC", "FE-F1"]
    header += [f"PRM@{n}" for n in sizes] + [f"majority@{largest}"]
    lines = [header]
    for row in summarize(result):
        line = [
            row["source"],
            _fmt(row["human_solutions"]["mean"], digits=0),
            _fmt(row["rollout_solutions"]["mean"], digits=0),
            _fmt(row["step_labels"]["mean"], digits=0),
            _pm(row["label_accuracy"]),
            _pm(row["step_auroc"]),
            _pm(row["first_error_f1"]),
        ]
        line += [_pm(row[f"prm@{n}"]) for n in sizes] + [_pm(row[f"majority@{largest}"])]
        lines.append(line)
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.rjust(width) for cell, width in zip(line, widths, strict=True))
        for line in lines
    )


def _pm(spread: dict) -> str:
    if spread["mean"] is None:
        return "-"
    return f"{spread['mean']:.3f}±{spread['std']:.3f}"


def _fmt(value, *, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"
