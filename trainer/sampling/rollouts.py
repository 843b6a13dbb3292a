"""Rollout labels: Math-Shepherd's estimates of each step of a solution, and reading them back.

From the prefix that ends with step i, the generator finishes the solution k times; the step's
label records how many of those rollouts reached the problem's ground-truth answer (hard
estimate: at least one did; soft: the share that did). The labels are their own source with
their provenance (the sampling run: generator and settings), never merged into human labels;
a training run chooses which source it trains on (`TrainingParams.label_source`).
"""

from collections import defaultdict
from collections.abc import Iterable

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


def estimate_solution(
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
    rolled = roll_out_prefixes(
        generator=generator,
        problem=solution.problem.text,
        prefixes=[steps[: i + 1] for i in todo],
        k=run.samples,
        settings=settings,
        seed_offsets=[seed_offset(solution_id=solution.pk, index=i) for i in todo],
    )
    truth = solution.problem.answer
    labels = []
    for index, completions in zip(todo, rolled, strict=True):
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
    last = len(steps) - 1
    if last not in done and solution.is_correct is not None:
        labels.append(
            RolloutLabel(
                solution=solution,
                index=last,
                sampling_run=run,
                rollouts=1,
                reached=int(solution.is_correct),
                answers=[solution.answer],
            )
        )
    return labels


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
