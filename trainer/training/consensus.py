"""Consensus labels: a step's label where the machine label sources agree, and every human label.

The one rule, used by the training data (`dataset.consensus_examples`, `label_source:
consensus`) and the solution inspection page alike (`step_verdict`):

- a step a human rated takes the human rating (+1, 0 or -1): a human wins wherever present;
- otherwise each chosen machine source that labels the step gives a verdict, bad or not bad:
  *rollout* bad when no rollout of the newest rollout run reached the answer from the step (its
  hard estimate -1; a step a first-error search implied good counts as reached); *judge* bad
  when the newest judge run rated it -1 (a 0 is not bad; a first_error run rates the steps up
  to its first -1 and leaves the rest unlabeled); *prm* bad when the active model version's
  step score is below 0.5 (`metrics.THRESHOLD`; scores written by another version are not the
  active PRM's and count as no label);
- when every source that decided agrees and at least two decided (or, with one source chosen,
  that one), the step is labeled -1 (bad) or +1 (not bad); a disagreement, or too few sources,
  leaves it unlabeled.

An example takes the steps from step 0 up to and including the first -1, and ends before the
first unlabeled step, as human and rollout examples do (`example_prefix`).
"""

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from labeling.judge_display import JudgeShown
from labeling.models import Solution
from trainer.judging.selectors import newest_judge_labels
from trainer.sampling.models import RolloutLabel
from trainer.sampling.rollouts import latest_run_labels, rollout_labels_of
from trainer.training.metrics import THRESHOLD
from trainer.training.params import MACHINE_SOURCES, TrainingParams
from trainer.training.selectors import active_model_version

HUMAN = "human"
CONSENSUS = "consensus"


def chosen_sources(value: str) -> tuple[str, ...]:
    """The machine sources a `consensus_sources` parameter names, in MACHINE_SOURCES order."""
    named = {name.strip() for name in value.split(",")}
    return tuple(name for name in MACHINE_SOURCES if name in named)


DEFAULT_SOURCES = chosen_sources(TrainingParams.consensus_sources)


@dataclass(frozen=True)
class StepLabels:
    """One step's labels from each source; None where a source has none."""

    human: int | None = None
    rollout: RolloutLabel | None = None
    judge: JudgeShown | None = None
    prm: float | None = None

    def bad(self, source: str) -> bool | None:
        """The verdict of one machine source on the step (True: bad), None without a label."""
        if source == "rollout":
            return None if self.rollout is None else not self.rollout.reached
        if source == "judge":
            return None if self.judge is None else self.judge.rating == -1
        if source == "prm":
            return None if self.prm is None else self.prm < THRESHOLD
        raise ValueError(f"Unknown machine source {source!r}.")


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

    rollout_run_id: int | None = None
    rollout: dict[int, RolloutLabel] = field(default_factory=dict)
    judge_run_id: int | None = None
    judge: dict[int, JudgeShown] = field(default_factory=dict)
    prm: list[float] = field(default_factory=list)  # the active version's step scores

    def step(self, index: int, *, human: int | None = None) -> StepLabels:
        return StepLabels(
            human=human,
            rollout=self.rollout.get(index),
            judge=self.judge.get(index),
            prm=self.prm[index] if index < len(self.prm) else None,
        )


def machine_labels(
    *, solution_ids: Iterable[int], sources: Sequence[str] = MACHINE_SOURCES
) -> dict[int, MachineLabels]:
    """Solution id -> its labels from the chosen machine sources: the newest rollout run's
    (`rollouts.latest_run_labels`), the newest judge run's (`newest_judge_labels`) and the
    active model version's step scores. Every given solution has an entry, empty or not."""
    ids = list(solution_ids)
    found = {pk: MachineLabels() for pk in ids}
    if "rollout" in sources:
        for pk, by_run in rollout_labels_of(ids).items():
            latest = latest_run_labels(by_run)
            if latest is not None:
                found[pk].rollout_run_id, found[pk].rollout = latest
    if "judge" in sources:
        for pk, by_index in newest_judge_labels(solution_ids=ids).items():
            found[pk].judge = by_index
            found[pk].judge_run_id = next(iter(by_index.values())).run_id
    if "prm" in sources:
        active = active_model_version()
        if active is not None:
            for pk, scores in Solution.objects.filter(
                pk__in=ids, prm_model_version=active
            ).values_list("pk", "prm_step_scores"):
                found[pk].prm = list(scores) if isinstance(scores, list) else []
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
