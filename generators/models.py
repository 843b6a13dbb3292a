from django.db import models
from django.db.models import Q


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
        # Made by trainer's migration 0007 and kept: the model moved, its rows did not.
        db_table = "trainer_localmodel"
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=Q(kind__in=["checkpoint", "gguf"]), name="local_model_kind_valid"
            ),
        ]

    def __str__(self) -> str:
        return self.name
