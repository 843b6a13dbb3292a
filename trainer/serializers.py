"""API representations of training runs, model versions and generations."""

from rest_framework import serializers

from labeling.models import Generation
from trainer.models import ModelVersion, TrainingRun


class TrainingRunSerializer(serializers.ModelSerializer):
    triggered_by = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = TrainingRun
        fields = [
            "id",
            "status",
            "triggered_by",
            "params",
            "dataset_size",
            "dataset_hash",
            "step",
            "total_steps",
            "epoch",
            "loss",
            "metrics",
            "log_tail",
            "error",
            "cancel_requested",
            "created_at",
            "started_at",
            "finished_at",
            "heartbeat_at",
        ]
        read_only_fields = fields


class TrainingRunRequestSerializer(serializers.Serializer):
    params = serializers.DictField(
        required=False,
        default=dict,
        help_text="Training parameters (epochs, learning_rate, batch_size, max_minutes, "
        "include_qc, include_screening, generation_min, generation_max, ...); "
        "missing ones take their defaults.",
    )


class ModelVersionSerializer(serializers.ModelSerializer):
    class Meta:
        model = ModelVersion
        fields = ["id", "name", "checkpoint_path", "metrics", "training_run", "is_active"]
        fields += ["promoted_at", "created_at"]
        read_only_fields = fields


class GenerationSerializer(serializers.ModelSerializer):
    class Meta:
        model = Generation
        fields = ["id", "number", "model_version", "params", "created_at"]
        read_only_fields = fields
