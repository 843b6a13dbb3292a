"""The form that starts a judge run: which solutions, which judge, how, in which format."""

from django import forms

from core.params import form_fields, names, params_from_form
from generators import GeneratorChoice, SamplingSettings, outbound
from generators.forms import clean_generator, generator_fields
from generators.models import LocalModel
from trainer.judging import services as judging
from trainer.judging.services import JudgeParams


def _ids(text: str) -> list[int]:
    parts = [part for part in text.replace(",", " ").split() if part]
    if not all(part.isdigit() for part in parts):
        raise forms.ValidationError("Solution ids are whole numbers, separated by commas.")
    ids = [int(part) for part in parts]
    if any(not 0 < i <= judging.MAX_ID for i in ids):
        raise forms.ValidationError("Solution ids are positive whole numbers.")
    return ids


class JudgeRunForm(forms.Form):
    solution_ids = forms.CharField(
        label="Solution ids", help_text="Comma-separated: the solutions the judge rates."
    )
    api_key = forms.CharField(
        required=False,
        max_length=outbound.MAX_KEY_CHARS,
        label="API key",
        strip=True,
        widget=forms.PasswordInput(render_value=False),
        help_text="For your own server only: sent with this run's requests, never stored.",
    )

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields.update(form_fields(JudgeParams, required=True))
        self.fields.update(generator_fields(defaults=judging.JUDGE_SETTINGS))
        self.order_fields(
            [
                "solution_ids",
                *names(JudgeParams),
                *names(GeneratorChoice),
                "api_key",
                *names(SamplingSettings),
            ]
        )
        self.local_models = list(LocalModel.objects.values_list("name", flat=True))
        self.fields["model"].widget.attrs["list"] = "local-models"

    def clean_solution_ids(self) -> list[int]:
        ids = _ids(self.cleaned_data.get("solution_ids", ""))
        if not ids:
            raise forms.ValidationError("A judge run needs solution ids.")
        return ids

    def clean(self) -> dict:
        data = super().clean()
        if self.errors:
            return data
        chosen = clean_generator(
            self, defaults=judging.JUDGE_SETTINGS, api_key=data.get("api_key", "")
        )
        params = params_from_form(self, JudgeParams, only=names(JudgeParams))
        if chosen is not None and params is not None:
            (self.generator, self.settings), self.params = chosen, params
        return data

    def request_kwargs(self) -> dict:
        """What `request_judge_run` takes besides the user, once the form is valid."""
        return {
            "generator": self.generator,
            "settings": self.settings,
            "params": self.params,
            "solution_ids": self.cleaned_data["solution_ids"],
        }
