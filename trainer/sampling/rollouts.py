"""Rollout labels: Math-Shepherd's estimates of each step of a solution, and reading them back.

From the prefix that ends with step i, the generator finishes the solution k times; the step's
label records how many of those rollouts reached the problem's ground-truth answer (hard
estimate: at least one did; soft: the share that did). The labels are their own source with
their provenance (the sampling run: generator and settings), never merged into human labels;
a training run chooses which source it trains on (`TrainingParams.label_source`).

A run rolls out from every step (`every_step`, Math-Shepherd), or searches for the first bad
step (`first_error`, OmegaPRM): a prefix *reaches* when at least one of its k rollouts ends at
the ground-truth answer, and, assuming that no longer prefix reaches once one cannot,
a binary search over the prefixes finds the first step that cannot in about log2(n) batches of
k rollouts instead of n - 1. It stores the steps it decided: those before the first bad one
(rolled out, or implied good by a later one that reached: `RolloutLabel.implied_by`), the
first bad one, and the later ones it rolled out anyway. The other steps after the first error
are not labeled: the PRM is supervised up to the first error.
"""

from collections import defaultdict
from collections.abc import Callable, Iterable

from generators import Generator, SamplingSettings, roll_out_prefixes
from labeling.grading import grade_answer
from labeling.models import Solution
from trainer.sampling.models import RolloutLabel, SamplingRun

# Seeds stay below 2**30, so seed + offset + k fits the 31 bits servers accept.
SEED_SPACE = 2**30
STEP_SEED_STRIDE = 128  # more than the most rollouts a run asks for per step (64)


def seed_offset(*, solution_id: int, index: int) -> int:
    """The seed offset of step `index` of a solution: the same on every retry, distinct per
    step, so a resumed run asks the generator for the same rollouts again."""
    return (solution_id * 1_000_003 + index * STEP_SEED_STRIDE) % SEED_SPACE


def _rolled_out(
    *,
    run: SamplingRun,
    solution: Solution,
    indexes: list[int],
    generator: Generator,
    settings: SamplingSettings,
) -> list[RolloutLabel]:
    """Unsaved labels of the steps `indexes`, each from `run.samples` rollouts of its prefix,
    all asked in one call; a rollout that never reached a final answer does not reach."""
    steps = list(solution.steps)
    rolled = roll_out_prefixes(
        generator=generator,
        problem=solution.problem.text,
        prefixes=[steps[: i + 1] for i in indexes],
        k=run.samples,
        settings=settings,
        seed_offsets=[seed_offset(solution_id=solution.pk, index=i) for i in indexes],
    )
    truth = solution.problem.answer
    labels = []
    for index, completions in zip(indexes, rolled, strict=True):
        answers = [c.answer if c.finished else "" for c in completions]
        reached = sum(1 for answer in answers if answer and grade_answer(answer, truth))
        labels.append(
            RolloutLabel(
                solution=solution,
                index=index,
                sampling_run=run,
                rollouts=len(completions),
                reached=reached,
                answers=answers,
            )
        )
    return labels


def _answer_label(*, run: SamplingRun, solution: Solution) -> RolloutLabel | None:
    """The "# Answer" step's label: the solution's own correctness, no generation (its prefix
    is the whole solution); None for an ungraded solution."""
    if solution.is_correct is None:
        return None
    return RolloutLabel(
        solution=solution,
        index=len(solution.steps) - 1,
        sampling_run=run,
        rollouts=1,
        reached=int(solution.is_correct),
        answers=[solution.answer],
    )


def estimate_solution(
    *,
    run: SamplingRun,
    solution: Solution,
    generator: Generator,
    settings: SamplingSettings,
) -> list[RolloutLabel]:
    """`run`'s rollout labels of `solution`, unsaved: by `search_solution` for a first-error
    search run, else every step's (below)."""
    if run.search == SamplingRun.Search.FIRST_ERROR:
        return search_solution(run=run, solution=solution, generator=generator, settings=settings)
    return _every_step(run=run, solution=solution, generator=generator, settings=settings)


def _every_step(
    *,
    run: SamplingRun,
    solution: Solution,
    generator: Generator,
    settings: SamplingSettings,
) -> list[RolloutLabel]:
    """`run`'s rollout labels of the steps of `solution` it has not labeled yet, unsaved.

    Steps before the last get `run.samples` rollouts each, all asked of the generator in one
    call (a server answers them concurrently); a rollout that never reached a final answer
    counts as not reaching the right one. The last step is the solution's "# Answer" step,
    whose label needs no generation: it is the solution's own correctness, stored as
    rollouts=1, reached=int(is_correct), answers=[solution.answer]; an ungraded solution's
    last step gets no label, since its correctness is not known.

    Generation and grading take long, so this runs outside any transaction; the caller stores
    the labels and marks its item done in a short one.
    """
    steps = list(solution.steps or [])
    if not steps:
        return []
    done = set(
        RolloutLabel.objects.filter(sampling_run=run, solution=solution).values_list(
            "index", flat=True
        )
    )
    todo = [index for index in range(len(steps) - 1) if index not in done]
    labels = _rolled_out(
        run=run, solution=solution, indexes=todo, generator=generator, settings=settings
    )
    answer = _answer_label(run=run, solution=solution)
    if answer is not None and answer.index not in done:
        labels.append(answer)
    return labels


def bisect_first_bad(*, end: int, reaches: Callable[[int], bool]) -> int:
    """The first prefix in [0, end) that cannot reach the answer, by binary search (OmegaPRM),
    or `end` when every probe reached: assuming, as OmegaPRM does, that no prefix after one
    that cannot reach can, it asks `reaches` about at most ceil(log2(end + 1)) prefixes, one
    after another. The simulation prices search rollouts with it too."""
    low, high = 0, end
    while low < high:
        middle = (low + high) // 2
        if reaches(middle):
            low = middle + 1
        else:
            high = middle
    return high


def search_solution(
    *,
    run: SamplingRun,
    solution: Solution,
    generator: Generator,
    settings: SamplingSettings,
) -> list[RolloutLabel]:
    """The labels a first-error search decides for `solution`, unsaved: one batch of
    `run.samples` rollouts per step it probes, one probe after another.

    The answer step is known without generation: a correct solution's reaches, so every
    step is implied good and nothing is rolled out; a wrong one's does not, so the first bad
    step is at or before it. Between them, binary search: a probe that reaches moves the
    search after it, one that does not makes it the latest bad candidate. Of n steps, at
    most ceil(log2(n)) prefixes are rolled out (every step: n - 1). An ungraded solution has
    no known answer step: the search runs over the other steps, and when every probe reaches
    it labels them all good and the answer step not at all.

    The labels: from step 0 without a gap, each step before the first bad one (rolled out,
    or implied by the nearest later step that reached) and the first bad one; and every step
    it rolled out (or knew: the answer step) after that, bad ones, measured all the same. A
    solution this run has labeled already (a resumed run) gets none.
    """
    steps = list(solution.steps or [])
    if not steps or RolloutLabel.objects.filter(sampling_run=run, solution=solution).exists():
        return []
    last = len(steps) - 1
    answer = _answer_label(run=run, solution=solution)
    probed: dict[int, RolloutLabel] = {}
    if answer is not None:
        probed[last] = answer
    # Every step before `low` reaches; `high` is the first known bad step, or `last` when
    # the answer step is not (yet) known bad.
    high = last
    if answer is None or not answer.reached:

        def reaches(index: int) -> bool:
            (label,) = _rolled_out(
                run=run, solution=solution, indexes=[index], generator=generator, settings=settings
            )
            probed[index] = label
            return bool(label.reached)

        high = bisect_first_bad(end=last, reaches=reaches)
    first_bad = high if high in probed and not probed[high].reached else None
    end = first_bad + 1 if first_bad is not None else len(steps)
    labels = [probed[index] for index in sorted(probed) if index >= end]
    for index in range(end):
        if index in probed:
            labels.append(probed[index])
            continue
        if index == last:
            continue  # an ungraded solution's answer step
        # Implied: the nearest later probe is one that reached (the search moved past it).
        source = min(i for i in probed if i > index)
        implied = probed[source]
        labels.append(
            RolloutLabel(
                solution=solution,
                index=index,
                sampling_run=run,
                rollouts=implied.rollouts,
                reached=implied.reached,
                answers=[],
                implied_by=source,
            )
        )
    return sorted(labels, key=lambda label: label.index)


def roll_out_solution(
    *,
    run: SamplingRun,
    solution: Solution,
    generator: Generator,
    settings: SamplingSettings,
) -> int:
    """Estimate and store `run`'s rollout labels of `solution`; returns how many were stored.

    Steps this run already labeled are skipped (the table's unique constraint on run,
    solution and step is the guard), so calling it again for a solution, as a resumed run
    does, generates and stores nothing twice.
    """
    labels = estimate_solution(run=run, solution=solution, generator=generator, settings=settings)
    RolloutLabel.objects.bulk_create(labels)
    return len(labels)


def rollout_labels_of(
    solution_ids: Iterable[int], run: SamplingRun | int | None = None
) -> dict[int, dict[int, dict[int, RolloutLabel]]]:
    """solution id -> sampling run id -> step index -> label; with `run`, that run's only.

    Runs of one solution come newest first (insertion order of the inner dict).
    """
    labels = RolloutLabel.objects.filter(solution_id__in=list(solution_ids))
    if run is not None:
        labels = labels.filter(sampling_run_id=run.pk if isinstance(run, SamplingRun) else run)
    out: dict[int, dict[int, dict[int, RolloutLabel]]] = defaultdict(dict)
    for label in labels.order_by("solution_id", "-sampling_run_id", "index"):
        out[label.solution_id].setdefault(label.sampling_run_id, {})[label.index] = label
    return dict(out)


def latest_run_labels(
    labels_by_run: dict[int, dict[int, RolloutLabel]],
) -> tuple[int, dict[int, RolloutLabel]] | None:
    """(run id, labels) of the newest run that labeled the solution, or None."""
    if not labels_by_run:
        return None
    run_id = max(labels_by_run)
    return run_id, labels_by_run[run_id]
