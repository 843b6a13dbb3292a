"""The researcher's forms: a training run's parameters (drawn from TrainingParams) and a
generation's selection parameters."""

from dataclasses import fields

from django import forms
from django.conf import settings
from django.utils.html import format_html, format_html_join

from labeling.services.overlap import MAX_OVERLAP_LABELERS
from trainer.base_models import BaseModelRefused, check_base_model
from trainer.models import LocalModel
from trainer.params import InvalidParams, TrainingParams, default_of, value_type
from trainer.selection import STRATEGIES


def _form_field(f) -> forms.Field:
    """The form field of a TrainingParams field: type, bounds, choices and words from its metadata.

    Every field may be left empty (its default applies), as in the API; open bounds are
    checked by TrainingParams.from_dict in `clean`.
    """
    meta, kind, default = f.metadata, value_type(f), default_of(f)
    common = {"label": meta["label"], "help_text": meta["help"], "required": False}
    if kind is bool:
        return forms.BooleanField(initial=default, **common)
    if meta["choices"]:
        return forms.ChoiceField(
            choices=[(c, c) for c in meta["choices"]], initial=default, **common
        )
    if kind is str:
        return forms.CharField(max_length=1024, initial=default, **common)
    number = forms.IntegerField if kind is int else forms.FloatField
    return number(min_value=meta["low"], max_value=meta["high"], initial=default, **common)


class SuggestingInput(forms.TextInput):
    """A text input with a <datalist> of suggestions: the value may be one of them or not."""

    def __init__(self, *, options: list[str], attrs: dict | None = None) -> None:
        super().__init__(attrs)
        self.options = options

    def render(self, name, value, attrs=None, renderer=None):
        list_id = f"{name}-options"
        html = super().render(name, value, {**(attrs or {}), "list": list_id}, renderer)
        options = format_html_join("", '<option value="{}">', ((o,) for o in self.options))
        return format_html('{}<datalist id="{}">{}</datalist>', html, list_id, options)


class TrainingRunForm(forms.Form):
    """The TrainingParams fields marked `form=True`; the others keep their defaults."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        for f in fields(TrainingParams):
            if f.metadata["form"]:
                self.fields[f.name] = _form_field(f)
        # The recorded checkpoints are offered by name; a path inside PRM_MODEL_DIR still works.
        names = list(
            LocalModel.objects.filter(kind=LocalModel.Kind.CHECKPOINT).values_list(
                "name", flat=True
            )
        )
        self.fields["base_model"].widget = SuggestingInput(options=names)
        if names:
            self.fields["base_model"].help_text += f" Recorded: {', '.join(names)}."

    def clean_base_model(self) -> str:
        value = (self.cleaned_data["base_model"] or "").strip()
        if value:
            try:
                check_base_model(value)
            except BaseModelRefused as exc:
                raise forms.ValidationError(str(exc)) from None
        return value

    def clean(self):
        data = super().clean()
        low, high = data.get("generation_min"), data.get("generation_max")
        if low is not None and high is not None and low > high:
            raise forms.ValidationError("The generation range is empty.")
        if not self.errors:
            try:
                self.training_params = TrainingParams.from_dict(self.params())
            except InvalidParams as exc:
                raise forms.ValidationError(str(exc)) from None
        return data

    def params(self) -> dict:
        return {key: value for key, value in self.cleaned_data.items() if value not in (None, "")}


class OverlapForm(forms.Form):
    """A generation's overlap, changed after it was published."""

    share = forms.FloatField(
        min_value=0.0, max_value=1.0, label="Share", help_text="Of its solutions, 0 to 1."
    )
    labelers = forms.IntegerField(
        min_value=2, max_value=MAX_OVERLAP_LABELERS, label="Labelers each"
    )


class GenerationForm(forms.Form):
    """Selection parameters for publishing the next generation; initial values are settings."""

    strategy = forms.ChoiceField(choices=[])
    batch_size = forms.IntegerField(
        min_value=0, max_value=1_000_000, help_text="Solutions labeled once each."
    )
    per_problem_cap = forms.IntegerField(min_value=1, max_value=1_000_000, label="Per-problem cap")
    wrong_share = forms.FloatField(
        min_value=0.0,
        max_value=1.0,
        label="Wrong-answer share",
        help_text="Share of the batch that is convincing wrong answers (that strategy only).",
    )
    quality_control_count = forms.IntegerField(
        min_value=0,
        max_value=100_000,
        label="Quality-control solutions",
        help_text="Served to every labeler, on top of the batch.",
    )
    overlap_share = forms.FloatField(
        min_value=0.0,
        max_value=1.0,
        required=False,
        label="Overlap share",
        help_text="Share of the batch labeled by several labelers, for agreement.",
    )
    overlap_labelers = forms.IntegerField(
        min_value=2,
        max_value=MAX_OVERLAP_LABELERS,
        required=False,
        label="Labelers per overlapping solution",
    )
    seed = forms.IntegerField(min_value=0, max_value=2**31 - 1, initial=0)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["strategy"].choices = [(name, name) for name in STRATEGIES]
        for name in (
            "strategy",
            "batch_size",
            "per_problem_cap",
            "wrong_share",
            "quality_control_count",
            "overlap_share",
            "overlap_labelers",
        ):
            self.fields[name].initial = getattr(settings, f"SELECTION_{name.upper()}")

    def params(self) -> dict:
        return dict(self.cleaned_data)
