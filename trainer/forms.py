from pathlib import Path

from django import forms
from django.conf import settings

from trainer.selection import STRATEGIES


class TrainingRunForm(forms.Form):
    epochs = forms.IntegerField(min_value=1, max_value=1000, initial=3)
    learning_rate = forms.FloatField(min_value=1e-8, max_value=1.0, initial=3e-4)
    batch_size = forms.IntegerField(min_value=1, max_value=4096, initial=16)
    max_minutes = forms.FloatField(
        min_value=0.1, required=False, help_text="Stop training after this long (optional)."
    )
    include_qc = forms.BooleanField(
        required=False, initial=True, label="Include quality-control sessions"
    )
    include_screening = forms.BooleanField(
        required=False, initial=False, label="Include screening sessions"
    )
    generation_min = forms.IntegerField(required=False, label="From generation")
    generation_max = forms.IntegerField(required=False, label="To generation")
    base_model = forms.CharField(
        required=False,
        max_length=1024,
        help_text="A local Hugging Face checkpoint directory on the GPU worker; empty for the "
        "configured default (PRM_BASE_MODEL or the tiny built-in model).",
    )

    def clean_base_model(self) -> str:
        value = self.cleaned_data["base_model"].strip()
        if value and not (Path(value) / "config.json").is_file():
            raise forms.ValidationError("No config.json in that directory.")
        return value

    def clean(self):
        data = super().clean()
        low, high = data.get("generation_min"), data.get("generation_max")
        if low is not None and high is not None and low > high:
            raise forms.ValidationError("The generation range is empty.")
        return data

    def params(self) -> dict:
        return {key: value for key, value in self.cleaned_data.items() if value not in (None, "")}


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
    qc_count = forms.IntegerField(
        min_value=0,
        max_value=100_000,
        label="Quality-control solutions",
        help_text="Served to every labeler, on top of the batch.",
    )
    seed = forms.IntegerField(min_value=0, max_value=2**31 - 1, initial=0)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["strategy"].choices = [(name, name) for name in STRATEGIES]
        for name in ("strategy", "batch_size", "per_problem_cap", "wrong_share", "qc_count"):
            self.fields[name].initial = getattr(settings, f"SELECTION_{name.upper()}")

    def params(self) -> dict:
        return dict(self.cleaned_data)
