"""What a labeler sees of the judge, and whether it moves them.

Each generation says what its labelers see of the judge labels of its solutions
(`Generation.judge_display`, chosen with the generation's other selection parameters):

- *hidden* (the default): nothing. Judge labels only route (the `disagreement` strategy) and
  measure (the quality page). Neither the page, its source nor the session's API carry them.
- *revealed*: once the labeler has rated a step, the judge's rating and reason for it are
  shown beside it (the labeler may still go back and change theirs).
- *confirm*: the judge's rating is shown before, as a suggestion on the step to rate; the
  labeler still rates it themselves (confirming is choosing the same rating), and nothing is
  stored until they press or click.

The judge labels shown are the newest judge run's that labeled the solution
(`newest_judge_labels`: the trainer's judging room registers its selector here, since labeling
cannot import it), fixed on the session when first shown (`LabelingSession.judge_run`): a run
finishing while the labeler works changes neither what they see nor what is stored. A
per_step run gives a reason per step; a first_error run gives ratings up to its first -1,
with no reason but "the first wrong step".

Each human rating of a solution's own step keeps beside it what was shown with it
(`StepRating.judge_display`, `judge_rating`, `judge_run`), so the quality page can tell,
display by display, how often labelers agree with the judge (`agreement_by_display`): in
hidden mode against the newest judge label of the step, in the others against the judge
rating that was shown; in confirm mode, the share of suggestions the labeler changed.
"""

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from django.db.models import QuerySet

from labeling import tallies
from labeling.agreement import krippendorff_alpha
from labeling.models import Generation, JudgeDisplay, LabelingSession, StepRating

HIDDEN, REVEALED, CONFIRM = JudgeDisplay.HIDDEN, JudgeDisplay.REVEALED, JudgeDisplay.CONFIRM
# Hidden ratings are matched with the newest judge labels this many at a time: an import of
# PRM800K holds a million of them, nearly all of solutions no judge has labeled.
CHUNK = 5000


@dataclass(frozen=True)
class JudgeShown:
    """A judge's label of one step as a labeler may see it."""

    rating: int
    reason: str
    run_id: int


# solution ids -> solution id -> step index -> the newest judge run's label of it.
Reader = Callable[..., dict[int, dict[int, JudgeShown]]]
_readers: list[Reader] = []
# () -> a query of the ids of the solutions some judge run labeled.
Judged = Callable[[], QuerySet]
_judged: list[Judged] = []


def register_reader(reader: Reader, *, judged: Judged) -> None:
    """Set the selectors of the newest judge labels and of the solutions judged
    (`trainer.judging.selectors`)."""
    _readers[:] = [reader]
    _judged[:] = [judged]


def newest_judge_labels(
    *, solution_ids: Iterable[int], run_id: int | None = None
) -> dict[int, dict[int, JudgeShown]]:
    """Solution id -> step index -> the newest judge run's label (or run `run_id`'s); empty
    without a judge."""
    return _readers[0](solution_ids=solution_ids, run_id=run_id) if _readers else {}


@dataclass(frozen=True)
class Shown:
    """What a session's labeler sees of the judge: the display in force and, unless hidden,
    the newest judge labels of its solution by step index."""

    display: str
    labels: dict[int, JudgeShown] = field(default_factory=dict)

    def beside(self, index: int, *, rated: bool) -> JudgeShown | None:
        """The judge label shown beside step `index` (rated by the labeler or not)."""
        if self.display == CONFIRM or (self.display == REVEALED and rated):
            return self.labels.get(index)
        return None

    def suggestion(self, index: int) -> int | None:
        """The rating suggested on step `index`'s buttons (confirm only)."""
        label = self.labels.get(index) if self.display == CONFIRM else None
        return None if label is None else label.rating

    def recorded(self, index: int) -> dict:
        """What a rating of step `index` stores of the judge: the display in force, and the
        judge rating shown with it (suggested before, or revealed after) and its run."""
        label = None if self.display == HIDDEN else self.labels.get(index)
        return {
            "judge_display": self.display,
            "judge_rating": None if label is None else label.rating,
            "judge_run_id": None if label is None else label.run_id,
        }


def shown(session: LabelingSession) -> Shown:
    """What `session`'s labeler sees of the judge; read once per request (kept on the session,
    so a rating and the answer that renders it read it once)."""
    found = getattr(session, "judge_shown", None)
    if found is not None:
        return found
    display = HIDDEN
    if session.generation_id is not None:
        # Read with the locked session by a rating (`locked_session`), else here.
        display = getattr(session, "generation_judge_display", None)
        if display is None:
            display = (
                Generation.objects.filter(pk=session.generation_id)
                .values_list("judge_display", flat=True)
                .first()
            ) or HIDDEN
    labels = {} if display == HIDDEN else _pinned_labels(session)
    found = Shown(display=display, labels=labels)
    session.judge_shown = found
    return found


def _pinned_labels(session: LabelingSession) -> dict[int, JudgeShown]:
    """The labels of the judge run the session shows: the one fixed when it was first shown,
    else the newest, which is fixed now (the first request to fix one wins a race)."""
    solution_id = session.solution_id
    if session.judge_run_id is not None:
        labels = newest_judge_labels(solution_ids=[solution_id], run_id=session.judge_run_id)
        if labels:
            return labels[solution_id]
    labels = newest_judge_labels(solution_ids=[solution_id]).get(solution_id, {})
    if not labels:
        return {}
    run_id = next(iter(labels.values())).run_id
    fixed = LabelingSession.objects.filter(pk=session.pk)
    if fixed.filter(judge_run__isnull=True).update(judge_run_id=run_id):
        session.judge_run_id = run_id
        return labels
    session.judge_run_id = fixed.values_list("judge_run_id", flat=True).first()
    if session.judge_run_id in (None, run_id):
        return labels
    return newest_judge_labels(solution_ids=[solution_id], run_id=session.judge_run_id).get(
        solution_id, {}
    )


# --- agreement with the judge, per display ------------------------------------------------------


@dataclass
class JudgeAgreement:
    """Human ratings against the judge's, for the ratings made under one display."""

    display: str
    ratings: int = 0  # submitted human ratings of solutions' own steps under this display
    steps: int = 0  # of them, those with a judge rating to compare
    agreed: int = 0
    alpha: float | None = None  # Krippendorff's alpha (nominal), human vs judge

    @property
    def title(self) -> str:
        return JudgeDisplay(self.display).label

    @property
    def agreement(self) -> float | None:
        return self.agreed / self.steps if self.steps else None

    @property
    def changed(self) -> int | None:
        """Confirm only: suggestions the labeler changed (rated otherwise than suggested)."""
        return self.steps - self.agreed if self.display == CONFIRM else None

    @property
    def changed_share(self) -> float | None:
        changed = self.changed
        return changed / self.steps if changed is not None and self.steps else None


def agreement_by_display() -> list[JudgeAgreement]:
    """Per display, hidden first: submitted human ratings of solutions' own steps against the
    judge. Hidden ones are compared with the newest judge label of their step (nothing was
    shown, so this is what the judge says now); revealed and confirm ones with the judge
    rating that was shown with them."""
    pairs: dict[str, list[tuple[int, int]]] = defaultdict(list)
    unshown: list[tuple[int, int, int]] = []  # hidden: (solution, step, human), a chunk at a time

    def compare_unshown() -> None:
        newest = newest_judge_labels(solution_ids={solution_id for solution_id, _, _ in unshown})
        for solution_id, index, rating in unshown:
            judged = newest.get(solution_id, {}).get(index)
            if judged is not None:
                pairs[HIDDEN].append((rating, judged.rating))
        unshown.clear()

    ratings = StepRating.objects.filter(
        completion_index=0, rating__isnull=False, step__session__submitted_at__isnull=False
    )
    # A PRM800K import holds a million ratings, nearly all hidden and of solutions no judge has
    # labeled, which are only counted: added up from each label's kept counts (labeling/tallies).
    counts = tallies.ratings_by_display()
    shown_rows = ratings.exclude(judge_display=HIDDEN).filter(judge_rating__isnull=False)
    for display, rating, judge in shown_rows.values_list("judge_display", "rating", "judge_rating"):
        pairs[display].append((rating, judge))
    if _judged:
        hidden = ratings.filter(
            judge_display=HIDDEN, step__session__solution_id__in=_judged[0]()
        ).values_list("step__session__solution_id", "step__index", "rating")
        for solution_id, index, rating in hidden.iterator(chunk_size=CHUNK):
            unshown.append((solution_id, index, rating))
            if len(unshown) >= CHUNK:
                compare_unshown()
        compare_unshown()
    result = []
    for display in JudgeDisplay.values:
        compared = pairs[display]
        result.append(
            JudgeAgreement(
                display=display,
                ratings=counts.get(display, 0),
                steps=len(compared),
                agreed=sum(human == judge for human, judge in compared),
                # One unit per step: the human (0) and the judge (1).
                alpha=krippendorff_alpha([[(0, human), (1, judge)] for human, judge in compared]),
            )
        )
    return result
