"""API representations of judge runs and of a request to start one."""

from rest_framework import serializers

from core import jobs
from core.idlists import id_list_field
from core.params import describe, names, params_from_data, serializer_fields
from generators import GeneratorSpec, InvalidGenerator, SamplingSettings, outbound
from trainer.judging import services as judging
from trainer.judging.models import JudgeRun
from trainer.judging.services import JudgeParams
from trainer.serializers import ItemJobSerializer, api_key_field


class JudgeRunSerializer(ItemJobSerializer):
    progress_of = staticmethod(judging.progress)

    class Meta:
        model = JudgeRun
        fields = [
            "id",
            "format",
            "prompt_version",
            "status",
            "requested_by",
            "origin",
            "generator",
            "sampling",
            "progress",
            "stored",
            "unreadable",
            *jobs.API_FIELDS,
        ]
        read_only_fields = fields


class JudgeRunRequestSerializer(serializers.Serializer):
    """Which solutions to judge, by which generator (the configured one when left out), with
    which sampling settings, in which format (JudgeParams' fields, at the top level)."""

    solution_ids = id_list_field(min_length=1)
    generator = serializers.DictField(
        required=False,
        help_text="backend (openai|local), model, base_url; left out: GENERATOR_MODEL.",
    )
    api_key = api_key_field("Your own server's key: sent with this run's requests, never stored.")
    sampling = serializers.DictField(
        required=False,
        default=dict,
        help_text=f"Sampling settings ({describe(SamplingSettings)}); left out, each takes the "
        f"judge's default ({judging.JUDGE_SETTINGS.to_dict()}).",
    )

    def get_fields(self) -> dict:
        return {**super().get_fields(), **serializer_fields(JudgeParams)}

    def validate(self, data: dict) -> dict:
        # InvalidGenerator is a domain error: the API's exception handler answers 400 with it.
        generator = GeneratorSpec.requested(data.get("generator"), api_key=data.get("api_key", ""))
        settings = SamplingSettings.from_dict(data.get("sampling"), defaults=judging.JUDGE_SETTINGS)
        params = params_from_data(
            JudgeParams, {name: data.get(name) for name in names(JudgeParams)}
        )
        return {
            "generator": generator,
            "settings": settings,
            "params": params,
            "solution_ids": data["solution_ids"],
        }


class JudgeResumeSerializer(serializers.Serializer):
    """A resumed run at a researcher's own server needs its key again: it was never stored."""

    api_key = api_key_field("Your own server's key, as when the run was started; never stored.")

    def validate_api_key(self, value: str) -> str:
        try:
            outbound.check_api_key(value)
        except InvalidGenerator as exc:
            raise serializers.ValidationError(str(exc)) from exc
        return value
