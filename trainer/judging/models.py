"""Judge runs, their items and the judge labels they make (tables of the trainer app)."""

from django.db import models
from django.db.models import Q

from core.jobs import Job, status_constraint

# A reason is a few words for a person to read beside the rating, not the judge's essay.
REASON_MAX_CHARS = 280
# What of a reply an item keeps, to show why it was read as it was (or not at all).
REPLY_MAX_CHARS = 4000


class JudgeFormat(models.TextChoices):
    PER_STEP = "per_step", "A rating and a reason per step"
    FIRST_ERROR = "first_error", "The first wrong step (ProcessBench's critic)"


class JudgeRun(Job):
    """A job that asks a generator acting as a judge to rate the steps of chosen solutions.

    Its items are the solutions; each item's labels are committed with the item marked done,
    so a worker killed mid-run leaves whole items only, and a resumed run does the items not
    done. Its provenance: the generator (never the API key), the sampling settings, the
    prompt version and the format the judge answered in.
    """

    Format = JudgeFormat

    # generators: GeneratorSpec.to_dict() and SamplingSettings.to_dict().
    generator = models.JSONField(help_text="Backend, model and base URL of the judge.")
    sampling = models.JSONField(help_text="Temperature, top_p, max_tokens and seed.")
    prompt_version = models.CharField(max_length=32, help_text="JUDGE_PROMPT_VERSION used.")
    format = models.CharField(max_length=16, choices=JudgeFormat.choices)
    stored = models.PositiveIntegerField(default=0, help_text="Judge labels stored.")
    unreadable = models.PositiveIntegerField(
        default=0, help_text="Solutions whose reply could not be read: no labels."
    )
    celery_task_id = models.CharField(max_length=255, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            status_constraint(name="judge_run_status_valid"),
            models.CheckConstraint(
                condition=Q(format__in=JudgeFormat.values), name="judge_run_format_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"judge run {self.pk} ({self.format}, {self.status})"


class JudgeRunItem(models.Model):
    """One solution of a judge run, and what the judge replied about it."""

    run = models.ForeignKey(JudgeRun, on_delete=models.CASCADE, related_name="items")
    position = models.PositiveIntegerField(help_text="Order of work within the run.")
    solution = models.ForeignKey("labeling.Solution", on_delete=models.CASCADE, related_name="+")
    done_at = models.DateTimeField(null=True, blank=True)
    stored = models.PositiveIntegerField(default=0)
    unreadable = models.BooleanField(
        default=False, help_text="The reply could not be read: no labels were stored."
    )
    reply = models.TextField(blank=True, help_text="The judge's reply, cut to its start.")

    class Meta:
        ordering = ["run", "position"]
        constraints = [
            models.UniqueConstraint(fields=["run", "position"], name="judge_item_position"),
            models.UniqueConstraint(fields=["run", "solution"], name="judge_item_solution"),
        ]
        indexes = [
            models.Index(
                fields=["run", "position"],
                condition=Q(done_at__isnull=True),
                name="judge_item_todo",
            )
        ]

    def __str__(self) -> str:
        return f"item {self.position} of {self.run}"


class JudgeLabel(models.Model):
    """A judge's rating of one step (-1, 0, +1) and its short reason. A label source of its
    own, never mixed into human step ratings; its provenance is the judge run."""

    solution = models.ForeignKey(
        "labeling.Solution", on_delete=models.CASCADE, related_name="judge_labels"
    )
    index = models.PositiveIntegerField(help_text="The step, from 0.")
    run = models.ForeignKey(JudgeRun, on_delete=models.CASCADE, related_name="labels")
    rating = models.SmallIntegerField()
    reason = models.CharField(max_length=REASON_MAX_CHARS, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["solution", "index", "run"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "solution", "index"], name="one_judge_label_per_step_and_run"
            ),
            models.CheckConstraint(
                condition=Q(rating__in=[-1, 0, 1]), name="judge_label_rating_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"judge label of step {self.index} of solution {self.solution_id}"
