"""API representations of training runs, model versions (with their scoring's progress) and
generations."""

from collections.abc import Callable
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core import jobs
from core.params import describe, params_from_data, serializer_fields
from generators import outbound
from labeling.models import Generation
from labeling.services.overlap import OverlapParams
from trainer.evaluation.serializers import EvaluationSerializer
from trainer.evaluation.sets import evaluations_of
from trainer.models import ModelVersion, TrainingRun
from trainer.scoring.posted import MAX_SOLUTIONS, MAX_STEPS, MAX_TEXT_CHARS
from trainer.scoring.progress import scoring_chunks
from trainer.selection.services import SelectionParams
from trainer.training.model_versions import comparison_with_active
from trainer.training.params import TrainingParams
from trainer.training.selectors import active_model_version


class ProgressSerializer(serializers.Serializer):
    """Items done of all, for a job of items (sampling runs, judge runs)."""

    done = serializers.IntegerField()
    total = serializers.IntegerField()
    percent = serializers.IntegerField()


class ItemJobSerializer(serializers.ModelSerializer):
    """A job of items as the API answers it: who asked for it, and its progress, which each
    kind computes (`progress_of`, its service's `progress(run)`)."""

    requested_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    progress = serializers.SerializerMethodField()
    progress_of: Callable[[Any], dict] = staticmethod(lambda run: {})

    @extend_schema_field(ProgressSerializer)
    def get_progress(self, run) -> dict:
        return type(self).progress_of(run)


def api_key_field(help_text: str) -> serializers.CharField:
    """The researcher's key for their own server: taken, never stored or answered."""
    return serializers.CharField(
        required=False,
        default="",
        allow_blank=True,
        write_only=True,
        max_length=outbound.MAX_KEY_CHARS,
        help_text=help_text,
    )


class TrainingRunSerializer(serializers.ModelSerializer):
    requested_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    # The requester's old name, still answered for clients written before runs were jobs.
    triggered_by = serializers.SlugRelatedField(
        source="requested_by",
        slug_field="username",
        read_only=True,
        help_text="Deprecated: the same as requested_by.",
    )

    class Meta:
        model = TrainingRun
        fields = [
            "id",
            "status",
            "requested_by",
            "origin",
            "triggered_by",
            "params",
            "dataset_size",
            "dataset_hash",
            "step_labels",
            "step",
            "total_steps",
            "cut",
            "epoch",
            "loss",
            "metrics",
            "peak_rss_bytes",
            "peak_cuda_bytes",
            "estimated_peak_bytes",
            *jobs.API_FIELDS,
        ]
        read_only_fields = fields


class TrainingRunRequestSerializer(serializers.Serializer):
    params = serializers.DictField(
        required=False,
        default=dict,
        help_text=f"Training parameters ({describe(TrainingParams)}: the fields of "
        "trainer.training.params.TrainingParams); missing ones take their defaults.",
    )

    def validate_params(self, value: dict) -> TrainingParams:
        # InvalidParams is a domain error: the API's exception handler answers 400 with it.
        return TrainingParams.requested(value)


class ScoringSerializer(serializers.Serializer):
    """The version's scoring chunks: its progress is their sum
    (`trainer.scoring.progress.scoring_chunks`)."""

    chunks = serializers.IntegerField()
    done = serializers.IntegerField(help_text="Chunks done.")
    solutions = serializers.IntegerField(help_text="Solutions the chunks were planned for.")
    scored = serializers.IntegerField(help_text="Solutions written by the chunks done.")
    running = serializers.SerializerMethodField(help_text="Workers scoring chunks now.")

    def get_running(self, progress) -> list[dict]:
        return [{"worker": worker, "chunks": count} for worker, count in progress.running]


class ComparisonSerializer(serializers.Serializer):
    metric = serializers.CharField()
    where = serializers.CharField()
    new = serializers.FloatField(allow_null=True)
    active = serializers.FloatField(allow_null=True)
    worse = serializers.BooleanField()


class ModelVersionSerializer(serializers.ModelSerializer):
    scoring = serializers.SerializerMethodField()
    evaluations = serializers.SerializerMethodField()
    compared_with_active = serializers.SerializerMethodField()

    class Meta:
        model = ModelVersion
        fields = ["id", "name", "checkpoint", "metrics", "training_run", "is_active"]
        fields += ["promoted_at", "promotion", "created_at", "scoring", "evaluations"]
        fields += ["compared_with_active"]
        read_only_fields = fields

    @extend_schema_field(EvaluationSerializer(many=True))
    def get_evaluations(self, version: ModelVersion) -> list:
        """Its figures on every evaluation set, beside the active version's."""
        active = active_model_version()
        theirs = {}
        if active is not None and active.pk != version.pk:
            theirs = {e.evaluation_set_id: e for e in evaluations_of(model_version=active)}
        return EvaluationSerializer(
            evaluations_of(model_version=version),
            many=True,
            context={"active_evaluations": theirs},
        ).data

    @extend_schema_field(ComparisonSerializer(allow_null=True))
    def get_compared_with_active(self, version: ModelVersion) -> dict | None:
        found = comparison_with_active(version=version)
        if found is None:
            return None
        return ComparisonSerializer(
            {"metric": found.metric, "where": found.where, "new": found.new}
            | {"active": found.active, "worse": found.worse}
        ).data

    @extend_schema_field(ScoringSerializer)
    def get_scoring(self, version: ModelVersion) -> dict:
        return ScoringSerializer(scoring_chunks(model_version=version)).data


class GenerationSerializer(serializers.ModelSerializer):
    class Meta:
        model = Generation
        fields = ["id", "number", "model_version", "params", "judge_display", "created_at"]
        read_only_fields = fields


class GenerationRequestSerializer(serializers.Serializer):
    """Selection parameters (trainer.selection.services.SelectionParams); missing ones take the
    SELECTION_* settings. Valid data is the SelectionParams."""

    def get_fields(self) -> dict:
        return {**serializer_fields(SelectionParams), **super().get_fields()}

    def validate(self, data: dict) -> SelectionParams:
        return params_from_data(SelectionParams, data)


class OverlapSerializer(serializers.Serializer):
    """A generation's overlap: `share` of its solutions labeled by `labelers` labelers each."""

    def get_fields(self) -> dict:
        return {**serializer_fields(OverlapParams, required=True), **super().get_fields()}

    def validate(self, data: dict) -> dict:
        return params_from_data(OverlapParams, data).to_dict()


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
