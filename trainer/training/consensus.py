"""Consensus labels: a step's label where the machine label sources agree, and every human label.

The one rule, used by the training data (`dataset.consensus_examples`, `label_source:
consensus`) and the solution inspection page alike (`step_verdict`):

- a step a human rated takes the human rating (+1, 0 or -1): a human wins wherever present;
- otherwise each chosen machine source that labels the step gives a verdict, bad or not bad,
  by its own rule (`trainer.training.label_sources`: *rollout* bad when no rollout of the
  newest rollout run reached the answer from the step; *judge* bad when the newest judge run
  rated it -1; *prm* bad when the active model version's step score is below 0.5);
- when every source that decided agrees and at least two decided (or, with one source chosen,
  that one), the step is labeled -1 (bad) or +1 (not bad); a disagreement, or too few sources,
  leaves it unlabeled.

An example takes the steps from step 0 up to and including the first -1, and ends before the
first unlabeled step, as human and rollout examples do (`example_prefix`).
"""

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from trainer.training import label_sources
from trainer.training.params import TrainingParams

HUMAN = label_sources.HUMAN
CONSENSUS = "consensus"

DEFAULT_SOURCES = label_sources.ordered_machine_names(TrainingParams.consensus_sources)


class StepLabels:
    """One step's labels: the human rating training uses, and each machine source's label
    (`StepLabels(human=1, rollout=label, judge=shown, prm=0.3)`); None where one has none."""

    def __init__(self, human: int | None = None, **machine: Any) -> None:
        self.human = human
        self.machine = machine

    def bad(self, source: str) -> bool | None:
        """The verdict of one machine source on the step (True: bad), None without a label."""
        label = self.machine.get(source)
        reader = label_sources.source(source).machine
        if reader is None:
            raise ValueError(f"{source!r} is not a machine source.")
        return None if label is None else reader.bad(label)


@dataclass(frozen=True)
class Verdict:
    """What the consensus rule makes of one step."""

    label: int | None  # the label training uses: a human rating, or -1 / +1; None: unlabeled
    origin: str = ""  # HUMAN, CONSENSUS, or "" when unlabeled
    decided: tuple[str, ...] = ()  # the machine sources that labeled the step
    agree: bool = False  # they all gave the same verdict
    needed: int = 2  # how many had to decide

    @property
    def reason(self) -> str:
        """Why, in a few words for the page."""
        if self.origin == HUMAN:
            return "human rating"
        if self.origin == CONSENSUS:
            return f"{' + '.join(self.decided)} agree"
        if not self.decided:
            return "no source labels it"
        if not self.agree:
            return f"{' and '.join(self.decided)} disagree"
        return f"only {self.decided[0]} decided ({self.needed} needed)"


def step_verdict(step: StepLabels, *, sources: Sequence[str]) -> Verdict:
    """The consensus rule for one step (see the module's docstring)."""
    if step.human is not None:
        return Verdict(label=step.human, origin=HUMAN)
    votes = {name: bad for name in sources if (bad := step.bad(name)) is not None}
    needed = min(2, len(sources))
    agree = len(set(votes.values())) == 1
    if not agree or len(votes) < needed:
        return Verdict(label=None, decided=tuple(votes), agree=agree, needed=needed)
    bad = next(iter(votes.values()))
    return Verdict(
        label=-1 if bad else 1, origin=CONSENSUS, decided=tuple(votes), agree=True, needed=needed
    )


def example_prefix(verdicts: Sequence[Verdict]) -> list[Verdict]:
    """The verdicts an example trains on: from step 0 up to and including the first -1, ending
    before the first unlabeled step."""
    taken: list[Verdict] = []
    for verdict in verdicts:
        if verdict.label is None:
            break
        taken.append(verdict)
        if verdict.label == -1:
            break
    return taken


@dataclass
class MachineLabels:
    """One solution's labels from the machine sources, each source's newest."""

    runs: dict[str, int | None] = field(default_factory=dict)  # source -> the run they are of
    labels: dict[str, Mapping[int, Any]] = field(default_factory=dict)  # source -> step -> label

    def step(self, index: int, *, human: int | None = None) -> StepLabels:
        return StepLabels(
            human=human, **{name: by_step.get(index) for name, by_step in self.labels.items()}
        )

    def of(self, source: str) -> Mapping[int, Any]:
        """Step index -> `source`'s label of the step."""
        return self.labels.get(source, {})


def machine_labels(
    *, solution_ids: Iterable[int], sources: Sequence[str] | None = None
) -> dict[int, MachineLabels]:
    """Solution id -> its labels from the chosen machine sources (all of them by default),
    each read by its source (`trainer.training.label_sources`). Every given solution has an
    entry, empty or not."""
    ids = list(solution_ids)
    found = {pk: MachineLabels() for pk in ids}
    for name in label_sources.machine_names() if sources is None else sources:
        for pk, (run_id, by_step) in (
            label_sources.source(name).machine.read(solution_ids=ids).items()
        ):
            found[pk].runs[name] = run_id
            found[pk].labels[name] = by_step
    return found


def solution_verdicts(
    *,
    steps: int,
    human: Mapping[int, int],
    machine: MachineLabels,
    sources: Sequence[str],
) -> list[Verdict]:
    """The verdict of every step of a solution of `steps` steps (`human`: step index -> the
    human rating training uses)."""
    return [
        step_verdict(machine.step(index, human=human.get(index)), sources=sources)
        for index in range(steps)
    ]
