"""API representations of sampling runs and of a request to start one."""

from rest_framework import serializers

from core import jobs
from core.idlists import id_list_field
from core.params import describe, params_from_data, serializer_fields
from generators import GeneratorSpec, InvalidGenerator, SamplingSettings, outbound
from trainer.sampling.models import SamplingRun
from trainer.sampling.services import (
    MAX_ITEMS,
    RolloutParams,
    problem_ids_matching,
    progress,
)
from trainer.serializers import GenerationRequestSerializer, ItemJobSerializer, api_key_field


class SamplingRunSerializer(ItemJobSerializer):
    progress_of = staticmethod(progress)

    class Meta:
        model = SamplingRun
        fields = [
            "id",
            "purpose",
            "status",
            "requested_by",
            "origin",
            "generator",
            "sampling",
            "samples",
            "search",
            "then_select",
            "progress",
            "stored",
            "skipped",
            "generator_calls",
            "completion_tokens",
            "tokens_unreported",
            *jobs.API_FIELDS,
        ]
        read_only_fields = fields


class ProblemFilterSerializer(serializers.Serializer):
    split = serializers.CharField(required=False, allow_blank=True, max_length=32)
    subject = serializers.CharField(required=False, allow_blank=True, max_length=64)
    level = serializers.IntegerField(required=False, allow_null=True, min_value=1, max_value=5)
    limit = serializers.IntegerField(min_value=1, max_value=MAX_ITEMS, default=100)


class SamplingRunRequestSerializer(serializers.Serializer):
    """What to sample (problem ids, a problem filter, or solution ids for rollouts), from which
    generator (the configured one when left out) and how."""

    purpose = serializers.ChoiceField(choices=SamplingRun.Purpose.choices, default="solutions")
    problem_ids = id_list_field(required=False)
    problems = ProblemFilterSerializer(
        required=False, help_text="Choose problems by filter (when problem_ids is left out)."
    )
    solution_ids = id_list_field(required=False)
    samples = serializers.IntegerField(
        min_value=1, help_text="Solutions per problem (1..1024), or rollouts per step (1..64)."
    )
    generator = serializers.DictField(
        required=False,
        help_text="backend (openai|local), model, base_url; left out: GENERATOR_MODEL. "
        "base_url is one of the operator's (GENERATOR_BASE_URL, GENERATOR_ALLOWED_BASE_URLS) "
        "or a server of your own at a public address.",
    )
    api_key = api_key_field(
        "Your own server's key: sent with this run's requests, never stored. The "
        "operator's URLs are sent the operator's key."
    )
    sampling = serializers.DictField(
        required=False,
        default=dict,
        help_text=f"Sampling settings ({describe(SamplingSettings)}); left out, each takes its "
        f"default ({SamplingSettings().to_dict()}).",
    )
    then_select = GenerationRequestSerializer(
        required=False,
        allow_null=True,
        default=None,
        help_text="Selection parameters ({} for the SELECTION_* settings): select the next "
        "generation with the active model version once the run has succeeded.",
    )

    def get_fields(self) -> dict:
        return {**super().get_fields(), **serializer_fields(RolloutParams)}

    def validate(self, data: dict) -> dict:
        data["search"] = params_from_data(RolloutParams, {"search": data.get("search")}).search
        # InvalidGenerator is a domain error: the API's exception handler answers 400 with it.
        data["generator"] = GeneratorSpec.requested(
            data.get("generator"), api_key=data.pop("api_key", "")
        )
        data["settings"] = SamplingSettings.from_dict(data.pop("sampling", None))
        if data["purpose"] == "solutions" and not data.get("problem_ids"):
            data["problem_ids"] = problem_ids_matching(**data.pop("problems", {}))
            if not data["problem_ids"]:
                raise serializers.ValidationError({"problems": "No problem matches the filter."})
        data.pop("problems", None)
        if data.get("then_select") is not None:
            data["then_select"] = data["then_select"].to_dict()
        return data


class SamplingResumeSerializer(serializers.Serializer):
    """A resumed run at a researcher's own server needs its key again: it was never stored."""

    api_key = api_key_field("Your own server's key, as when the run was started; never stored.")

    def validate_api_key(self, value: str) -> str:
        try:
            outbound.check_api_key(value)
        except InvalidGenerator as exc:
            raise serializers.ValidationError(str(exc)) from exc
        return value
