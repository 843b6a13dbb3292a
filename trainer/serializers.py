"""API representations of training runs, model versions (with their scoring's progress) and
generations."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from labeling.models import Generation
from labeling.services.overlap import MAX_OVERLAP_LABELERS
from trainer import selectors
from trainer.models import ModelVersion, TrainingRun
from trainer.params import TrainingParams
from trainer.scoring_service import MAX_SOLUTIONS, MAX_STEPS, MAX_TEXT_CHARS
from trainer.selection import STRATEGIES


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
        "include_quality_control, include_screening, generation_min, generation_max, ...: "
        "the fields of trainer.params.TrainingParams); missing ones take their defaults.",
    )

    def validate_params(self, value: dict) -> TrainingParams:
        # InvalidParams is a domain error: the API's exception handler answers 400 with it.
        return TrainingParams.from_dict(value)


class ScoringSerializer(serializers.Serializer):
    """The version's scoring chunks: its progress is their sum (`selectors.scoring_chunks`)."""

    chunks = serializers.IntegerField()
    done = serializers.IntegerField(help_text="Chunks done.")
    solutions = serializers.IntegerField(help_text="Solutions the chunks were planned for.")
    scored = serializers.IntegerField(help_text="Solutions written by the chunks done.")
    running = serializers.SerializerMethodField(help_text="Workers scoring chunks now.")

    def get_running(self, progress) -> list[dict]:
        return [{"worker": worker, "chunks": count} for worker, count in progress.running]


class ModelVersionSerializer(serializers.ModelSerializer):
    scoring = serializers.SerializerMethodField()

    class Meta:
        model = ModelVersion
        fields = ["id", "name", "checkpoint_path", "metrics", "training_run", "is_active"]
        fields += ["promoted_at", "created_at", "scoring"]
        read_only_fields = fields

    @extend_schema_field(ScoringSerializer)
    def get_scoring(self, version: ModelVersion) -> dict:
        return ScoringSerializer(selectors.scoring_chunks(model_version=version)).data


class GenerationSerializer(serializers.ModelSerializer):
    class Meta:
        model = Generation
        fields = ["id", "number", "model_version", "params", "created_at"]
        read_only_fields = fields


class GenerationRequestSerializer(serializers.Serializer):
    """Selection parameters; missing ones take the SELECTION_* settings."""

    strategy = serializers.ChoiceField(choices=sorted(STRATEGIES), required=False)
    batch_size = serializers.IntegerField(min_value=0, max_value=1_000_000, required=False)
    per_problem_cap = serializers.IntegerField(min_value=1, max_value=1_000_000, required=False)
    wrong_share = serializers.FloatField(min_value=0.0, max_value=1.0, required=False)
    quality_control_count = serializers.IntegerField(min_value=0, max_value=100_000, required=False)
    overlap_share = serializers.FloatField(min_value=0.0, max_value=1.0, required=False)
    overlap_labelers = serializers.IntegerField(
        min_value=2, max_value=MAX_OVERLAP_LABELERS, required=False
    )
    seed = serializers.IntegerField(min_value=0, max_value=2**31 - 1, required=False)


class OverlapSerializer(serializers.Serializer):
    """A generation's overlap: `share` of its solutions labeled by `labelers` labelers each."""

    share = serializers.FloatField(min_value=0.0, max_value=1.0)
    labelers = serializers.IntegerField(min_value=2, max_value=MAX_OVERLAP_LABELERS)


class OverlapResultSerializer(OverlapSerializer):
    overlapping = serializers.IntegerField(help_text="Solutions now labeled by several labelers.")


class GenerationQueuedSerializer(serializers.Serializer):
    task_id = serializers.CharField(help_text="The Celery task that scores the pool and selects.")
    model_version = serializers.IntegerField(help_text="The active model version that selects.")
    params = serializers.DictField(help_text="Every selection parameter, defaults filled in.")


class TextField(serializers.CharField):
    """Text only: a number where text belongs is the caller's mistake, not text "1"."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class PostedSolutionSerializer(serializers.Serializer):
    problem = TextField(max_length=MAX_TEXT_CHARS, trim_whitespace=False)
    steps = serializers.ListField(
        child=TextField(max_length=MAX_TEXT_CHARS, trim_whitespace=False),
        min_length=1,
        max_length=MAX_STEPS,
    )


class ScoreRequestSerializer(serializers.Serializer):
    solutions = PostedSolutionSerializer(many=True, min_length=1, max_length=MAX_SOLUTIONS)


class ScoredSolutionSerializer(serializers.Serializer):
    step_scores = serializers.ListField(child=serializers.FloatField())
    score = serializers.FloatField(allow_null=True)
    truncated = serializers.BooleanField()


class ScoreResponseSerializer(serializers.Serializer):
    model_version = serializers.IntegerField()
    solutions = ScoredSolutionSerializer(many=True)
