"""Sampling runs, their items and the rollout labels they make (tables of the trainer app)."""

from django.db import models
from django.db.models import F, Q

from core.jobs import Job, status_constraint


class SamplingRun(Job):
    """A job that draws samples from a generator: N solutions per problem into the pool
    (purpose `solutions`), or k rollouts from each step of chosen solutions (purpose
    `rollouts`, which makes rollout labels). Not a Generation: that is a round of labeling.

    Its items are the problems (or solutions) it works through; each item's output is
    committed with the item marked done, so a worker killed mid-run leaves whole items only,
    and a resumed run does the items not done.
    """

    class Purpose(models.TextChoices):
        SOLUTIONS = "solutions", "Solutions for the pool"
        ROLLOUTS = "rollouts", "Rollout labels"

    class Search(models.TextChoices):
        EVERY_STEP = "every_step", "Every step"
        FIRST_ERROR = "first_error", "First-error search"

    purpose = models.CharField(max_length=16, choices=Purpose.choices)
    search = models.CharField(
        max_length=16,
        choices=Search.choices,
        default=Search.EVERY_STEP,
        help_text="Rollouts from every step, or a binary search for the first bad one.",
    )
    # generators: GeneratorSpec.to_dict() (never the API key) and SamplingSettings.
    generator = models.JSONField(help_text="Backend, model and base URL of the generator.")
    sampling = models.JSONField(help_text="Temperature, top_p, max_tokens and seed.")
    samples = models.PositiveIntegerField(help_text="Solutions per problem, or rollouts per step.")
    # Selection parameters of the generation to select once this run has succeeded (chained
    # runs), or null.
    then_select = models.JSONField(null=True, blank=True)
    stored = models.PositiveIntegerField(
        default=0, help_text="Solutions added to the pool, or rollout labels stored."
    )
    skipped = models.JSONField(
        default=dict, blank=True, help_text="Samples not stored, by reason (duplicate, unfinished)."
    )
    # The cost of the items done (an item interrupted mid-way is not counted: it is redone).
    generator_calls = models.PositiveBigIntegerField(
        default=0, help_text="Completions asked of the generator (one per sample or rollout)."
    )
    completion_tokens = models.PositiveBigIntegerField(
        default=0, help_text="Completion tokens the generator reported for those calls."
    )
    tokens_unreported = models.PositiveBigIntegerField(
        default=0, help_text="Calls whose completion tokens the generator did not report."
    )
    celery_task_id = models.CharField(max_length=255, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            status_constraint(name="sampling_run_status_valid"),
            models.CheckConstraint(
                condition=Q(purpose__in=["solutions", "rollouts"]),
                name="sampling_run_purpose_valid",
            ),
            models.CheckConstraint(
                condition=Q(samples__gte=1), name="sampling_run_samples_positive"
            ),
            # Only rollouts search; a run of solutions has nothing to search.
            models.CheckConstraint(
                condition=Q(search="every_step") | Q(purpose="rollouts", search="first_error"),
                name="sampling_run_search_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"sampling run {self.pk} ({self.purpose}, {self.status})"


class SamplingRunItem(models.Model):
    """One problem (purpose solutions) or solution (purpose rollouts) of a sampling run."""

    run = models.ForeignKey(SamplingRun, on_delete=models.CASCADE, related_name="items")
    position = models.PositiveIntegerField(help_text="Order of work within the run.")
    problem = models.ForeignKey(
        "labeling.Problem", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    solution = models.ForeignKey(
        "labeling.Solution", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    done_at = models.DateTimeField(null=True, blank=True)
    stored = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["run", "position"]
        constraints = [
            models.UniqueConstraint(fields=["run", "position"], name="sampling_item_position"),
            models.CheckConstraint(
                condition=Q(problem__isnull=False, solution__isnull=True)
                | Q(problem__isnull=True, solution__isnull=False),
                name="sampling_item_problem_or_solution",
            ),
        ]
        indexes = [
            models.Index(
                fields=["run", "position"],
                condition=Q(done_at__isnull=True),
                name="sampling_item_todo",
            )
        ]

    def __str__(self) -> str:
        return f"item {self.position} of {self.run}"


class RolloutLabel(models.Model):
    """Math-Shepherd's estimate of one step: of `rollouts` completions of the solution from
    just after this step, `reached` ended at the ground-truth answer. Hard estimate: reached
    at least once; soft: the share that reached it. A label source of its own, never mixed
    into human labels; its provenance is the sampling run (generator, settings) that made it.

    A first-error search (`SamplingRun.search`) rolls out only some steps; a step before the
    first bad one that it did not roll out is *implied* good (OmegaPRM's monotonicity: a prefix
    that reaches the answer has every shorter prefix reach it too). Its label names the later
    step it is implied by (`implied_by`) and carries that step's counts, with no answers of
    its own: every reader of hard and soft estimates reads it unchanged, and which steps were
    really rolled out stays recorded.
    """

    solution = models.ForeignKey(
        "labeling.Solution", on_delete=models.CASCADE, related_name="rollout_labels"
    )
    index = models.PositiveIntegerField(help_text="The step, from 0.")
    sampling_run = models.ForeignKey(
        SamplingRun, on_delete=models.CASCADE, related_name="rollout_labels"
    )
    rollouts = models.PositiveSmallIntegerField()
    reached = models.PositiveSmallIntegerField()
    answers = models.JSONField(
        default=list, blank=True, help_text="Each rollout's final answer ('' when it had none)."
    )
    implied_by = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="The later step whose rollouts imply this one (first-error search); "
        "null when this step was rolled out itself.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["solution", "index", "sampling_run"]
        constraints = [
            models.UniqueConstraint(
                fields=["sampling_run", "solution", "index"],
                name="one_rollout_label_per_step_and_run",
            ),
            models.CheckConstraint(
                condition=Q(rollouts__gte=1) & Q(reached__lte=F("rollouts")),
                name="rollout_label_reached_within_rollouts",
            ),
            # Only a good step implies: an implied label is a later step's that reached.
            models.CheckConstraint(
                condition=Q(implied_by__isnull=True)
                | (Q(implied_by__gt=F("index")) & Q(reached__gte=1)),
                name="rollout_label_implied_by_a_later_good_step",
            ),
        ]

    def __str__(self) -> str:
        return f"rollout label of step {self.index} of solution {self.solution_id}"

    @property
    def hard(self) -> int:
        """+1 when some rollout reached the answer, else -1 (Math-Shepherd's hard estimate)."""
        return 1 if self.reached else -1

    @property
    def soft(self) -> float:
        return self.reached / self.rollouts

    @property
    def implied(self) -> bool:
        return self.implied_by is not None


class ImportedLabel(models.Model):
    """Step labels of one solution as a public dataset gives them (ProcessBench, PRMBench, TRL
    stepwise supervision: `trainer.sampling.imported`). A label source of its own, never mixed
    into human labels; its provenance is the file, its format and the row it came from.
    """

    class Format(models.TextChoices):
        PROCESSBENCH = "processbench", "ProcessBench"
        PRMBENCH = "prmbench", "PRMBench"
        TRL = "trl", "TRL stepwise supervision"

    solution = models.ForeignKey(
        "labeling.Solution", on_delete=models.CASCADE, related_name="imported_labels"
    )
    format = models.CharField(max_length=16, choices=Format.choices)
    file_name = models.CharField(max_length=255, help_text="The imported file's own name.")
    row = models.PositiveIntegerField(help_text="Its line (JSONL) or row (Parquet), from 1.")
    ratings = models.JSONField(help_text="+1 / -1 per labeled step, from step 0.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["pk"]
        constraints = [
            # A file imported twice labels nothing twice.
            models.UniqueConstraint(
                fields=["format", "file_name", "row", "solution"],
                name="one_imported_label_per_row_and_solution",
            ),
            models.CheckConstraint(
                condition=Q(format__in=["processbench", "prmbench", "trl"]),
                name="imported_label_format_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"imported label of solution {self.solution_id} ({self.file_name}:{self.row})"
