from django.db import models
from django.db.models import Q


class LocalModel(models.Model):
    """A model that generators and PRM backbones are chosen from: found under PRM_MODEL_DIR on
    the host that recorded it, and published from there into the artifact store, from which
    every host reads it (`core.store`)."""

    class Kind(models.TextChoices):
        CHECKPOINT = "checkpoint", "Checkpoint directory"
        GGUF = "gguf", "GGUF file"

    name = models.CharField(max_length=255, unique=True)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    # Relative to PRM_MODEL_DIR on the host that recorded it: where the operator put it, for
    # people. The files every host loads are the artifact's.
    path = models.CharField(max_length=1024, unique=True, help_text="Inside PRM_MODEL_DIR.")
    # The store reference (`<key>@<digest>`) of the files as they were recorded; blank for a
    # record made before the store, whose files are read from PRM_MODEL_DIR/path where they lie.
    artifact = models.CharField(
        max_length=1024,
        blank=True,
        help_text="Artifact store reference of the model's files; blank: recorded before the "
        "store (read from PRM_MODEL_DIR on the host that has them).",
    )
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
