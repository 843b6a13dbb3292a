"""API representations of evaluation sets and of a model version's evaluations."""

from rest_framework import serializers

from core.idlists import id_list_field
from trainer.evaluation.models import Evaluation, EvaluationSet


class EvaluationSetSerializer(serializers.ModelSerializer):
    items = serializers.SerializerMethodField()
    problems = serializers.PrimaryKeyRelatedField(many=True, read_only=True)

    class Meta:
        model = EvaluationSet
        fields = ["id", "name", "kind", "source", "items", "problems", "decides_promotion"]
        fields += ["created_at"]
        read_only_fields = fields

    def get_items(self, found: EvaluationSet) -> int:
        """How many stored items (a ProcessBench set; a held-out set's are its solutions)."""
        return len(found.items)


class EvaluationSetRequestSerializer(serializers.Serializer):
    """A ProcessBench file (multipart `file`) or problem ids to hold out (`problems`)."""

    name = serializers.CharField(max_length=128)
    file = serializers.FileField(required=False)
    problems = id_list_field(required=False)
    decides_promotion = serializers.BooleanField(required=False, default=False)

    def validate(self, data):
        if bool(data.get("file")) == bool(data.get("problems")):
            raise serializers.ValidationError("Give a ProcessBench `file` or `problems` (one).")
        return data


class EvaluationSerializer(serializers.ModelSerializer):
    """A version's figures on one set: each with value, low, high (95% percentile bootstrap)
    and baselines on the same items; `active` is the active version's value there."""

    evaluation_set = serializers.SlugRelatedField(slug_field="name", read_only=True)
    active = serializers.SerializerMethodField()

    class Meta:
        model = Evaluation
        fields = ["id", "model_version", "evaluation_set", "status", "done", "total"]
        fields += ["results", "active", "cancel_requested", "error", "log_tail"]
        fields += ["started_at", "finished_at", "heartbeat_at"]
        read_only_fields = fields

    def get_active(self, evaluation: Evaluation) -> dict | None:
        """The active version's figures on the same set ({metric: value}), when evaluated."""
        theirs = self.context.get("active_evaluations", {}).get(evaluation.evaluation_set_id)
        if theirs is None:
            return None
        return {name: f.get("value") for name, f in theirs.results.get("figures", {}).items()}
