"""Agreement between labelers, and the one label per solution that training uses.

A solution has several labels when its generation's overlap gave it to several labelers
(`labeling.services.overlap`), and when it is a quality-control or screening solution, which
every labeler gets. Only labels of distinct labelers are compared, in pairs:

- *first error*: both labels complete (an error found or the solution reached) and their first
  -1 at the same step, or neither has one;
- *per step*: of the steps both rated, the share rated the same;
- *Krippendorff's alpha* (nominal): chance-corrected agreement over every step rated by two or
  more labelers, 1 for perfect agreement, 0 for chance, below 0 for systematic disagreement
  (`krippendorff_alpha` also takes the ordinal and interval metrics, which
  `labeling.first_error` uses on first-error positions).
  A labeler's own alpha counts only the pairs they are part of against the disagreement
  expected from everyone's ratings, so with two labelers it equals the overall figure.
  Undefined (None) when fewer than two ratings can be paired or every rating is the same.

The label training uses (`training_label`): the adjudicated one; else, for a solution with
gold ratings, the first label whose first error agrees with gold; else the first error most
labels agree on, ties going to the earlier error (a step someone rated -1 is suspect), then
the earliest submitted label with it; a solution with no complete label uses its earliest.
"""

from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from itertools import accumulate, combinations

from django.db.models import Count, Q, QuerySet

from labeling import tallies
from labeling.models import Generation, Labeler, LabelingSession, Solution, StepRating
from labeling.quality import COMPLETE, first_error


@dataclass(frozen=True)
class Label:
    """One submitted session's label of its solution."""

    session_id: int
    solution_id: int
    labeler_id: int
    generation_id: int | None
    finish_reason: str
    submitted_at: datetime
    adjudicated: bool
    ratings: dict[int, int] = field(hash=False)  # step index -> rating of the solution's step

    @property
    def is_complete(self) -> bool:
        return self.finish_reason in COMPLETE

    @cached_property  # read once per pair of labels: thousands of times on the quality page
    def first_error(self) -> int | None:
        return first_error(self.ratings)


def labels_of(
    sessions: QuerySet[LabelingSession], *, tallied: bool = False
) -> dict[int, list[Label]]:
    """Solution id -> the labels of the given submitted sessions, earliest submitted first.
    `tallied`: read their ratings from the labels' tallies, joined (labeling/tallies.py: a row
    per label), rather than from the ratings (ten rows a label, through two joins)."""
    ratings: dict[int, dict[int, int]] = defaultdict(dict)
    live = set(tallies.live_among(sessions)) if tallied else None
    if live is None or live:
        # Unordered: the model's order would join the sessions to sort by them.
        rated = StepRating.objects.order_by().filter(
            step__session__in=sessions if live is None else list(live),
            completion_index=0,
            rating__isnull=False,
        )
        for session_id, index, rating in rated.values_list(
            "step__session_id", "step__index", "rating"
        ):
            ratings[session_id][index] = rating
    fields = [
        "pk",
        "solution_id",
        "labeler_id",
        "solution__generation_id",
        "finish_reason",
        "submitted_at",
        "adjudicated_at",
    ]
    by_solution: dict[int, list[Label]] = defaultdict(list)
    for (
        pk,
        solution_id,
        labeler_id,
        generation_id,
        reason,
        submitted_at,
        adjudicated_at,
        kept,
    ) in sessions.order_by("submitted_at", "pk").values_list(
        *fields, "tally__ratings" if tallied else "pk"
    ):
        by_solution[solution_id].append(
            Label(
                session_id=pk,
                solution_id=solution_id,
                labeler_id=labeler_id,
                generation_id=generation_id,
                finish_reason=reason,
                submitted_at=submitted_at,
                adjudicated=adjudicated_at is not None,
                ratings=ratings.get(pk, {})
                if live is None or pk in live
                else tallies.decode(kept or ""),
            )
        )
    return dict(by_solution)


def overlapping_labels(*, generation: Generation | None = None) -> dict[int, list[Label]]:
    """Solution id -> its submitted labels, for solutions two or more labelers labeled."""
    # One query, from the count the queues keep (Solution.labels_submitted, a partial index on
    # it) to each label's tally: a group-by over every label took a second at 100,000 labels,
    # and lists of thousands of ids sent back and forth a fifth of one (issue 44).
    sessions = LabelingSession.objects.filter(
        submitted_at__isnull=False, solution__labels_submitted__gte=2
    )
    if generation is not None:
        sessions = sessions.filter(solution__generation=generation)
    return {
        solution_id: labels
        for solution_id, labels in labels_of(sessions, tallied=True).items()
        if len({label.labeler_id for label in labels}) >= 2
    }


@dataclass
class OverlapProgress:
    share: float  # the generation's setting
    labelers: int
    solutions: int  # solutions to be labeled by several labelers
    done: int  # of them, those with every label they want


def overlap_progress(*, generation: Generation) -> OverlapProgress:
    """How far the generation's overlapping solutions are from all their labels."""
    wanted = (
        Solution.objects.filter(generation=generation, labels_wanted__gt=1)
        .annotate(labels=Count("sessions", filter=Q(sessions__submitted_at__isnull=False)))
        .values_list("labels_wanted", "labels")
    )
    rows = list(wanted)
    return OverlapProgress(
        share=generation.params.get("overlap_share", 0.0),
        labelers=generation.params.get("overlap_labelers", 2),
        solutions=len(rows),
        done=sum(labels >= want for want, labels in rows),
    )


# --- the figures -------------------------------------------------------------------------------


METRICS = ("nominal", "ordinal", "interval")


def _distance(totals: Counter, metric: str) -> Callable[[int, int], float]:
    """Krippendorff's squared difference δ² between two values under `metric` (2011, section
    "difference functions"); the ordinal one reads the ranks off every pairable value."""
    if metric == "nominal":
        return lambda a, b: float(a != b)
    if metric == "interval":
        return lambda a, b: float((a - b) ** 2)
    if metric == "ordinal":
        values = sorted(totals)
        rank = {value: i for i, value in enumerate(values)}
        through = list(accumulate(totals[value] for value in values))  # n of values <= each

        def ordinal(a, b) -> float:
            low, high = sorted((rank[a], rank[b]))
            between = through[high] - (through[low - 1] if low else 0)
            return (between - (totals[a] + totals[b]) / 2) ** 2

        return ordinal
    raise ValueError(f"Unknown metric {metric!r}: one of {', '.join(METRICS)}.")


def krippendorff_alpha(
    units: list[list[tuple[int, int]]], *, labeler_id: int | None = None, metric: str = "nominal"
) -> float | None:
    """Alpha of `units`, each a list of (labeler id, value), at the `metric` level of
    measurement (nominal, ordinal or interval); see the module docstring for `labeler_id`.
    Computed from the coincidences of paired values (Krippendorff 2011)."""
    pairable = [unit for unit in units if len(unit) >= 2]
    totals = Counter(value for unit in pairable for _, value in unit)
    n = sum(totals.values())
    if n < 2:
        return None
    delta = _distance(totals, metric)
    expected = sum(totals[a] * totals[b] * delta(a, b) for a in totals for b in totals) / (
        n * (n - 1)
    )
    weight = disagreeing = 0.0
    for unit in pairable:
        share = 1 / (len(unit) - 1)
        for (a, value_a), (b, value_b) in combinations(unit, 2):
            if labeler_id is not None and labeler_id not in (a, b):
                continue
            weight += 2 * share
            disagreeing += 2 * share * delta(value_a, value_b)
    if expected == 0 or weight == 0:
        return None
    return 1 - (disagreeing / weight) / expected


def alpha_by_labeler(units: list[list[tuple[int, int]]]) -> dict[int, float | None]:
    """Labeler id -> `krippendorff_alpha(units, labeler_id=...)` (nominal), all in one pass."""
    pairable = [unit for unit in units if len(unit) >= 2]
    totals = Counter(value for unit in pairable for _, value in unit)
    n = sum(totals.values())
    weight: Counter = Counter()
    disagreeing: Counter = Counter()
    for unit in pairable:
        share = 2 / (len(unit) - 1)
        for (a, value_a), (b, value_b) in combinations(unit, 2):
            for labeler in {a, b}:
                weight[labeler] += share
                disagreeing[labeler] += share * (value_a != value_b)
    if n < 2:
        return dict.fromkeys(weight)
    expected = sum(totals[a] * totals[b] * (a != b) for a in totals for b in totals) / (n * (n - 1))
    return {
        labeler: None if expected == 0 or not w else 1 - (disagreeing[labeler] / w) / expected
        for labeler, w in weight.items()
    }


Unit = list[tuple[int, int]]  # (labeler id, rating) of one step


def units_by_solution(labels_by_solution: dict[int, list[Label]]) -> dict[int, list[Unit]]:
    """Solution id -> one unit per rated step: each labeler's rating of it (their first label).
    Read once, the quality page's figures (per labeler, per generation) share them."""
    result: dict[int, list[Unit]] = {}
    for solution_id, labels in labels_by_solution.items():
        steps: dict[int, dict[int, int]] = defaultdict(dict)
        for label in labels:
            for index, rating in label.ratings.items():
                steps[index].setdefault(label.labeler_id, rating)
        result[solution_id] = [list(unit.items()) for unit in steps.values()]
    return result


def _units(
    labels_by_solution: dict[int, list[Label]], known: dict[int, list[Unit]] | None = None
) -> list[Unit]:
    """The units of these solutions' labels (`known`: `units_by_solution` of a superset)."""
    known = units_by_solution(labels_by_solution) if known is None else known
    return [unit for solution_id in labels_by_solution for unit in known[solution_id]]


@dataclass
class Figures:
    solutions: int = 0  # solutions with labels of two or more labelers
    first_error_pairs: int = 0  # pairs of complete labels
    first_error_agreed: int = 0
    step_pairs: int = 0  # steps both labels of a pair rated
    steps_agreed: int = 0
    alpha: float | None = None

    @property
    def first_error_agreement(self) -> float | None:
        return self.first_error_agreed / self.first_error_pairs if self.first_error_pairs else None

    @property
    def per_step_agreement(self) -> float | None:
        return self.steps_agreed / self.step_pairs if self.step_pairs else None


def figures(
    labels_by_solution: dict[int, list[Label]],
    *,
    labeler_id: int | None = None,
    units: list[list[tuple[int, int]]] | None = None,
) -> Figures:
    """Agreement over the given solutions' labels; with `labeler_id`, that labeler's.

    `units`: the alpha's units of these labels when the caller already has them (`_units`).
    """
    result = Figures()
    for labels in labels_by_solution.values():
        pairs = [
            (a, b)
            for a, b in combinations(labels, 2)
            if a.labeler_id != b.labeler_id
            and (labeler_id is None or labeler_id in (a.labeler_id, b.labeler_id))
        ]
        if not pairs:
            continue
        result.solutions += 1
        for a, b in pairs:
            if a.is_complete and b.is_complete:
                result.first_error_pairs += 1
                result.first_error_agreed += a.first_error == b.first_error
            for index in a.ratings.keys() & b.ratings.keys():
                result.step_pairs += 1
                result.steps_agreed += a.ratings[index] == b.ratings[index]
    units = _units(labels_by_solution) if units is None else units
    result.alpha = krippendorff_alpha(units, labeler_id=labeler_id)
    return result


@dataclass
class GenerationAgreement:
    generation: Generation | None  # None: solutions of no generation (imported)
    figures: Figures


def agreement_by_generation(
    labels: dict[int, list[Label]] | None = None, units: dict[int, list[Unit]] | None = None
) -> list[GenerationAgreement]:
    """Agreement between labelers within each generation that has overlapping labels
    (`labels`: `overlapping_labels()`, and `units` their `units_by_solution`, when the caller
    has read them already)."""
    grouped: dict[int | None, dict[int, list[Label]]] = defaultdict(dict)
    for solution_id, group in (overlapping_labels() if labels is None else labels).items():
        grouped[group[0].generation_id][solution_id] = group
    generations = Generation.objects.in_bulk([pk for pk in grouped if pk is not None])
    rows = [
        GenerationAgreement(
            generation=generations.get(pk),
            figures=figures(
                by_solution, units=None if units is None else _units(by_solution, units)
            ),
        )
        for pk, by_solution in grouped.items()
    ]
    return sorted(rows, key=lambda row: row.generation.number if row.generation else -(10**9))


def peer_agreement_by_labeler(
    labels: dict[int, list[Label]] | None = None, units: dict[int, list[Unit]] | None = None
) -> dict[int, Figures]:
    """Labeler id -> their agreement with the other labelers of the same solutions
    (`labels`: `overlapping_labels()`, and `units` their `units_by_solution`, when the caller
    has read them already): for each, what
    `figures(their solutions, labeler_id=...)` gives, every labeler in one pass over the pairs
    (a pass per labeler was most of the quality page's time at 100,000 labels)."""
    labels = overlapping_labels() if labels is None else labels
    result: dict[int, Figures] = {}
    for group in labels.values():
        involved: set[int] = set()
        for label in group:
            result.setdefault(label.labeler_id, Figures())
        for a, b in combinations(group, 2):
            if a.labeler_id == b.labeler_id:
                continue
            complete = a.is_complete and b.is_complete
            agreed = complete and a.first_error == b.first_error
            common = a.ratings.keys() & b.ratings.keys()
            same = sum(a.ratings[index] == b.ratings[index] for index in common)
            for labeler_id in (a.labeler_id, b.labeler_id):
                mine = result[labeler_id]
                mine.first_error_pairs += complete
                mine.first_error_agreed += agreed
                mine.step_pairs += len(common)
                mine.steps_agreed += same
                involved.add(labeler_id)
        for labeler_id in involved:
            result[labeler_id].solutions += 1
    # Every labeler's alpha in one pass over the units: one pass per labeler took a second.
    for labeler_id, alpha in alpha_by_labeler(_units(labels, units)).items():
        if labeler_id in result:
            result[labeler_id].alpha = alpha
    return result


# --- one label per solution for training ------------------------------------------------------


def training_label(labels: list[Label], *, gold: list[int] | None = None) -> Label:
    """The label training uses of one solution's labels (earliest submitted first)."""
    adjudicated = [label for label in labels if label.adjudicated]
    if adjudicated:
        return adjudicated[0]
    complete = [label for label in labels if label.is_complete]
    if not complete:
        return labels[0]
    if gold:
        agreeing = [label for label in complete if label.first_error == first_error(gold)]
        if agreeing:
            return agreeing[0]
    votes = Counter(label.first_error for label in complete)
    # Most votes, then the earlier error; "no error" (None) sorts after every step.
    wanted = min(votes, key=lambda fe: (-votes[fe], float("inf") if fe is None else fe))
    return next(label for label in complete if label.first_error == wanted)


def training_sessions(sessions: QuerySet[LabelingSession]) -> set[int]:
    """Of the given submitted sessions, the ids training uses: one per solution."""
    rows = list(sessions.order_by().values_list("pk", "solution_id"))
    count = Counter(solution_id for _, solution_id in rows)
    keep = {pk for pk, solution_id in rows if count[solution_id] == 1}
    several = [solution_id for solution_id, n in count.items() if n > 1]
    if several:
        chosen = sessions.filter(solution_id__in=several)
        gold = dict(chosen.values_list("solution_id", "solution__gold_ratings"))
        for solution_id, labels in labels_of(chosen).items():
            keep.add(training_label(labels, gold=gold.get(solution_id)).session_id)
    return keep


# --- labels side by side -----------------------------------------------------------------------


def disagree(labels: list[Label]) -> bool:
    """Whether two labelers' labels differ on the first error or on a step both rated."""
    for a, b in combinations(labels, 2):
        if a.labeler_id == b.labeler_id:
            continue
        if a.is_complete and b.is_complete and a.first_error != b.first_error:
            return True
        if any(a.ratings[i] != b.ratings[i] for i in a.ratings.keys() & b.ratings.keys()):
            return True
    return False


@dataclass
class ComparedStep:
    index: int
    text: str
    ratings: list[int | None]  # each label's, None where it did not rate the step

    @property
    def differs(self) -> bool:
        return len({rating for rating in self.ratings if rating is not None}) > 1


@dataclass
class Comparison:
    """One solution's labels side by side: a row per step, a column per label."""

    solution: Solution
    labels: list[Label]
    labelers: list[Labeler]  # of each label, in order
    training: Label  # the label training uses
    disagree: bool
    rows: list[ComparedStep]

    @property
    def labels_with_labelers(self) -> list[tuple[Label, Labeler]]:
        return list(zip(self.labels, self.labelers, strict=True))


def comparisons(*, generation: Generation | None = None) -> list[tuple[int, bool]]:
    """(solution id, disagree) of every solution with several labels: disagreements first,
    newest solution first within each. `comparison` builds one page's rows."""
    rows = [
        (solution_id, disagree(labels))
        for solution_id, labels in overlapping_labels(generation=generation).items()
    ]
    return sorted(rows, key=lambda row: (not row[1], -row[0]))


def comparison_page(solution_ids: list[int]) -> list[Comparison]:
    """The side-by-side rows of the given solutions, in the given order."""
    labels = labels_of(
        LabelingSession.objects.filter(solution_id__in=solution_ids, submitted_at__isnull=False)
    )
    solutions = Solution.objects.select_related("problem").in_bulk(solution_ids)
    labeler_ids = {label.labeler_id for group in labels.values() for label in group}
    labelers = Labeler.objects.select_related("user").in_bulk(labeler_ids)
    page = []
    for solution_id in solution_ids:
        solution, group = solutions[solution_id], labels.get(solution_id, [])
        if not group:
            continue
        page.append(
            Comparison(
                solution=solution,
                labels=group,
                labelers=[labelers[label.labeler_id] for label in group],
                training=training_label(group, gold=solution.gold_ratings),
                disagree=disagree(group),
                rows=[
                    ComparedStep(index, text, [label.ratings.get(index) for label in group])
                    for index, text in enumerate(solution.steps)
                    if any(index in label.ratings for label in group)
                ],
            )
        )
    return page
