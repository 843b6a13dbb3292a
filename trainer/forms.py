from pathlib import Path

from django import forms


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
