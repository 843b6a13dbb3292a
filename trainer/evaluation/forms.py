"""The form that registers an evaluation set: a ProcessBench file, or problems held out."""

from django import forms


class EvaluationSetForm(forms.Form):
    name = forms.CharField(max_length=128)
    processbench_file = forms.FileField(
        required=False, help_text="ProcessBench items: JSONL or Parquet (problem, steps, label)."
    )
    held_out_problems = forms.CharField(
        required=False,
        help_text="Or: comma-separated problem ids to hold out of training from now on.",
    )
    decides_promotion = forms.BooleanField(
        required=False,
        help_text="New versions are promoted only when they beat the active one here.",
    )

    def clean_held_out_problems(self) -> list[int]:
        text = self.cleaned_data["held_out_problems"]
        try:
            return [int(part) for part in text.replace(" ", "").split(",") if part]
        except ValueError:
            raise forms.ValidationError("Comma-separated problem ids.") from None

    def clean(self):
        cleaned = super().clean()
        has_file = bool(cleaned.get("processbench_file"))
        has_problems = bool(cleaned.get("held_out_problems"))
        if has_file == has_problems:
            raise forms.ValidationError("Give a ProcessBench file or problem ids (one of them).")
        return cleaned
