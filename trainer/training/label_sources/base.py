"""What a label source declares, and the registry of them (see the package's docstring).

Nothing here needs Django: `TrainingParams` reads the choices, and the training loop's
processes import it with no Django configured.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from itertools import combinations
from typing import Any

HUMAN = "human"  # the labels people give in the workbench


@dataclass(frozen=True)
class Trains:
    """A source a training run can choose as its `label_source`."""

    # Keyword `params` (TrainingParams) -> the examples (`trainer.training.dataset.Example`) the
    # run's data filters keep, evaluation problems included (the caller leaves those out).
    examples: Callable[..., list]
    # What "no data" means for it, ending "No labeled examples: {missing} matches this run's
    # data filters."; keyword `params`.
    missing: Callable[..., str]
    help: str  # one sentence for the form and the docs
    reads_human: bool = False  # a version trained on it makes the human labels it read used
    soft: bool = False  # its labels are shares (floats) when `rollout_estimate` is soft


@dataclass(frozen=True)
class MachineReader:
    """A machine source as a consensus asks it, step by step (`trainer.training.consensus`)."""

    # The solutions it labels, as a `Q` on `labeling.models.Solution`.
    labeled: Callable[[], Any]
    # Keyword `solution_ids` -> solution id -> (the run that gave the labels, or None; step
    # index -> the step's label, as the solution page shows it). Only solutions it labels.
    read: Callable[..., dict[int, tuple[int | None, Mapping[int, Any]]]]
    # A step's label -> whether it says the step is bad.
    bad: Callable[[Any], bool]
    help: str  # what "bad" means for it, for the docs and the solution page


@dataclass(frozen=True)
class FirstErrorReader:
    """A source as the quality page's first-error figures read it (`labeling.first_error`)."""

    title: str  # as the quality page names it
    # The ids of the solutions it labels, as a query (a subquery of the pairs' intersection).
    labeled: Callable[[], Any]
    # Keyword `solution_ids` -> solution id -> first-error position, where it decides one.
    positions: Callable[..., dict[int, int]]


def positions_of_steps(
    read: Callable[..., dict[int, tuple[int | None, Mapping[int, Any]]]],
    rating: Callable[[Any], int],
) -> Callable[..., dict[int, int]]:
    """A first-error reader's `positions` from a machine reader's `read` and the rating
    (+1 / 0 / -1) a step's label stands for."""

    def positions(*, solution_ids: list[int]) -> dict[int, int]:
        from labeling.first_error import positions_of

        return positions_of(
            {
                pk: {index: rating(label) for index, label in labels.items()}
                for pk, (_, labels) in read(solution_ids=solution_ids).items()
            }
        )

    return positions


@dataclass(frozen=True)
class LabelSource:
    name: str  # as the API, the command line and `Example.source` name it
    title: str  # as a page names it
    trains: Trains | None = None
    machine: MachineReader | None = None
    first_error: FirstErrorReader | None = None


_SOURCES: dict[str, LabelSource] = {}


def register(entry: LabelSource) -> LabelSource:
    """Add a source (or replace the one of its name); returns it."""
    _SOURCES[entry.name] = entry
    return entry


def unregister(name: str) -> None:
    _SOURCES.pop(name, None)


def all_sources() -> list[LabelSource]:
    """Every source, in the order registered."""
    return list(_SOURCES.values())


def source(name: str) -> LabelSource:
    """The source of that name; KeyError for a name not registered."""
    return _SOURCES[name]


def training_choices() -> dict[str, str]:
    """`label_source`'s choices: name -> title, in the registry's order."""
    return {s.name: s.title for s in _SOURCES.values() if s.trains is not None}


def machine_names() -> tuple[str, ...]:
    """The sources a consensus may ask, in the registry's order."""
    return tuple(s.name for s in _SOURCES.values() if s.machine is not None)


def ordered_machine_names(value: str) -> tuple[str, ...]:
    """The machine sources a comma-separated `consensus_sources` value names, in the
    registry's order (so that any order and spacing names the same set)."""
    named = {name.strip() for name in value.split(",")}
    return tuple(name for name in machine_names() if name in named)


def consensus_choices() -> dict[str, str]:
    """`consensus_sources`' choices: every non-empty set of machine sources, written in the
    registry's order ("rollout,judge"), -> its words ("rollout + judge")."""
    names = machine_names()
    return {
        ",".join(chosen): " + ".join(chosen)
        for size in range(1, len(names) + 1)
        for chosen in combinations(names, size)
    }


def first_error_sources() -> list[LabelSource]:
    """The sources the quality page compares first errors of (humans are labeling's own)."""
    return [s for s in _SOURCES.values() if s.first_error is not None]


def disagreement_sources() -> list[LabelSource]:
    """The machine sources that place a first error: where they part, the `disagreement`
    strategy looks (the PRM's position comes from the selection's own model version)."""
    return [s for s in _SOURCES.values() if s.machine is not None and s.first_error is not None]
