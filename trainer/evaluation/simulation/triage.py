"""Human time where machines disagree, measured (`manage.py simulate --triage`).

The synthetic domain knows every step's own rating, so it can answer what the product can
only estimate: which way of spending the same human labels buys the better PRM, and what the
machine label sources are worth beside them. One seed is one pool of solutions to label
(`pool_problems` x `per_problem`, problems disjoint from the test set's), one test set and
one set of machine labels of the whole pool:

- **rollout labels**: Math-Shepherd's hard estimate from every step's prefix (k rollouts,
  `rollouts_vs_humans.rollout_labels`), and what OmegaPRM's first-error search
  (`trainer.sampling.rollouts.bisect_first_bad`, the product's own search) spends for the same
  first error;
- **judge labels**: a simulated judge (`judge.SimulatedJudge`) that misses wrong steps and
  flags right ones at set rates (`judge_error`, `judge_bias`);
- **the PRM**: the tiny model trained on the human labels so far.

Human labels are the simulated labelers' (`labelers.session_ratings`: each step's own rating,
replaced by another with probability `noise`, stopping at the first -1); the same solution
gets the same human label whichever strategy bought it.

What is compared, at equal human budget (`first + rounds * batch` labeled solutions):
1. **strategies**: a first generation chosen uniformly, shared, then `rounds` generations of
   `batch` chosen by each strategy of `trainer.selection.strategies` from the rest of the
   pool with the PRM of the labels so far, retrained after each; the last PRM is evaluated;
2. **label sources** on the pool: the human labels of the uniform strategy alone; rollout
   labels of the whole pool alone; judge labels alone; human labels plus rollout labels of the
   rest ("human+rollout"); human labels plus consensus labels of the rest ("consensus":
   `trainer.training.consensus`, the product's rule: steps where rollout and judge agree,
   every human label winning);
3. **suggestions**: the same human labels bought by labelers shown the judge's rating first
   (the workbench's `confirm` display), each following it with probability `follow` instead
   of their own judgement (`labelers.suggested_ratings`); their label accuracy and agreement
   with the judge against labelers who saw nothing (`hidden`);
4. **search cost** (`rollouts_vs_humans.search_cost`): completions per pool solution of every-step
   rollouts (the product's: every step but the answer step), of every-step rollouts stopping
   at the first bad step, and of the first-error search, and how often the search finds the
   every-step first error.

Every PRM is trained with the calibration recipe (`rollouts_vs_humans.train`) and evaluated on
the same held-out test set: step AUROC against the exact ratings and best-of-N. Nothing
touches the database.
"""

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from core.params import like, param
from labeling.first_error import position
from trainer.evaluation.simulation import evaluation, recipe
from trainer.evaluation.simulation.domain import Generator, Sample
from trainer.evaluation.simulation.judge import SimulatedJudge
from trainer.evaluation.simulation.labelers import session_ratings, suggested_ratings
from trainer.evaluation.simulation.rollouts_vs_humans import (
    SearchCost,
    rollout_labels,
    search_cost,
    train,
    training_stream,
)
from trainer.selection import ensemble, strategies
from trainer.selection.services import SelectionParams
from trainer.training import consensus
from trainer.training.dataset import Example
from trainer.training.ml.prm import PRM, solution_score

Emit = Callable[[str], None]

STRATEGIES = tuple(strategies.STRATEGIES)
ENSEMBLE = "ensemble_uncertainty"
SOURCES = ("human", "rollout", "judge", "human+rollout", "consensus")
DISPLAYS = ("hidden", "confirm")


# --- one seed's pool and its machine labels -----------------------------------------------------


@dataclass
class Pool:
    samples: list[Sample]
    problem_ids: list[int]
    human: list[list[int]]  # the labeler who saw nothing, per solution
    suggested: list[list[int]]  # the labeler shown the judge's rating first
    rollout: list[list[int]]  # hard rollout labels up to the first -1
    judge: list[list[int]]
    rollout_completions: int
    search: list[SearchCost]

    def example(self, index: int, labels: Sequence[int]) -> Example:
        sample = self.samples[index]
        return Example(
            problem_id=self.problem_ids[index],
            solution_id=index,
            problem=sample.problem.text,
            steps=sample.texts[: len(labels)],
            labels=list(labels),
        )


def build_pool(config: "TriageConfig", *, seed: int, generator: Generator) -> Pool:
    stream = training_stream(generator, seed=seed, per_problem=config.per_problem)
    samples = [next(stream) for _ in range(config.pool_problems * config.per_problem)]
    keys: dict[str, int] = {}
    problem_ids = [keys.setdefault(s.problem.key, len(keys)) for s in samples]
    judge = SimulatedJudge(error=config.judge_error, bias=config.judge_bias)
    pool = Pool(samples, problem_ids, [], [], [], [], 0, [])
    for index, sample in enumerate(samples):
        truth = [step.rating for step in sample.steps]
        human = session_ratings(truth, noise=config.noise, rng=_rng(seed, "human", index))
        pool.human.append(human)
        pool.judge.append(judge.ratings(sample, rng=_rng(seed, "judge", index)))
        pool.suggested.append(
            suggested_ratings(
                truth,
                pool.judge[-1],
                noise=config.noise,
                follow=config.follow,
                rng=_rng(seed, "suggested", index),
            )
        )
        rolled = rollout_labels(generator, sample, rollouts=config.rollouts)
        pool.rollout.append(rolled.hard)
        pool.rollout_completions += rolled.completions
        pool.search.append(search_cost(generator, sample, rollouts=config.rollouts))
    return pool


def _rng(seed: int, kind: str, index: int) -> random.Random:
    return random.Random(f"triage:{seed}:{kind}:{index}")


# --- the comparison -----------------------------------------------------------------------------


@dataclass(frozen=True)
class TriageConfig(recipe.Common):
    """One triage comparison (`manage.py simulate --triage`, whose options are derived from it);
    the training recipe is `recipe`'s (offline), each selection `recipe.selection`'s."""

    noun = "triage parameter"

    seeds: tuple[int, ...] = param(
        recipe.SEEDS, label="Seeds", help="One comparison per seed.", low=0, high=2**31 - 1
    )
    strategies: tuple[str, ...] = param(
        STRATEGIES,
        label="Strategies",
        help="Uniform is required: the baseline and the human-only arm.",
        choices=STRATEGIES,
    )
    pool_problems: int = param(250, label="Pool problems", low=1)
    per_problem: int = param(8, label="Solutions per problem", help="Of the pool.", low=1)
    first: int = param(
        300, label="First generation", help="Solutions of the shared uniform one.", low=1
    )
    rounds: int = param(2, label="Rounds", help="Generations chosen by each strategy.", low=0)
    batch: int = param(250, label="Batch", help="Solutions per later generation.", low=1)
    per_problem_cap: int = recipe.selection_field("per_problem_cap")
    # Below the loop's 0.8: a pool of 8 solutions per problem has fewer wrong answers to fill it.
    wrong_share: float = recipe.selection_field("wrong_share", default=0.75)
    rollouts: int = param(8, label="Rollouts", help="k, rollouts from each step's prefix.", low=1)
    judge_error: float = param(
        0.2,
        label="Judge error",
        help="The simulated judge's rate of missing a wrong step.",
        low=0,
        high=1,
    )
    judge_bias: float = param(
        0.5,
        label="Judge bias",
        help="How the judge's errors lean (-1 to 1; judge.SimulatedJudge).",
        low=-1,
        high=1,
    )
    follow: float = param(
        0.5,
        label="Follow",
        help="Chance a labeler shown the judge's rating takes it instead of their own.",
        low=0,
        high=1,
    )
    test_problems: int = like(recipe.Common, "test_problems", default=60)
    test_samples: int = like(recipe.Common, "test_samples", default=64)

    @property
    def human_budget(self) -> int:
        return self.first + self.rounds * self.batch

    def __post_init__(self) -> None:
        super().__post_init__()
        if "uniform" not in self.strategies:
            raise recipe.InvalidSimulation("strategies must include uniform.")
        if self.human_budget > self.pool_problems * self.per_problem:
            raise recipe.InvalidSimulation("the human budget exceeds the pool.")
        if max(self.best_of) > self.test_samples:
            raise recipe.InvalidSimulation("best_of cannot exceed the test samples per problem.")


def compare(config: TriageConfig, *, emit: Emit | None = None) -> dict:
    """{"config", "runs": [one row per seed and arm], "search": [one row per seed],
    "suggestions": [one row per seed and display]}."""
    say = emit or (lambda line: None)
    result: dict = {"runs": [], "search": [], "suggestions": []}
    for seed in config.seeds:
        for key, rows in _one_seed(config, seed=seed, say=say).items():
            result[key] += rows
    data = config.to_dict()
    data.update(seeds=list(config.seeds), strategies=list(config.strategies))
    data["best_of"] = list(config.best_of)
    return {"config": data, **result}


def _one_seed(config: TriageConfig, *, seed: int, say: Emit) -> dict[str, list[dict]]:
    started = time.monotonic()
    generator = Generator(seed=seed)
    test = evaluation.TestSet.build(
        problems=config.test_problems,
        samples_per_problem=config.test_samples,
        seed=seed,
        generator=generator,
    )
    pool = build_pool(config, seed=seed, generator=generator)
    say(f"seed {seed}: a pool of {len(pool.samples)} solutions labeled by every source")
    rows: list[dict] = []

    def evaluated(arm: str, kind: str, examples: list[Example], prm: PRM | None = None) -> None:
        prm = prm or train(examples, config=config, seed=seed)
        step_scores, scores = evaluation.score_test_set(prm, test.samples)
        row = {
            "seed": seed,
            "kind": kind,
            "arm": arm,
            "solutions": len(examples),
            "step_labels": sum(len(e.labels) for e in examples),
            "label_accuracy": _label_accuracy(examples, pool),
            **evaluation.step_metrics(test.samples, step_scores),
            "best_of_n": evaluation.best_of_n_curves(
                test.groups({"prm": scores}),
                sizes=config.best_of,
                trials=config.trials,
                seed=seed,
                verifiers=["prm"],
            ),
        }
        rows.append(row)
        auroc = row["step_auroc"]
        say(f"seed {seed} {kind} {arm}: AUROC {'-' if auroc is None else f'{auroc:.3f}'}")

    chosen = _strategies(config, seed=seed, pool=pool, evaluated=evaluated)
    human = chosen["uniform"]
    taken = set(human)
    rest = [i for i in range(len(pool.samples)) if i not in taken]
    everyone = range(len(pool.samples))
    arms = {
        "rollout": [pool.example(i, pool.rollout[i]) for i in everyone],
        "judge": [pool.example(i, pool.judge[i]) for i in everyone],
        "human+rollout": _human_examples(pool, human)
        + [pool.example(i, pool.rollout[i]) for i in rest],
        "consensus": _human_examples(pool, human)
        + [e for i in rest if (e := _consensus_example(pool, i)) is not None],
    }
    for arm in SOURCES[1:]:
        evaluated(arm, "source", arms[arm])
    evaluated("confirm", "display", [pool.example(i, pool.suggested[i]) for i in human])
    suggestions = [
        {"seed": seed, "display": display, **_display_figures(pool, labels, human)}
        for display, labels in (("hidden", pool.human), ("confirm", pool.suggested))
    ]
    say(f"seed {seed} done in {time.monotonic() - started:.0f} s")
    return {
        "runs": rows,
        "search": [{"seed": seed, **_search_figures(pool)}],
        "suggestions": suggestions,
    }


def _strategies(config: TriageConfig, *, seed: int, pool: Pool, evaluated) -> dict[str, list[int]]:
    """Each strategy's labeled solutions (pool indexes), evaluating each one's last PRM; the
    uniform strategy's are the human arm of the label sources."""
    every = [_candidate(pool, i, score=None, prm_steps=None) for i in range(len(pool.samples))]
    uniform = recipe.selection(
        strategy="uniform",
        batch_size=config.first,
        per_problem_cap=config.per_problem,
        wrong_share=config.wrong_share,
        seed=seed,
    )
    first = [p.candidate.solution_id for p in recipe.pick(every, uniform)]
    first_prm = train(_human_examples(pool, first), config=config, seed=seed)
    chosen: dict[str, list[int]] = {}
    for name in config.strategies:
        labeled, prm = list(first), first_prm
        for round_ in range(config.rounds):
            if round_:
                prm = train(_human_examples(pool, labeled), config=config, seed=seed)
            taken = set(labeled)
            left = [i for i in range(len(pool.samples)) if i not in taken]
            params = recipe.selection(
                strategy=name,
                batch_size=config.batch,
                per_problem_cap=config.per_problem_cap,
                wrong_share=config.wrong_share,
                seed=seed * 1000 + round_,
            )
            candidates = _candidates(
                pool=pool,
                indexes=left,
                prm=prm,
                ensemble_params=params if name == ENSEMBLE else None,
                ensemble_seed=seed,
            )
            labeled += [p.candidate.solution_id for p in recipe.pick(candidates, params)]
        evaluated(name, "strategy", _human_examples(pool, labeled), None if config.rounds else prm)
        chosen[name] = labeled
    return chosen


def _human_examples(pool: Pool, indexes: list[int]) -> list[Example]:
    return [pool.example(i, pool.human[i]) for i in indexes]


def _candidates(
    *,
    pool: Pool,
    indexes: list[int],
    prm: PRM,
    ensemble_params: SelectionParams | None = None,
    ensemble_seed: int = 0,
) -> list[strategies.Candidate]:
    """The candidates among `indexes`, scored by `prm`; with `ensemble_params` (a selection's
    parameters), with the epistemic uncertainty of its MC-dropout ensemble
    (`trainer.selection.ensemble`), seeded by `ensemble_seed`."""
    samples = [pool.samples[i] for i in indexes]
    problems, steps = [s.problem.text for s in samples], [s.texts for s in samples]
    step_scores = prm.score(problems=problems, steps=steps, batch_size=64)
    aggregation = prm.settings.aggregation
    epistemic: list[float | None] = [None] * len(samples)
    if ensemble_params is not None:
        members = prm.member_step_scores(
            problems=problems,
            steps=steps,
            members=ensemble_params.ensemble_members,
            dropout=ensemble_params.ensemble_dropout,
            seed=ensemble_seed,
            batch_size=64,
        )
        epistemic = [
            ensemble.member_uncertainty(m, aggregation=aggregation) if m[0] else None
            for m in members
        ]
    return [
        _candidate(
            pool,
            i,
            score=solution_score(scores, aggregation=aggregation),
            prm_steps=scores,
            epistemic=value,
        )
        for i, scores, value in zip(indexes, step_scores, epistemic, strict=True)
    ]


def _candidate(pool: Pool, index: int, *, score, prm_steps, epistemic=None) -> strategies.Candidate:
    sample = pool.samples[index]
    steps = len(sample.steps)
    positions = [position(ratings=pool.rollout[index], steps=steps)]
    positions.append(position(ratings=pool.judge[index], steps=steps))
    if prm_steps is not None:
        positions.append(next((i for i, s in enumerate(prm_steps) if s < 0.5), steps))
    return strategies.Candidate(
        solution_id=index,
        problem_id=pool.problem_ids[index],
        score=score,
        is_correct=sample.is_correct,
        disagreement=strategies.spread([p for p in positions if p is not None]),
        epistemic=epistemic,
    )


@dataclass(frozen=True)
class _Rolled:
    reached: bool  # what the consensus rule reads of a rollout label


@dataclass(frozen=True)
class _Judged:
    rating: int  # ... and of a judge label


def _consensus_example(pool: Pool, index: int) -> Example | None:
    """The product's consensus of the solution's rollout and judge labels
    (`trainer.training.consensus`), as its training example; None when its first step has none."""
    rollout, judge = pool.rollout[index], pool.judge[index]
    verdicts = [
        consensus.step_verdict(
            consensus.StepLabels(
                rollout=_Rolled(rollout[i] == 1) if i < len(rollout) else None,
                judge=_Judged(judge[i]) if i < len(judge) else None,
            ),
            sources=("rollout", "judge"),
        )
        for i in range(len(pool.samples[index].steps))
    ]
    taken = consensus.example_prefix(verdicts)
    return pool.example(index, [v.label for v in taken]) if taken else None


def _label_accuracy(examples: list[Example], pool: Pool) -> float | None:
    agreeing = total = 0
    for example in examples:
        truth = [step.rating for step in pool.samples[example.solution_id].steps]
        for given, true in zip(example.labels, truth, strict=False):
            total += 1
            agreeing += (given == -1) == (true == -1)
    return agreeing / total if total else None


def _display_figures(pool: Pool, labels: list[list[int]], chosen: list[int]) -> dict:
    """Per-step verdict accuracy of the labels and their agreement with the judge, over the
    steps both rated, and first-error agreement with the truth, on the chosen solutions."""
    accurate = steps = with_judge = compared = first_right = 0
    for i in chosen:
        truth = [step.rating for step in pool.samples[i].steps]
        for index, given in enumerate(labels[i]):
            steps += 1
            accurate += (given == -1) == (truth[index] == -1)
            if index < len(pool.judge[i]):
                compared += 1
                with_judge += given == pool.judge[i][index]
        n = len(truth)
        first_right += position(ratings=labels[i], steps=n) == position(ratings=truth, steps=n)
    return {
        "label_accuracy": accurate / steps,
        "judge_agreement": with_judge / compared if compared else None,
        "first_error_exact": first_right / len(chosen),
    }


def _search_figures(pool: Pool) -> dict:
    n = len(pool.search)
    return {
        "solutions": n,
        "every_step": sum(c.every_step for c in pool.search) / n,
        "every_step_stopping": sum(c.every_step_stopping for c in pool.search) / n,
        "search": sum(c.search for c in pool.search) / n,
        "same_first_error": sum(c.same_first_error for c in pool.search) / n,
    }
