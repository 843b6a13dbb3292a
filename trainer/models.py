from django.db import models
from django.db.models import F, Q

from core.jobs import LIVE, Job, status_constraint


class TrainingRun(Job):
    """One attempt to train the PRM: what it was asked to do, how far it got, what it made.
    A job (`core.jobs`): status, requester, cancel, heartbeat and log tail are a job's."""

    params = models.JSONField(default=dict, blank=True)

    # The data snapshot: taken when the run starts, so a rerun can be compared with it.
    dataset_size = models.PositiveIntegerField(null=True, blank=True, help_text="Examples.")
    dataset_hash = models.CharField(max_length=64, blank=True)
    snapshot_at = models.DateTimeField(
        null=True, blank=True, help_text="Sessions submitted up to this moment were read."
    )

    step = models.PositiveIntegerField(default=0)
    total_steps = models.PositiveIntegerField(default=0)
    epoch = models.PositiveIntegerField(default=0)
    loss = models.FloatField(null=True, blank=True, help_text="Latest training loss.")
    metrics = models.JSONField(default=list, blank=True, help_text="Held-out metrics per epoch.")
    celery_task_id = models.CharField(max_length=255, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            status_constraint(name="training_run_status_valid"),
            # One run at a time: every row that is queued or running indexes the same constant,
            # so a second live run is refused by the database, whoever inserts it.
            models.UniqueConstraint(
                models.Value(1),
                condition=Q(status__in=["queued", "running"]),
                name="one_live_training_run",
            ),
        ]

    def __str__(self) -> str:
        return f"training run {self.pk} ({self.status})"

    @property
    def progress_percent(self) -> int:
        if not self.total_steps:
            return 0
        return min(100, round(100 * self.step / self.total_steps))


class ModelVersion(models.Model):
    """A trained PRM checkpoint. At most one is active: the one that scores and selects."""

    name = models.CharField(max_length=128, blank=True)
    checkpoint_path = models.CharField(max_length=1024)
    metrics = models.JSONField(default=dict, blank=True)
    training_run = models.OneToOneField(
        TrainingRun,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="model_version",
        help_text="The run that trained it (empty for imported checkpoints).",
    )
    is_active = models.BooleanField(default=False)
    promoted_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["is_active"], condition=Q(is_active=True), name="one_active_model_version"
            ),
        ]

    def __str__(self) -> str:
        return self.name or f"model version {self.pk}"


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

    purpose = models.CharField(max_length=16, choices=Purpose.choices)
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


class ScoringChunk(Job):
    """One range of solution ids that a model version scores in one transaction.

    The scoring of a pool is the sum of its chunks: any number of workers claim chunks (a
    locked row skipped by the others), each chunk's scores and its done mark are committed
    together, and a chunk whose worker died (its heartbeat went stale) is claimed again.
    Ranges of one version never overlap (`trainer.scoring.chunks.plan_scoring` plans them under a
    lock on the version); scoring a range writes only what lacks the version's scores, so a
    chunk is idempotent. A job (`core.jobs`) that is queued again when its worker dies;
    `started_at` is its latest claim, and nobody requests it (the scoring does).
    """

    model_version = models.ForeignKey(
        ModelVersion, on_delete=models.CASCADE, related_name="scoring_chunks"
    )
    first_solution_id = models.BigIntegerField()
    last_solution_id = models.BigIntegerField(help_text="Inclusive.")
    solutions = models.PositiveIntegerField(
        help_text="Solutions of the range that lacked the version's scores when planned."
    )
    scored = models.PositiveIntegerField(default=0, help_text="Solutions the chunk wrote.")
    # Each claim counts: a chunk done at its first attempt was scored exactly once, and a
    # worker whose chunk was taken over recognises that its claim is no longer the current one.
    attempts = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["model_version", "first_solution_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["model_version", "first_solution_id"], name="one_chunk_per_first_solution"
            ),
            status_constraint(name="scoring_chunk_status_valid"),
            models.CheckConstraint(
                condition=Q(first_solution_id__lte=F("last_solution_id")),
                name="scoring_chunk_range_ordered",
            ),
        ]
        indexes = [
            # Claiming reads the chunks of one version still to do, lowest range first.
            models.Index(
                fields=["model_version", "first_solution_id"],
                condition=Q(status__in=LIVE),
                name="scoring_chunk_todo",
            )
        ]

    def __str__(self) -> str:
        return (
            f"chunk {self.first_solution_id}-{self.last_solution_id} of model version "
            f"{self.model_version_id} ({self.status})"
        )
