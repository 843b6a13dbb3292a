"""The annotation domain: problems, solutions, generations, labelers, sessions and ratings.

One module over 500 lines because Django reads an app's models from one place and these tables
refer to each other (a session's solution, a step's session, a rating's step).

Invariants live in the database (CHECK and partial UNIQUE constraints) so that concurrent
requests, workers and imports cannot break them, whatever code path they take.
"""

import hashlib
import json
import unicodedata
import uuid

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import F, Q, Value
from django.db.models.functions import Coalesce

from core.jobs import Job, status_constraint
from core.prm800k import RATINGS
from labeling.shown_text import shown_text


def text_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def problem_key(text: str) -> str:
    """A problem's identity whatever route its text came by: the digest of its NFKC form
    with whitespace collapsed, so `x²` and `x2`, full-width digits, a non-breaking space or
    a doubled space do not make another problem (evaluation items are never trained on)."""
    return text_digest(" ".join(unicodedata.normalize("NFKC", text).split()))


def solution_digest(*, steps: list[str], answer: str) -> str:
    return text_digest(json.dumps([steps, answer], ensure_ascii=False))


# MATH's difficulty levels ("Level 1" to "Level 5"); a problem may have none.
PROBLEM_LEVELS = (1, 5)


class ProblemManager(models.Manager):
    def bulk_create(self, objs, *args, **kwargs):
        # Every route that stores problems in bulk gets the searchable text save() derives.
        objs = list(objs)
        for problem in objs:
            problem.shown_text = shown_text(problem.text)
        return super().bulk_create(objs, *args, **kwargs)


class Problem(models.Model):
    text = models.TextField()
    # The text as the page shows it (TeX drawn), which search reads (labeling/shown_text.py).
    shown_text = models.TextField(blank=True, default="", editable=False)
    # PRM800K lines name their problem only by its text, so the text is the natural key.
    text_hash = models.CharField(max_length=64, unique=True, editable=False)
    answer = models.TextField(help_text="Ground-truth final answer.")
    solution = models.TextField(blank=True, help_text="Ground-truth worked solution.")
    subject = models.CharField(max_length=64, blank=True)
    # The validators are the limits every entry checks (imports name FILE:LINE, the API's
    # bulk create answers 400, the admin's form refuses); the constraint holds them for the
    # rest.
    level = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(PROBLEM_LEVELS[0]), MaxValueValidator(PROBLEM_LEVELS[1])],
        help_text="MATH difficulty, 1 to 5; empty if unknown.",
    )
    unique_id = models.CharField(max_length=255, unique=True, null=True, blank=True)
    split = models.CharField(max_length=32, blank=True)
    is_bad = models.BooleanField(default=False, help_text="Reported bad by a labeler.")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = ProblemManager()

    class Meta:
        ordering = ["id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(level__isnull=True) | Q(level__range=PROBLEM_LEVELS),
                name="problem_level_math_range",
            ),
        ]

    def __str__(self) -> str:
        return self.unique_id or self.text[:60]

    def save(self, *args, **kwargs):
        self.text_hash = text_digest(self.text)
        self.shown_text = shown_text(self.text)
        super().save(*args, **kwargs)


class JudgeDisplay(models.TextChoices):
    """What a generation's labelers see of the judge labels of its solutions."""

    # Judge labels only route and measure; the labeler sees nothing of them.
    HIDDEN = "hidden", "Hidden"
    # The judge's rating and reason of a step, shown once the labeler has rated it.
    REVEALED = "revealed", "Revealed after rating"
    # The judge's rating shown before, as a suggestion the labeler confirms or changes.
    CONFIRM = "confirm", "Suggested, to confirm"


class Generation(models.Model):
    """One round of selecting solutions to label. Screening questions use number -1."""

    SCREENING = -1

    number = models.IntegerField(unique=True)
    model_version = models.ForeignKey(
        "trainer.ModelVersion", null=True, blank=True, on_delete=models.SET_NULL
    )
    params = models.JSONField(default=dict, blank=True)

    class Mode(models.TextChoices):
        # PRM800K phase 2: labelers rate the steps of solutions already in the pool.
        RATE = "rate", "Rate given solutions"
        # PRM800K phase 1: a generator proposes next steps live; the labeler rates them,
        # chooses one to continue from, or writes their own.
        LIVE = "live", "Live proposals"

    mode = models.CharField(max_length=8, choices=Mode.choices, default=Mode.RATE)
    # What its labelers see of the judge labels of its solutions (labeling.judge_display).
    JudgeDisplay = JudgeDisplay
    judge_display = models.CharField(
        max_length=8, choices=JudgeDisplay.choices, default=JudgeDisplay.HIDDEN
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["number"]
        constraints = [
            models.CheckConstraint(
                condition=Q(mode__in=["rate", "live"]), name="generation_mode_known"
            ),
            models.CheckConstraint(
                condition=Q(judge_display__in=JudgeDisplay.values),
                name="generation_judge_display_known",
            ),
            # A live generation's solutions are written while they are labeled: no judge has
            # rated them, so there is nothing to show.
            models.CheckConstraint(
                condition=Q(mode="rate") | Q(judge_display=JudgeDisplay.HIDDEN),
                name="generation_live_judge_hidden",
            ),
        ]

    def __str__(self) -> str:
        return f"generation {self.number}"


class SelectionReason(models.TextChoices):
    """Why active learning put a solution into its generation (trainer/selection/services.py)."""

    WRONG_ANSWER_CONVINCING = "wrong_answer_convincing", "Convincing wrong answer"
    CONVINCING = "convincing", "Convincing"
    UNIFORM = "uniform", "Uniform sample"
    UNCERTAINTY = "uncertainty", "Uncertain score"
    DISAGREEMENT = "disagreement", "Sources disagree"
    QUALITY_CONTROL = "quality_control", "Quality control"


def validate_gold_ratings(value) -> None:
    """Gold is a label as PRM800K phase 2 records it: ratings in {-1, 0, 1}, stopping at -1."""
    if value is None:
        return
    if not isinstance(value, list) or not value:
        raise ValidationError("Gold ratings are a non-empty list such as [1, 0, -1].")
    if any(isinstance(r, bool) or r not in RATINGS for r in value):
        raise ValidationError("Each gold rating is -1, 0 or 1.")
    if -1 in value[:-1]:
        raise ValidationError("Gold ratings end at the first -1.")


# Solutions per statement when many are written at once (scores, a generation's selection):
# large enough to amortise the round trip, small enough to keep one statement's parameters few.
SOLUTION_WRITE_CHUNK = 500

# A solution the labeling queues may still serve: quality control and screening (served to every
# labeler), and the rest while they have fewer labels than wanted. The queues' partial indexes
# hold these rows alone, so serving the next solution walks past no labeled one, however much
# of the pool is labeled. (Which of them a labeler may take is still decided by its sessions,
# see `Solution.labels_submitted`.)
IN_QUEUES = (
    Q(labels_submitted__lt=F("labels_wanted")) | Q(is_quality_control=True) | Q(is_screening=True)
)


class Solution(models.Model):
    """A candidate solution to label: ordered steps ending in a final answer."""

    problem = models.ForeignKey(Problem, on_delete=models.CASCADE, related_name="solutions")
    steps = models.JSONField(help_text="Ordered list of step texts.")
    answer = models.TextField(blank=True, help_text="The solution's final answer.")
    content_hash = models.CharField(max_length=64, editable=False)
    # None is "ungraded": no final answer could be read, or the problem has no ground truth.
    # Such a solution is neither right nor wrong (`labeling/grading/verdicts.py`, `regrade`).
    is_correct = models.BooleanField(
        null=True, blank=True, help_text="Final answer equals the ground truth; empty if ungraded."
    )
    source = models.CharField(max_length=128, blank=True, help_text="Model that wrote it.")
    source_score = models.FloatField(
        null=True, blank=True, help_text="Score the source attached (PRM800K verifier score)."
    )
    prm_score = models.FloatField(null=True, blank=True, help_text="Latest PRM score.")
    prm_step_scores = models.JSONField(
        null=True, blank=True, help_text="Per-step PRM scores from the same model version."
    )
    prm_model_version = models.ForeignKey(
        "trainer.ModelVersion",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="scored_solutions",
        help_text="The model version that wrote prm_score and prm_step_scores.",
    )
    alternatives = models.JSONField(
        default=dict,
        blank=True,
        help_text='Alternative completions per step index, e.g. {"3": ["other step 4 text"]}.',
    )
    generation = models.ForeignKey(
        Generation, null=True, blank=True, on_delete=models.SET_NULL, related_name="solutions"
    )
    is_quality_control = models.BooleanField(default=False)
    is_screening = models.BooleanField(default=False)
    gold_ratings = models.JSONField(
        null=True,
        blank=True,
        validators=[validate_gold_ratings],
        help_text="The correct rating of each step, up to and including the first -1, "
        "e.g. [1, 0, -1]. Labelers' agreement is measured against it.",
    )
    priority = models.FloatField(default=0.0, help_text="Higher is served first.")
    labels_wanted = models.PositiveSmallIntegerField(
        default=1,
        validators=[MinValueValidator(1)],
        help_text="How many labelers label it: more than one for its generation's overlap share.",
    )
    # Counted by the workbench's submission, in its transaction; labels stored or deleted
    # otherwise (an import, an admin) are counted again by
    # `labeling.services.workbench.recount_labels`. The queues' indexes are partial on it
    # (IN_QUEUES). Behind the sessions, a labeled solution is only walked past; ahead of them
    # (a label deleted and not recounted), the solution waits for the recount.
    labels_submitted = models.PositiveIntegerField(
        default=0, editable=False, help_text="Its submitted labels, counted as they come in."
    )
    # What selected it into `generation` (empty for imported solutions): the model version
    # whose scores were used, its score then (prm_score may have changed since) and why.
    selection_model_version = models.ForeignKey(
        "trainer.ModelVersion",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="selected_solutions",
        help_text="The model version whose scores selected it into its generation.",
    )
    selection_score = models.FloatField(
        null=True, blank=True, help_text="Its PRM score when it was selected."
    )
    selection_reason = models.CharField(
        max_length=32, choices=SelectionReason.choices, blank=True, help_text="Why it was selected."
    )
    # Set for solutions a generator wrote inside stepwise: the run records the model and the
    # sampling settings (`source` names the model too, as for imported solutions).
    sampling_run = models.ForeignKey(
        "trainer.SamplingRun",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="solutions",
        help_text="The sampling run that wrote it.",
    )
    meta = models.JSONField(default=dict, blank=True, help_text="Import keys not modelled.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        indexes = [
            # The leftover labeling queue walks this index and stops at the first free
            # solution, instead of sorting the whole pool for every session served; partial, so
            # that labeled solutions are not in it to walk past.
            # (COALESCE rather than NULLS LAST, which SQLite's CREATE INDEX does not accept.)
            models.Index(
                Coalesce("generation_id", Value(0)).desc(),
                F("id"),
                name="solution_leftover_order",
                condition=IN_QUEUES,
            ),
            # The current generation's queue, in its order, likewise.
            models.Index(
                fields=["generation", "-priority", "id"],
                name="solution_generation_queue",
                condition=IN_QUEUES,
            ),
            # The screening and quality-control queues are a handful of rows in a large pool.
            models.Index(fields=["id"], condition=Q(is_screening=True), name="solution_screening"),
            models.Index(
                fields=["id"], condition=Q(is_quality_control=True), name="solution_quality_control"
            ),
            # The quality figures' few rows of a large pool: solutions labeled more than once
            # (agreement between labelers) and those with gold (docs/benchmarks.md).
            models.Index(
                fields=["id"], condition=Q(labels_submitted__gte=2), name="solution_labeled_twice"
            ),
            models.Index(
                fields=["id"], condition=Q(gold_ratings__isnull=False), name="solution_gold"
            ),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["problem", "content_hash"], name="solution_unique_per_problem"
            ),
            models.CheckConstraint(
                condition=Q(selection_reason__in=["", *SelectionReason.values]),
                name="solution_selection_reason_known",
            ),
            models.CheckConstraint(
                condition=Q(labels_wanted__gte=1), name="solution_labels_wanted_positive"
            ),
        ]

    def __str__(self) -> str:
        return f"solution {self.pk} of {self.problem}"

    def save(self, *args, **kwargs):
        self.content_hash = solution_digest(steps=self.steps, answer=self.answer)
        trajectory = (self.meta or {}).get("trajectory")
        if trajectory:
            # A live (phase-1) trajectory is one labeler's path, not a candidate to share:
            # two labelers may take the same path, and every path starts empty. Its token
            # keeps it apart from every other solution of the problem.
            self.content_hash = text_digest(f"{self.content_hash}:{trajectory}")
        super().save(*args, **kwargs)

    def clean(self) -> None:
        super().clean()
        gold = self.gold_ratings
        if gold and isinstance(self.steps, list):
            if len(gold) > len(self.steps):
                raise ValidationError({"gold_ratings": "More gold ratings than steps."})
            if gold[-1] != -1 and len(gold) != len(self.steps):
                raise ValidationError({"gold_ratings": "Without a -1, gold rates every step."})


class Labeler(models.Model):
    """A user who labels. Exports name labelers by `uuid` only, never by username."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="labeler"
    )
    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)

    def __str__(self) -> str:
        return str(self.uuid)


class UsernameSkeleton(models.Model):
    """Every user's username identity (core.usernames): unique, so look-alike names racing in
    through two requests cannot both be saved (labeling.services.usernames keeps it)."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="username_skeleton",
    )
    skeleton = models.CharField(max_length=600, unique=True)

    def __str__(self) -> str:
        return self.skeleton


class FinishReason(models.TextChoices):
    FOUND_ERROR = "found_error", "Found an error"
    SOLUTION = "solution", "Reached the solution"
    BAD_PROBLEM = "bad_problem", "Bad problem"
    GIVE_UP = "give_up", "Gave up"


# A submitted label whose tally does not hold: reopened for a correction, never counted, or
# counted from another version (labeling.tallies; the index below holds just these rows).
LABEL_VERSION = Coalesce(F("edited_at"), F("submitted_at"))
UNTALLIED = Q(submitted_at__isnull=False) & (
    Q(reopened_at__isnull=False)
    | Q(tallied_version__isnull=True)
    | Q(tallied_version__lt=LABEL_VERSION)
    | Q(tallied_version__gt=LABEL_VERSION)
)


class LabelingSession(models.Model):
    """A labeling session: one labeler working on one solution, its lease and its outcome."""

    labeler = models.ForeignKey(Labeler, on_delete=models.PROTECT, related_name="sessions")
    solution = models.ForeignKey(Solution, on_delete=models.CASCADE, related_name="sessions")
    # Snapshots when served: a solution's generation and flags may change later, the
    # session keeps what the labeler was served.
    generation = models.ForeignKey(
        Generation, null=True, blank=True, on_delete=models.PROTECT, related_name="sessions"
    )
    is_quality_control = models.BooleanField(default=False)
    is_screening = models.BooleanField(default=False)
    queue = models.CharField(max_length=16, blank=True, help_text="Why it was served.")
    # The judge run whose labels the labeler is shown (a generation whose judge display is not
    # hidden), fixed when first shown: a judge run finishing while they label changes neither
    # what they see nor what is stored beside their ratings (labeling.judge_display).
    judge_run = models.ForeignKey(
        "trainer.JudgeRun",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_index=False,
    )
    # Which of the solution's `labels_wanted` places this session holds (shared queues only):
    # the unique constraint below is what keeps concurrent claims within the overlap.
    slot = models.PositiveSmallIntegerField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    last_activity_at = models.DateTimeField(null=True, blank=True)
    # Set when the lease ran out and the solution went to another labeler.
    abandoned_at = models.DateTimeField(null=True, blank=True)
    submitted_at = models.DateTimeField(null=True, blank=True, db_index=True)
    total_time = models.BigIntegerField(null=True, blank=True, help_text="Milliseconds.")
    finish_reason = models.CharField(max_length=16, choices=FinishReason.choices, blank=True)
    finish_reason_text = models.TextField(blank=True)
    adjudicated_at = models.DateTimeField(
        null=True, blank=True, help_text="When this label was chosen over the solution's others."
    )
    adjudicated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    # A labeler's correction of their submitted label (`labeling.services.corrections`): set
    # while it is reopened (it still counts as submitted and keeps its place); `edited_at` when
    # a correction was last saved; `used_at` when a model version was trained on it, after
    # which it is no longer corrected. Earlier versions are kept in `extra["corrections"]`.
    reopened_at = models.DateTimeField(null=True, blank=True)
    edited_at = models.DateTimeField(null=True, blank=True)
    used_at = models.DateTimeField(null=True, blank=True)
    # The version of this label (`edited_at`, else `submitted_at`) its SessionTally was counted
    # from, set by labeling.tallies only. A label whose mark differs from its version (or that
    # is reopened) is in the partial index `session_untallied`, so finding the labels to count
    # again reads those few rows, not every label (issue 44).
    tallied_version = models.DateTimeField(null=True, blank=True, editable=False)
    # PRM800K keys this schema does not model, and values that differ from what the
    # modelled fields would export, so that import -> export is lossless.
    extra = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            # One open session per labeler (which implies one per labeler and solution): two
            # requests for "my next session" at once get the same one, whatever the code path.
            # A lapsed lease still counts as open until the session is resumed or its place
            # is given to someone else (labeling.services.workbench).
            models.UniqueConstraint(
                fields=["labeler"],
                condition=Q(submitted_at__isnull=True, abandoned_at__isnull=True),
                name="one_open_session_per_labeler",
            ),
            # A solution outside QC and screening is held or labeled by at most its
            # `labels_wanted` labelers: one session per place, abandoned ones free theirs.
            models.UniqueConstraint(
                fields=["solution", "slot"],
                condition=Q(abandoned_at__isnull=True, slot__isnull=False),
                name="one_session_per_solution_slot",
            ),
            # Of several labels of one solution, an admin or researcher may settle on one.
            models.UniqueConstraint(
                fields=["solution"],
                condition=Q(adjudicated_at__isnull=False),
                name="one_adjudicated_label_per_solution",
            ),
        ]
        indexes = [
            models.Index(
                fields=["judge_run"],
                condition=Q(judge_run__isnull=False),
                name="session_judge_run",
            ),
            models.Index(fields=["id"], condition=UNTALLIED, name="session_untallied"),
            # The quality page's labeler figures (labeling.quality.labeler_figures) read only
            # this index, never the wide rows (PostgreSQL; other databases keep the key only).
            models.Index(
                fields=["labeler", "submitted_at"],
                include=["total_time", "last_activity_at"],
                name="session_labeler_figures",
            ),
        ]

    def __str__(self) -> str:
        return f"session {self.pk} ({self.labeler} on solution {self.solution_id})"

    @property
    def is_submitted(self) -> bool:
        return self.submitted_at is not None

    @property
    def is_open(self) -> bool:
        return self.submitted_at is None and self.abandoned_at is None

    @property
    def is_being_corrected(self) -> bool:
        """Submitted, and reopened by its labeler to correct it."""
        return self.submitted_at is not None and self.reopened_at is not None

    @property
    def accepts_ratings(self) -> bool:
        """Whether its labeler may rate it now: open, or reopened for a correction."""
        return self.is_open or self.is_being_corrected


class StepLabel(models.Model):
    """What a labeler did at one step: which completion they chose or what they wrote."""

    # Not "steps": Solution.steps are the step texts; these are one session's labels of them.
    # No index of its own: the unique (session, index) constraint's serves, and a PRM800K
    # import writes a million rows into every index of this table.
    session = models.ForeignKey(
        LabelingSession, on_delete=models.CASCADE, related_name="step_labels", db_index=False
    )
    index = models.PositiveIntegerField()
    chosen_completion = models.IntegerField(null=True, blank=True)
    human_completion = models.JSONField(null=True, blank=True)
    extra = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["session", "index"]
        constraints = [
            models.UniqueConstraint(fields=["session", "index"], name="one_step_label_per_index"),
        ]

    def __str__(self) -> str:
        return f"step {self.index} of session {self.session_id}"


class StepRating(models.Model):
    """A rating of one completion of a step. Completion 0 is the solution's own step."""

    class Rating(models.IntegerChoices):
        BAD = -1, "-1 bad"
        OKAY = 0, "0 okay"
        GOOD = 1, "+1 good"

    # Indexed by the unique (step, completion_index) constraint alone, as StepLabel.session.
    step = models.ForeignKey(
        StepLabel, on_delete=models.CASCADE, related_name="ratings", db_index=False
    )
    completion_index = models.PositiveIntegerField(default=0)
    text = models.TextField()
    # Null only for phase-1 alternatives that were shown but never rated.
    rating = models.SmallIntegerField(choices=Rating.choices, null=True, blank=True)
    flagged = models.BooleanField(null=True, blank=True, help_text="Labeler was unsure.")
    # What the labeler was shown of the judge with this rating (labeling.judge_display): the
    # display in force, and the judge's rating of the step with the run it came from. Hidden
    # for alternatives, which judges do not rate. Never exported in PRM800K lines.
    judge_display = models.CharField(
        max_length=8, choices=JudgeDisplay.choices, default=JudgeDisplay.HIDDEN
    )
    judge_rating = models.SmallIntegerField(
        null=True, blank=True, help_text="The judge's rating shown (suggested or revealed)."
    )
    judge_run = models.ForeignKey(
        "trainer.JudgeRun",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_index=False,  # a partial index below: nearly every rating has none
    )
    extra = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["step", "completion_index"]
        constraints = [
            models.UniqueConstraint(
                fields=["step", "completion_index"], name="one_rating_per_step_completion"
            ),
            models.CheckConstraint(
                condition=Q(rating__isnull=True) | Q(rating__in=list(RATINGS)),
                name="rating_in_domain",
            ),
            models.CheckConstraint(
                condition=Q(judge_display__in=JudgeDisplay.values),
                name="step_rating_judge_display_known",
            ),
            # Hidden shows nothing, so nothing shown is recorded.
            models.CheckConstraint(
                condition=Q(judge_rating__isnull=True)
                | (Q(judge_rating__in=list(RATINGS)) & ~Q(judge_display=JudgeDisplay.HIDDEN)),
                name="step_rating_judge_rating_shown",
            ),
        ]
        indexes = [
            models.Index(
                fields=["judge_run"],
                condition=Q(judge_run__isnull=False),
                name="step_rating_judge_run",
            ),
            # The ratings given with a judge's rating shown, for the agreement with the judge.
            models.Index(
                fields=["step"],
                condition=Q(judge_rating__isnull=False),
                name="step_rating_judge_shown",
            ),
        ]

    def __str__(self) -> str:
        return f"rating {self.rating} of completion {self.completion_index}"


class Guideline(models.Model):
    """Labeling instructions in Markdown (with math); the most recently edited one is shown."""

    title = models.CharField(max_length=200)
    body = models.TextField(help_text="Markdown; $…$ and $$…$$ are rendered as math.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True, db_index=True)

    class Meta:
        ordering = ["-updated_at", "-id"]

    def __str__(self) -> str:
        return self.title


class ImportJob(Job):
    """An uploaded file imported by a worker, all or nothing, with its outcome. A job
    (`core.jobs`): its rows and its success commit together, so a cancel or a dead worker
    leaves nothing imported."""

    class Kind(models.TextChoices):
        PROBLEMS = "problems"
        SOLUTIONS = "solutions"
        PRM800K = "prm800k"
        # Public step-label datasets, imported as labels of their own by the trainer
        # (`trainer.sampling.imported`, which registers its importer: labeling imports no trainer).
        PROCESSBENCH = "processbench", "ProcessBench"
        PRMBENCH = "prmbench", "PRMBench"
        TRL = "trl", "TRL stepwise supervision"

    kind = models.CharField(max_length=16, choices=Kind.choices)
    file_name = models.CharField(max_length=255, help_text="The uploaded file's own name.")
    upload = models.CharField(
        max_length=1024,
        help_text="The uploaded file in the artifact store, a reference `<key>@<sha256>` "
        "(core/store.py); rows made before the store hold an absolute path on the web host.",
    )
    size = models.BigIntegerField(help_text="Bytes.")
    result = models.JSONField(default=dict, blank=True, help_text="Counts of what was stored.")

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [status_constraint(name="import_job_status_known")]

    def __str__(self) -> str:
        return f"import {self.pk} ({self.kind}, {self.status})"


class ProblemReport(models.Model):
    """One labeler's "bad problem" report, made by ending a session with bad_problem.

    A report is a claim, not a verdict: it hides the problem's shared solutions from its
    reporter only. An admin's review closes the open reports of a problem: confirmed (the
    problem is marked bad for everyone) or dismissed (the problem stays in the queues).
    """

    class Status(models.TextChoices):
        OPEN = "open"
        CONFIRMED = "confirmed"
        DISMISSED = "dismissed"

    problem = models.ForeignKey(Problem, on_delete=models.CASCADE, related_name="reports")
    labeler = models.ForeignKey(Labeler, on_delete=models.PROTECT, related_name="reports")
    session = models.OneToOneField(
        LabelingSession, on_delete=models.CASCADE, related_name="problem_report"
    )
    reason = models.TextField()
    created_at = models.DateTimeField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.OPEN)
    reviewed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    reviewed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [
            models.Index(fields=["labeler", "problem"], name="problem_report_by_labeler"),
            models.Index(fields=["status", "problem"], name="problem_report_by_status"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=["open", "confirmed", "dismissed"]),
                name="problem_report_status_known",
            ),
            # Reviewed exactly when closed: an open report has no review, a closed one has
            # its time.
            models.CheckConstraint(
                condition=Q(status="open", reviewed_at__isnull=True)
                | (~Q(status="open") & Q(reviewed_at__isnull=False)),
                name="problem_report_reviewed_when_closed",
            ),
        ]

    def __str__(self) -> str:
        return f"report {self.pk} on problem {self.problem_id} ({self.status})"


class AnswerReview(models.Model):
    """A person's decision on a final answer the grader left ungraded: equal to the problem's
    answer or not. One per solution; it sets `Solution.is_correct`, and grading never
    overwrites it (`labeling/grading/verdicts.py`, `regrade_solutions`). The two texts compared are
    kept as they were, so that the exported pair survives later edits of either."""

    class Verdict(models.TextChoices):
        EQUAL = "equal", "Equal"
        NOT_EQUAL = "not_equal", "Not equal"

    solution = models.OneToOneField(
        Solution, on_delete=models.CASCADE, related_name="answer_review"
    )
    verdict = models.CharField(max_length=16, choices=Verdict.choices)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    decided_at = models.DateTimeField()
    answer = models.TextField(help_text="The solution's final answer when it was decided.")
    ground_truth = models.TextField(help_text="The problem's answer when it was decided.")

    class Meta:
        ordering = ["decided_at", "id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(verdict__in=["equal", "not_equal"]),
                name="answer_review_verdict_known",
            ),
        ]

    def __str__(self) -> str:
        return f"answer review of solution {self.solution_id} ({self.verdict})"


class SessionTally(models.Model):
    """Counts of one submitted label's ratings, kept so that the quality figures add up a row
    per label instead of a row per rating (labeling/tallies.py). A tally holds for the version
    of the label it was counted from (`counted_version`: when it was submitted or last
    corrected); one whose label has changed since is counted again when next read."""

    session = models.OneToOneField(
        LabelingSession, on_delete=models.CASCADE, primary_key=True, related_name="tally"
    )
    # The label's labeler, copied (a label never changes hands): the sums need no join.
    labeler = models.ForeignKey(Labeler, on_delete=models.CASCADE, related_name="+")
    counted_version = models.DateTimeField()
    # Rated steps of the solution's own (completion 0), by what the labeler saw of the judge.
    hidden = models.PositiveIntegerField(default=0)
    revealed = models.PositiveIntegerField(default=0)
    confirm = models.PositiveIntegerField(default=0)
    # Those ratings themselves, a character per step (labeling.tallies.encode: "+0-", "." for
    # a step not rated): agreement between labelers reads a row per label, not ten rows
    # through two joins, and a short string, not JSON to decode.
    ratings = models.TextField(default="", blank=True)

    def __str__(self) -> str:
        return f"tally of session {self.session_id}"
