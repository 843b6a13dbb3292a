from django.db import models
from django.db.models import Q


class ModelVersion(models.Model):
    """A trained PRM checkpoint. At most one is active: the one that scores and selects."""

    name = models.CharField(max_length=128, blank=True)
    checkpoint_path = models.CharField(max_length=1024)
    metrics = models.JSONField(default=dict, blank=True)
    is_active = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["is_active"], condition=Q(is_active=True), name="one_active_model_version"
            ),
        ]

    def __str__(self) -> str:
        return self.name or f"model version {self.pk}"
