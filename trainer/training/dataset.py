"""Training examples from submitted labeling sessions.

Over 500 lines on purpose: every label source (human, rollout, imported, consensus) is read
through the same session and step readers here, so that each source's examples come out alike.

Each labeled solution gives one example: its problem, the solution's steps up to and including
the first -1 (the paper supervises up to the first error), and the rating of each. A solution
labeled by several labelers gives the label `labeling.agreement.training_label` settles on.
Every other rated completion of a step (phase-2 alternatives at the error step, phase-1
completions the labeler did not choose) gives one more example: the steps before it, then
that completion with its own rating.

Which completion is "the solution's own step" is read from the data, so phase-1 and phase-2
imports both work: the chosen completion when it matches the solution's step, else a rated
completion whose text is that step (completion 0 in phase 2). A phase-1 step the labeler
wrote themselves (`human_completion`) counts as +1 unless it carries an integer
`corrected_rating`.

Rollout labels (`trainer.sampling.rollouts`) are a label source of their own: a solution with them
gives one rollout example per run used, never merged into its human labels. With the hard
estimate its labels are +1/-1, cut after the first -1 like a human label; with the soft one
every step carries `targets` (p(+1) = the share of rollouts that reached the answer, p(-1)
the rest) and `labels` hold the hard estimate for the metrics. `build_training_examples`
takes what a run's label source builds (`trainer.training.label_sources`, one module per
source, calling the builders here).

Imported labels (`trainer.sampling.imported`: ProcessBench, PRMBench, TRL files) are a third
source, chosen alone (`label_source: imported`): one example per imported label, in import
order, with every step the dataset labels (a TRL row comes back as it went in). The session
filters do not apply to them: they come from no session or generation.

Consensus labels (`label_source: consensus`, `trainer.training.consensus`) merge the sources
into one example per solution: every human label (the human example as above), and past where
humans rated, the steps the chosen machine sources agree on (`consensus_steps` counts those).
A solution no human labeled gives an example of consensus steps alone; a human example with
no step to add stays as it is (source "human"). Human alternatives are kept as they are.
"""

import hashlib
import json
import random
from collections import defaultdict
from dataclasses import asdict, dataclass

from django.db.models import Count, Q, QuerySet

from core.prm800k import RATINGS
from labeling import agreement
from labeling.models import (
    LabelingSession,
    Problem,
    Solution,
    StepLabel,
    StepRating,
    problem_key,
)
from trainer.training import consensus, gates, label_sources

SESSION_CHUNK = 500


@dataclass(frozen=True)
class Example:
    problem_id: int
    solution_id: int | None  # None for an alternative completion's example
    problem: str
    steps: list[str]  # up to and including the first -1
    labels: list[int]  # -1 / 0 / 1 per step
    # Rollout examples only (the defaults are a human example's, and are left out of the
    # snapshot hash so that human data hashes as it always did):
    source: str = "human"  # the label source's name (trainer.training.label_sources)
    targets: list[float] | None = None  # soft estimate: p(+1) per step; p(-1) = 1 - it
    weight: float = 1.0  # weight of the example in the loss
    sampling_run_id: int | None = None  # the sampling run whose rollout labels these are
    imported_label_id: int | None = None  # the imported label (file, format, row) it is
    consensus_steps: int = 0  # of its labels, those the machine sources' consensus gave


def build_examples(
    *,
    include_quality_control: bool = True,
    include_screening: bool = False,
    generation_min: int | None = None,
    generation_max: int | None = None,
) -> list[Example]:
    """Examples from every submitted session the filters keep, in session order.

    A generation bound leaves out sessions without a generation (phase-1 data).
    """
    sessions = LabelingSession.objects.filter(submitted_at__isnull=False)
    if not include_quality_control:
        sessions = sessions.filter(is_quality_control=False)
    if not include_screening:
        # Screening is flagged on the session and also lives in generation -1.
        sessions = sessions.filter(is_screening=False).exclude(generation__number=-1)
    if generation_min is not None:
        sessions = sessions.filter(generation__number__gte=generation_min)
    if generation_max is not None:
        sessions = sessions.filter(generation__number__lte=generation_max)
    used = agreement.training_sessions(sessions)
    rows = [
        row
        for row in sessions.order_by("pk").values_list("pk", "solution_id", "solution__problem_id")
        if row[0] in used
    ]
    problems: dict[int, str] = {}
    examples: list[Example] = []
    for start in range(0, len(rows), SESSION_CHUNK):
        chunk = rows[start : start + SESSION_CHUNK]
        wanted = {problem_id for _, _, problem_id in chunk} - problems.keys()
        problems.update(Problem.objects.filter(pk__in=wanted).values_list("pk", "text"))
        solution_steps = _solution_steps([solution_id for _, solution_id, _ in chunk])
        labels = _step_labels([pk for pk, _, _ in chunk])
        for pk, solution_id, problem_id in chunk:
            examples += _session_examples(
                problem_id=problem_id,
                solution_id=solution_id,
                problem=problems[problem_id],
                solution_steps=solution_steps[solution_id],
                steps=labels.get(pk, []),
            )
    return examples


def build_training_examples(*, params) -> list[Example]:
    """The examples a training run's parameters (`TrainingParams`) choose: human ones (in
    session order), then rollout ones (in solution order), or both; never one of a problem
    an evaluation set holds."""
    return without_evaluation_problems(labeled_examples(params=params))[0]


def without_evaluation_problems(examples: list[Example]) -> tuple[list[Example], int]:
    """`examples` less those of problems an evaluation set holds (matched by
    `problem_key`, so another spelling of the problem is the same problem), and how many
    were left out."""
    held = gates.evaluation_problem_keys()
    if not held:
        return examples, 0
    keys: dict[str, str] = {}
    kept = [e for e in examples if keys.setdefault(e.problem, problem_key(e.problem)) not in held]
    return kept, len(examples) - len(kept)


def labeled_examples(*, params) -> list[Example]:
    """Every example the run's parameters choose, evaluation problems included: those of
    its label source (`trainer.training.label_sources`)."""
    return label_sources.source(params.label_source).trains.examples(params=params)


def data_filters(params) -> dict:
    """The data filters of a run's parameters, as the example builders take them."""
    return {
        "include_quality_control": params.include_quality_control,
        "include_screening": params.include_screening,
        "generation_min": params.generation_min,
        "generation_max": params.generation_max,
    }


def imported_examples() -> list[Example]:
    """One example per imported label, in import order: its solution's labeled steps."""
    from trainer.sampling.models import ImportedLabel

    examples: list[Example] = []
    labels = ImportedLabel.objects.order_by("pk").values_list(
        "pk", "ratings", "solution_id", "solution__problem_id", "solution__steps"
    )
    problems: dict[int, str] = {}
    for start in range(0, labels.count(), SESSION_CHUNK):
        chunk = list(labels[start : start + SESSION_CHUNK])
        wanted = {row[3] for row in chunk} - problems.keys()
        problems.update(Problem.objects.filter(pk__in=wanted).values_list("pk", "text"))
        for pk, ratings, solution_id, problem_id, steps in chunk:
            examples.append(
                Example(
                    problem_id=problem_id,
                    solution_id=solution_id,
                    problem=problems[problem_id],
                    steps=steps[: len(ratings)],
                    labels=list(ratings),
                    source="imported",
                    imported_label_id=pk,
                )
            )
    return examples


def rollout_examples(
    *,
    estimate: str = "hard",
    weight: float = 1.0,
    run_id: int | None = None,
    include_quality_control: bool = True,
    include_screening: bool = False,
    generation_min: int | None = None,
    generation_max: int | None = None,
) -> list[Example]:
    """One example per solution with rollout labels: `run_id`'s labels, or else those of the
    latest sampling run that labeled it. Labels count from step 0 without a gap; a gap ends
    them. The filters mean what they mean for sessions, read on the solution."""
    from trainer.sampling.rollouts import latest_run_labels, rollout_labels_of

    if estimate not in ("hard", "soft"):
        raise ValueError(f"Unknown rollout estimate {estimate!r}: use hard or soft.")
    solutions = Solution.objects.filter(rollout_labels__isnull=False)
    if run_id is not None:
        solutions = solutions.filter(rollout_labels__sampling_run_id=run_id)
    solutions = _kept(
        solutions,
        include_quality_control=include_quality_control,
        include_screening=include_screening,
        generation_min=generation_min,
        generation_max=generation_max,
    )
    ids = sorted(set(solutions.values_list("pk", flat=True)))
    examples: list[Example] = []
    for start in range(0, len(ids), SESSION_CHUNK):
        chunk = ids[start : start + SESSION_CHUNK]
        labels = rollout_labels_of(chunk, run=run_id)
        rows = Solution.objects.filter(pk__in=chunk).order_by("pk")
        for pk, problem_id, problem, steps in rows.values_list(
            "pk", "problem_id", "problem__text", "steps"
        ):
            chosen = latest_run_labels(labels.get(pk, {}))
            if chosen is None:
                continue
            used_run, by_index = chosen
            example = _rollout_example(
                problem_id=problem_id,
                solution_id=pk,
                problem=problem,
                steps=steps,
                labels=by_index,
                estimate=estimate,
                weight=weight,
                run_id=used_run,
            )
            if example is not None:
                examples.append(example)
    return examples


def _kept(
    solutions: QuerySet[Solution],
    *,
    include_quality_control: bool,
    include_screening: bool,
    generation_min: int | None,
    generation_max: int | None,
) -> QuerySet[Solution]:
    """The solutions the data filters keep, read on the solution as they are on a session."""
    if not include_quality_control:
        solutions = solutions.filter(is_quality_control=False)
    if not include_screening:
        solutions = solutions.filter(is_screening=False).exclude(generation__number=-1)
    if generation_min is not None:
        solutions = solutions.filter(generation__number__gte=generation_min)
    if generation_max is not None:
        solutions = solutions.filter(generation__number__lte=generation_max)
    return solutions


def consensus_examples(
    *,
    sources: tuple[str, ...] = consensus.DEFAULT_SOURCES,
    include_quality_control: bool = True,
    include_screening: bool = False,
    generation_min: int | None = None,
    generation_max: int | None = None,
) -> list[Example]:
    """Human examples (in session order), each extended past where humans stopped by the
    consensus of `sources`; then one example per solution no human labeled whose first steps
    the sources agree on (in solution order). See `trainer.training.consensus`."""
    filters = {
        "include_quality_control": include_quality_control,
        "include_screening": include_screening,
        "generation_min": generation_min,
        "generation_max": generation_max,
    }
    human = build_examples(**filters)
    own = {e.solution_id: e for e in human if e.solution_id is not None}
    labeled = Q()
    for name in sources:
        labeled |= label_sources.source(name).machine.labeled()
    machine_ids = set(
        _kept(Solution.objects.filter(labeled), **filters).values_list("pk", flat=True)
    )
    ids = sorted(machine_ids | own.keys())
    merged: dict[int, Example | None] = {}
    for start in range(0, len(ids), SESSION_CHUNK):
        chunk = ids[start : start + SESSION_CHUNK]
        machine = consensus.machine_labels(solution_ids=chunk, sources=sources)
        rows = Solution.objects.filter(pk__in=chunk).order_by("pk")
        for pk, problem_id, problem, steps in rows.values_list(
            "pk", "problem_id", "problem__text", "steps"
        ):
            mine = own.get(pk)
            verdicts = consensus.example_prefix(
                consensus.solution_verdicts(
                    steps=len(steps),
                    human=dict(enumerate(mine.labels)) if mine is not None else {},
                    machine=machine[pk],
                    sources=sources,
                )
            )
            added = sum(v.origin == consensus.CONSENSUS for v in verdicts)
            if not added:
                merged[pk] = mine  # nothing past the human label (or nothing at all)
                continue
            merged[pk] = Example(
                problem_id=problem_id,
                solution_id=pk,
                problem=problem,
                steps=steps[: len(verdicts)],
                labels=[v.label for v in verdicts],
                source="consensus",
                consensus_steps=added,
            )
    examples = [merged.get(e.solution_id) if e.solution_id is not None else e for e in human]
    examples += [merged[pk] for pk in ids if pk not in own]
    return [e for e in examples if e is not None]


def step_label_counts(examples: list[Example]) -> dict[str, int]:
    """The examples' step labels by where they came from: human, consensus, rollout, imported
    (a consensus example's human steps count as human). Sources with none are left out."""
    counts: dict[str, int] = {}
    for e in examples:
        consensus = e.consensus_steps if e.source == "consensus" else 0
        source = "human" if e.source == "consensus" else e.source
        counts[source] = counts.get(source, 0) + len(e.labels) - consensus
        if consensus:
            counts["consensus"] = counts.get("consensus", 0) + consensus
    return {source: n for source, n in counts.items() if n}


def _rollout_example(
    *, problem_id, solution_id, problem, steps, labels, estimate, weight, run_id
) -> Example | None:
    texts: list[str] = []
    hard: list[int] = []
    soft: list[float] = []
    for index, text in enumerate(steps):
        label = labels.get(index)
        if label is None:
            break
        texts.append(text)
        hard.append(label.hard)
        soft.append(label.soft)
        if estimate == "hard" and label.hard == -1:
            break
    if not texts:
        return None
    return Example(
        problem_id=problem_id,
        solution_id=solution_id,
        problem=problem,
        steps=texts,
        labels=hard,
        source="rollout",
        targets=soft if estimate == "soft" else None,
        weight=float(weight),
        sampling_run_id=run_id,
    )


def _solution_steps(solution_ids: list[int]) -> dict[int, list[str]]:
    return dict(Solution.objects.filter(pk__in=set(solution_ids)).values_list("pk", "steps"))


@dataclass
class _Step:
    index: int
    chosen: int | None
    human: dict | None
    ratings: list[tuple[int, str, int | None]]  # (completion_index, text, rating)


def _step_labels(session_ids: list[int]) -> dict[int, list[_Step]]:
    steps: dict[int, _Step] = {}
    by_session: dict[int, list[_Step]] = defaultdict(list)
    for pk, session_id, index, chosen, human in (
        StepLabel.objects.filter(session_id__in=session_ids)
        .order_by("session_id", "index")
        .values_list("pk", "session_id", "index", "chosen_completion", "human_completion")
    ):
        steps[pk] = _Step(index=index, chosen=chosen, human=human, ratings=[])
        by_session[session_id].append(steps[pk])
    for step_id, completion, text, rating in (
        StepRating.objects.filter(step_id__in=steps.keys())
        .order_by("step_id", "completion_index")
        .values_list("step_id", "completion_index", "text", "rating")
    ):
        steps[step_id].ratings.append((completion, text, rating))
    # A label being corrected is read as it was submitted, never half-edited: its rows hold
    # the correction in progress, and the version it replaces is the one in use.
    for session_id, extra in LabelingSession.objects.filter(
        pk__in=session_ids, reopened_at__isnull=False
    ).values_list("pk", "extra"):
        history = (extra or {}).get("corrections") or []
        if history and "previous" in history[-1]:
            by_session[session_id] = _submitted_steps(history[-1]["previous"])
    return by_session


def _submitted_steps(version: dict) -> list[_Step]:
    """The steps of a label's version kept by `labeling.services.corrections`."""
    return [
        _Step(
            index=step["index"],
            chosen=step["chosen_completion"],
            human=step["human_completion"],
            ratings=[
                (rating["completion_index"], rating["text"], rating["rating"])
                for rating in sorted(step["ratings"], key=lambda r: r["completion_index"])
            ],
        )
        for step in sorted(version["steps"], key=lambda step: step["index"])
    ]


def _own_rating(step: _Step, own_text: str | None) -> tuple[int | None, int | None]:
    """(completion index, rating) of the solution's own step; index None for a human one."""
    rated = {c: (text, rating) for c, text, rating in step.ratings if rating is not None}
    if step.chosen in rated and (own_text is None or rated[step.chosen][0] == own_text):
        return step.chosen, rated[step.chosen][1]
    for completion, (text, rating) in rated.items():
        if text == own_text:
            return completion, rating
    if isinstance(step.human, dict) and step.human.get("text") == own_text:
        return None, _human_rating(step.human)
    return None, None


def _human_rating(human: dict) -> int:
    corrected = human.get("corrected_rating")
    if isinstance(corrected, int) and not isinstance(corrected, bool) and corrected in RATINGS:
        return corrected
    return 1


def _session_examples(
    *,
    problem_id: int,
    solution_id: int,
    problem: str,
    solution_steps: list[str],
    steps: list[_Step],
) -> list[Example]:
    texts: list[str] = []
    labels: list[int] = []
    alternatives: list[Example] = []
    for expected, step in enumerate(steps):
        if step.index != expected or step.index >= len(solution_steps):
            break  # a gap or a label past the solution's end: nothing after it is trustworthy
        own_text = solution_steps[step.index]
        own, rating = _own_rating(step, own_text)
        for completion, text, alt_rating in step.ratings:
            if completion != own and alt_rating is not None and text != own_text:
                alternatives.append(
                    Example(
                        problem_id=problem_id,
                        solution_id=None,
                        problem=problem,
                        steps=[*texts, text],
                        labels=[*labels, alt_rating],
                    )
                )
        human = step.human if isinstance(step.human, dict) else {}
        if isinstance(human.get("text"), str) and human["text"] != own_text:
            # A step the labeler wrote in place of the solution's own (its own example; a
            # phase-1 import whose solution took the written step is counted above).
            alternatives.append(
                Example(
                    problem_id=problem_id,
                    solution_id=None,
                    problem=problem,
                    steps=[*texts, human["text"]],
                    labels=[*labels, _human_rating(human)],
                )
            )
        if rating is None:
            break  # an unrated step (give up, bad problem) ends what was labeled
        texts.append(own_text)
        labels.append(rating)
        if rating == -1:
            break
    own_example = [Example(problem_id, solution_id, problem, texts, labels)] if texts else []
    return own_example + alternatives


def split_by_problem(
    examples: list[Example], *, eval_fraction: float = 0.1, seed: int = 0
) -> tuple[list[Example], list[Example]]:
    """(train, eval): a seeded share of the problems is held out with all its examples."""
    problem_ids = sorted({e.problem_id for e in examples})
    random.Random(seed).shuffle(problem_ids)
    if len(problem_ids) < 2 or eval_fraction <= 0:
        held = 0
    else:
        held = min(len(problem_ids) - 1, max(1, round(eval_fraction * len(problem_ids))))
    held_out = set(problem_ids[:held])
    train = [e for e in examples if e.problem_id not in held_out]
    evaluation = [e for e in examples if e.problem_id in held_out]
    return train, evaluation


def snapshot_hash(examples: list[Example]) -> str:
    """sha256 of the examples in order: equal data, equal hash, on any machine."""
    digest = hashlib.sha256()
    defaults = {
        "source": "human",
        "targets": None,
        "weight": 1.0,
        "sampling_run_id": None,
        "imported_label_id": None,
        "consensus_steps": 0,
    }
    for example in examples:
        row = {k: v for k, v in asdict(example).items() if k not in defaults or v != defaults[k]}
        line = json.dumps(row, sort_keys=True, ensure_ascii=False)
        digest.update(line.encode("utf-8") + b"\n")
    return digest.hexdigest()


# Best-of-N reads every solution of the held-out problems; these caps bound its cost.
BEST_OF_N_MAX_PROBLEMS = 500
BEST_OF_N_MAX_SOLUTIONS = 64


@dataclass(frozen=True)
class BestOfNProblem:
    """A held-out problem and its stored solutions, for the training loop's best-of-N."""

    problem: str
    solutions: list[tuple[list[str], bool]]  # (steps, is_correct), in solution order


def best_of_n_problems(examples: list[Example]) -> list[BestOfNProblem]:
    """The problems of `examples` with several stored solutions, each with its solutions.

    Every graded solution counts, labeled or not: best-of-N asks which one the PRM would
    pick. An ungraded one (no readable answer) says nothing of a pick and is left out. At
    most BEST_OF_N_MAX_PROBLEMS problems and BEST_OF_N_MAX_SOLUTIONS solutions each.
    """
    graded = Q(solutions__is_correct__isnull=False)
    problem_ids = sorted({e.problem_id for e in examples if e.solution_id is not None})
    if not problem_ids:
        return []
    texts = dict(
        Problem.objects.filter(pk__in=problem_ids)
        .annotate(n=Count("solutions", filter=graded))
        .filter(n__gte=2)
        .order_by("pk")
        .values_list("pk", "text")[:BEST_OF_N_MAX_PROBLEMS]
    )
    solutions: dict[int, list[tuple[list[str], bool]]] = {pk: [] for pk in texts}
    for problem_id, steps, is_correct in (
        Solution.objects.filter(problem_id__in=texts.keys(), is_correct__isnull=False)
        .order_by("problem_id", "pk")
        .values_list("problem_id", "steps", "is_correct")
    ):
        if steps and len(solutions[problem_id]) < BEST_OF_N_MAX_SOLUTIONS:
            solutions[problem_id].append((steps, is_correct))
    return [BestOfNProblem(problem=texts[pk], solutions=group) for pk, group in solutions.items()]
