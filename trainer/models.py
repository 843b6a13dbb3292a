from django.conf import settings
from django.db import models
from django.db.models import Q


class TrainingRun(models.Model):
    """One attempt to train the PRM: what it was asked to do, how far it got, what it made."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"

    LIVE = (Status.QUEUED, Status.RUNNING)
    FINISHED = (Status.SUCCEEDED, Status.FAILED, Status.CANCELLED)

    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    # Null when the schedule started it (or the user was deleted later).
    triggered_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="training_runs",
    )
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
    log_tail = models.TextField(blank=True)
    error = models.TextField(blank=True)
    cancel_requested = models.BooleanField(default=False)

    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    celery_task_id = models.CharField(max_length=255, blank=True)
    worker_hostname = models.CharField(max_length=255, blank=True)
    worker_pid = models.PositiveIntegerField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=["queued", "running", "succeeded", "failed", "cancelled"]),
                name="training_run_status_valid",
            ),
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
    def is_live(self) -> bool:
        return self.status in self.LIVE

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


class LocalModel(models.Model):
    """A model on disk under PRM_MODEL_DIR that generators and PRM backbones are chosen from."""

    class Kind(models.TextChoices):
        CHECKPOINT = "checkpoint", "Checkpoint directory"
        GGUF = "gguf", "GGUF file"

    name = models.CharField(max_length=255, unique=True)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    # Relative to PRM_MODEL_DIR, so the record survives the directory being mounted elsewhere.
    path = models.CharField(max_length=1024, unique=True, help_text="Inside PRM_MODEL_DIR.")
    architecture = models.CharField(max_length=128, blank=True)
    parameter_count = models.BigIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=Q(kind__in=["checkpoint", "gguf"]), name="local_model_kind_valid"
            ),
        ]

    def __str__(self) -> str:
        return self.name
