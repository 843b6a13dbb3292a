"""Evaluation sets and the evaluations of model versions on them (tables of the trainer app)."""

from django.conf import settings
from django.db import models
from django.db.models import Q

from core.jobs import Job, status_constraint
from labeling.models import Problem
from trainer.training.models import ModelVersion


class EvaluationSet(models.Model):
    """Items every model version is evaluated on after training, registered by a researcher.

    Either a ProcessBench-format file, its items stored here, or problems held out from
    training: their labeled solutions are the items, and no training run reads them.
    At most one set decides promotion (`decides_promotion`).
    """

    class Kind(models.TextChoices):
        PROCESSBENCH = "processbench", "ProcessBench file"
        HELD_OUT = "held_out", "Problems held out from training"

    name = models.CharField(max_length=128, unique=True)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    source = models.CharField(max_length=1024, blank=True, help_text="The file it was read from.")
    # ProcessBench items: [{"problem", "steps", "label"}], as read when registered.
    items = models.JSONField(default=list, blank=True)
    problems = models.ManyToManyField(Problem, blank=True, related_name="evaluation_sets")
    decides_promotion = models.BooleanField(default=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["decides_promotion"],
                condition=Q(decides_promotion=True),
                name="one_promotion_evaluation_set",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class Evaluation(Job):
    """One model version scored on one evaluation set: a job, its progress in items, and the
    figures (`trainer.evaluation.figures.evaluate`) once done."""

    model_version = models.ForeignKey(
        ModelVersion, on_delete=models.CASCADE, related_name="evaluations"
    )
    evaluation_set = models.ForeignKey(
        EvaluationSet, on_delete=models.CASCADE, related_name="evaluations"
    )
    done = models.PositiveIntegerField(default=0)
    total = models.PositiveIntegerField(default=0)
    results = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["evaluation_set", "-id"]
        constraints = [
            status_constraint(name="evaluation_status_valid"),
            models.UniqueConstraint(
                fields=["model_version", "evaluation_set"], name="one_evaluation_per_version_set"
            ),
        ]

    def __str__(self) -> str:
        return f"evaluation of {self.model_version} on {self.evaluation_set}"
