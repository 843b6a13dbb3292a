"""Agreement on the first-error position, between labelers and between label sources.

ProcessBench scores a critic by where it says the first wrong step is; the per-step alpha of
`labeling.agreement` does not show that. Here every label becomes one number per solution:

- its *first-error position*: the index of the first step rated -1 (from 0), or, when every
  step is rated and none -1, *no error*, counted as position n, the solution's number of
  steps: one past its last step, so an error at the last step and no error are one step apart
  and the interval and ordinal metrics order "no error" after every real error. A label that
  does not decide the position has none and is left out: a session ended by give_up or
  bad_problem, and a label with a gap before its first -1 (or, with no -1, a step unrated).
- *exact* and *within one step*: of the pairs of positions of one solution, the share equal and
  the share at most one step apart;
- *Krippendorff's alpha* at the interval and the ordinal metric over the positions, a unit per
  solution (`labeling.agreement.krippendorff_alpha`). Positions of solutions of different
  lengths share one scale, step indices; "no error" of a 3-step solution is position 3.
  Undefined (None) when fewer than two positions pair or every position is the same.

Between labelers: the solutions two or more labelers labeled, each labeler's first label with
a position. Between sources: the label sources (`sources()`), each reading one position
per solution; every pair of registered sources is compared on the solutions both decide.
Human labels give the label training uses (`labeling.agreement.training_label`), so a solution
several labelers labeled counts once. Labeling gives its own; the trainer gives its registry's
(`register_sources`: rollouts, imported labels, judges), since labeling cannot import it.
"""

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

from django.db.models import F, Func, IntegerField, QuerySet

from labeling.agreement import Label, krippendorff_alpha, labels_of, training_label
from labeling.models import LabelingSession, Solution

CHUNK = 500  # solutions read at once

Unit = list[tuple[Hashable, int]]  # one solution: (who, position) of each label compared


def position(*, ratings: Mapping[int, int] | Sequence[int], steps: int) -> int | None:
    """The first-error position of step ratings (step index -> rating, or a list from step 0)
    of a solution of `steps` steps: the first -1, `steps` for no error, None when undecided."""
    rated = dict(enumerate(ratings)) if isinstance(ratings, Sequence) else ratings
    for index in range(steps):
        if index not in rated:
            return None
        if rated[index] == -1:
            return index
    return steps


def positions_of(ratings: Mapping[int, Mapping[int, int] | Sequence[int]]) -> dict[int, int]:
    """Solution id -> the first-error position of its step ratings, for the solutions whose
    ratings decide one (a source's reader gives `ratings`: solution id -> its step ratings)."""
    steps, found = step_counts(ratings), {}
    for solution_id, rated in ratings.items():
        decided = position(ratings=rated, steps=steps[solution_id])
        if decided is not None:
            found[solution_id] = decided
    return found


def label_position(label: Label, *, steps: int) -> int | None:
    """A submitted label's position; None for a label given up or reporting a bad problem."""
    return position(ratings=label.ratings, steps=steps) if label.is_complete else None


@dataclass
class FirstErrorAgreement:
    solutions: int = 0  # solutions with two or more positions
    pairs: int = 0
    exact: int = 0
    within_one: int = 0
    alpha_interval: float | None = None
    alpha_ordinal: float | None = None

    @property
    def exact_rate(self) -> float | None:
        return self.exact / self.pairs if self.pairs else None

    @property
    def within_one_rate(self) -> float | None:
        return self.within_one / self.pairs if self.pairs else None


def agreement(units: Iterable[Unit]) -> FirstErrorAgreement:
    """The figures of `units`, one per solution: (who, position) for each distinct who."""
    units = [unit for unit in units if len(unit) >= 2]
    result = FirstErrorAgreement(solutions=len(units))
    for unit in units:
        for (_, a), (_, b) in combinations(unit, 2):
            result.pairs += 1
            result.exact += a == b
            result.within_one += abs(a - b) <= 1
    result.alpha_interval = krippendorff_alpha(units, metric="interval")
    result.alpha_ordinal = krippendorff_alpha(units, metric="ordinal")
    return result


class _StepCount(Func):
    """The length of a JSON array, counted by the database: reading every step's text to
    count them took a third of a second for 2,000 solutions (issue 44)."""

    function = "json_array_length"  # SQLite's
    output_field = IntegerField()

    def as_postgresql(self, compiler, connection, **extra):
        return self.as_sql(compiler, connection, function="jsonb_array_length", **extra)


def step_counts(solution_ids: Iterable[int]) -> dict[int, int]:
    """Solution id -> its number of steps."""
    ids, counts = list(solution_ids), {}
    for start in range(0, len(ids), CHUNK):
        rows = Solution.objects.filter(pk__in=ids[start : start + CHUNK]).values_list(
            "pk", _StepCount(F("steps"))
        )
        counts.update(rows)
    return counts


def between_labelers(labels_by_solution: dict[int, list[Label]]) -> FirstErrorAgreement:
    """Agreement of distinct labelers on the given solutions' labels (earliest first, as
    `labeling.agreement.overlapping_labels` gives them)."""
    steps = step_counts(labels_by_solution)
    units = []
    for solution_id, labels in labels_by_solution.items():
        mine: dict[int, int] = {}
        for label in labels:
            found = label_position(label, steps=steps[solution_id])
            if found is not None:
                mine.setdefault(label.labeler_id, found)
        units.append(list(mine.items()))
    return agreement(units)


# --- label sources -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Source:
    """A label source, as the first-error figures read it."""

    name: str  # as the API names it: human, rollout, imported, judge
    title: str  # as the page names it
    # The ids of the solutions it labels, as a query (a subquery of the pairs' intersection).
    labeled: Callable[[], QuerySet]
    # Solution id -> position, for those of the given solutions whose position it decides.
    positions: Callable[..., dict[int, int]]  # keyword solution_ids: list[int]


def _human_labeled() -> QuerySet:
    return LabelingSession.objects.filter(submitted_at__isnull=False).values("solution_id")


def human_positions(*, solution_ids: list[int]) -> dict[int, int]:
    """The position of the label training uses of each solution, where it decides one."""
    found: dict[int, int] = {}
    for start in range(0, len(solution_ids), CHUNK):
        chunk = solution_ids[start : start + CHUNK]
        sessions = LabelingSession.objects.filter(solution_id__in=chunk, submitted_at__isnull=False)
        rows = Solution.objects.filter(pk__in=chunk).values_list("pk", "steps", "gold_ratings")
        solutions = {pk: (len(steps), gold) for pk, steps, gold in rows}
        for solution_id, labels in labels_of(sessions).items():
            steps, gold = solutions[solution_id]
            chosen = label_position(training_label(labels, gold=gold), steps=steps)
            if chosen is not None:
                found[solution_id] = chosen
    return found


HUMAN = Source(name="human", title="Human", labeled=_human_labeled, positions=human_positions)
_PROVIDERS: list[Callable[[], Iterable[Source]]] = []


def register_sources(provider: Callable[[], Iterable[Source]]) -> None:
    """Compare the label sources a room above labeling gives too (called from its app's
    ready()): `provider()` is asked each time, so a source registered later is compared."""
    _PROVIDERS.append(provider)


def sources() -> dict[str, Source]:
    """Every label source compared, by name: humans first, then the providers' in order."""
    found = {HUMAN.name: HUMAN}
    for provider in _PROVIDERS:
        found.update((source.name, source) for source in provider())
    return found


@dataclass
class SourcePair:
    first: Source
    second: Source
    figures: FirstErrorAgreement


def between(first: Source, second: Source) -> FirstErrorAgreement:
    """Agreement of two sources on the solutions both label and decide."""
    both = list(
        Solution.objects.filter(pk__in=first.labeled())
        .filter(pk__in=second.labeled())
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    units = []
    for start in range(0, len(both), CHUNK):
        chunk = both[start : start + CHUNK]
        mine, theirs = first.positions(solution_ids=chunk), second.positions(solution_ids=chunk)
        units.extend(
            [(first.name, mine[pk]), (second.name, theirs[pk])]
            for pk in chunk
            if pk in mine and pk in theirs
        )
    return agreement(units)


def between_sources() -> list[SourcePair]:
    """Every pair of registered sources, in the order they were registered (human first)."""
    return [
        SourcePair(first=a, second=b, figures=between(a, b))
        for a, b in combinations(list(sources().values()), 2)
    ]


@dataclass
class FirstErrorReport:
    between_labelers: FirstErrorAgreement
    between_sources: list[SourcePair]


def report(labels_by_solution: dict[int, list[Label]]) -> FirstErrorReport:
    """The quality page's first-error figures (`labels_by_solution`: overlapping labels)."""
    return FirstErrorReport(
        between_labelers=between_labelers(labels_by_solution), between_sources=between_sources()
    )
