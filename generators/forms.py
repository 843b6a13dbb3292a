"""The generator and sampling fields of every form that asks a generator (a sampling run's,
live labeling's), derived from GeneratorChoice and SamplingSettings, and their one check."""

from core.params import form_fields, names, params_from_form
from generators.base import GeneratorChoice, GeneratorSpec, SamplingSettings


def generator_fields(*, defaults: SamplingSettings | None = None) -> dict:
    """Backend, model and base URL (all empty: the configured generator), then the sampling
    settings with `defaults` as their initial values."""
    return {
        **form_fields(GeneratorChoice),
        **form_fields(SamplingSettings, required=True, defaults=defaults),
    }


def clean_generator(
    form, *, defaults: SamplingSettings | None = None, api_key: str = ""
) -> tuple[GeneratorSpec, SamplingSettings] | None:
    """The generator the form names (`GeneratorSpec.requested`, with `api_key`) and its
    sampling settings; None when either is refused, the refusal shown on the form."""
    spec = params_from_form(
        form,
        GeneratorChoice,
        only=names(GeneratorChoice),
        build=lambda values: GeneratorSpec.requested(values, api_key=api_key),
    )
    settings = params_from_form(
        form,
        SamplingSettings,
        only=names(SamplingSettings),
        build=lambda values: SamplingSettings.from_dict(values, defaults=defaults),
    )
    return None if spec is None or settings is None else (spec, settings)
