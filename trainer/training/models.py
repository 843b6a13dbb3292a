"""Training runs and the model versions they make (tables of the trainer app)."""

from django.db import models
from django.db.models import Q

from core.jobs import Job, status_constraint


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
    # By source: human, consensus (machine sources agreeing where no human rated), rollout,
    # imported; a consensus example's human steps count as human.
    step_labels = models.JSONField(
        default=dict, blank=True, help_text="Step labels trained on, by where they came from."
    )

    step = models.PositiveIntegerField(default=0)
    total_steps = models.PositiveIntegerField(default=0)  # as planned (again) for its time limit
    # Why it ended before its plan, said as the page says it: "cut at step 6 of 66 by the
    # time limit". Empty for a run that did all its steps.
    cut = models.CharField(max_length=200, blank=True)
    epoch = models.PositiveIntegerField(default=0)
    loss = models.FloatField(null=True, blank=True, help_text="Latest training loss.")
    # Measured by the training process (trainer.training.ml.memory.peak_memory): its peak
    # resident memory, and on CUDA the peak GPU memory allocated, in bytes.
    peak_rss_bytes = models.BigIntegerField(null=True, blank=True, help_text="Peak RSS, bytes.")
    peak_cuda_bytes = models.BigIntegerField(
        null=True, blank=True, help_text="Peak CUDA memory allocated, bytes."
    )
    # The estimate the run was admitted on (trainer.training.ml.memory), beside what it used.
    estimated_peak_bytes = models.BigIntegerField(
        null=True, blank=True, help_text="Estimated peak memory before the first step, bytes."
    )
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
    # A reference into the artifact store (core.store: `<key>@<digest>`), readable on any
    # host; rows made before the store hold the absolute path on the host that trained it.
    checkpoint = models.CharField(max_length=1024, help_text="Its artifact in the store.")
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
    # The last promotion decision in a sentence: promoted and why, why not, or what it waits
    # for (an evaluation on the promotion set). Pages, API and commands say it as it is here.
    promotion = models.CharField(max_length=1000, blank=True)
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
