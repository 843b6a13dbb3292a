"""The form that starts a sampling run: what to sample, from which generator, how."""

from django import forms

from core.params import form_fields, names, params_from_form
from generators import GeneratorChoice, SamplingSettings, outbound
from generators.forms import clean_generator, generator_fields
from generators.models import LocalModel
from trainer.sampling import services as sampling
from trainer.sampling.models import SamplingRun
from trainer.selection.services import SelectionParams

API_KEY_HELP = (
    "For your own server only: sent with this run's requests, never stored. The operator's "
    "URLs are sent the operator's key."
)


def base_url_help() -> str:
    """Which URLs a run may name, as the form says it: the operator's, or a public server."""
    listed = ", ".join(outbound.operator_urls()) or "none"
    return (
        f"The operator's servers: {listed}. Or your own server (e.g. https://host/v1) at a "
        "public address, with your own API key."
    )


def _ids(text: str, *, what: str) -> list[int]:
    parts = [part for part in text.replace(",", " ").split() if part]
    if not all(part.isdigit() for part in parts):
        raise forms.ValidationError(f"{what} ids are whole numbers, separated by commas.")
    ids = [int(part) for part in parts]
    if any(not 0 < i <= sampling.MAX_ID for i in ids):
        raise forms.ValidationError(f"{what} ids are positive whole numbers.")
    return ids


class SamplingRunForm(forms.Form):
    purpose = forms.ChoiceField(choices=SamplingRun.Purpose.choices, initial="solutions")
    problem_ids = forms.CharField(
        required=False,
        label="Problem ids",
        help_text="Comma-separated; leave empty to choose problems by the filter below.",
    )
    split = forms.CharField(required=False, max_length=32, help_text="e.g. train or test.")
    subject = forms.CharField(required=False, max_length=64)
    level = forms.IntegerField(required=False, min_value=1, max_value=5)
    limit = forms.IntegerField(
        min_value=1,
        max_value=sampling.MAX_ITEMS,
        initial=20,
        label="At most",
        help_text="Problems the filter takes, lowest id first.",
    )
    solution_ids = forms.CharField(
        required=False, label="Solution ids", help_text="For rollouts: comma-separated."
    )
    samples = forms.IntegerField(
        min_value=1,
        max_value=sampling.MAX_SAMPLES["solutions"],
        initial=4,
        label="Samples",
        help_text="Solutions per problem (at most 1024), or rollouts per step (at most 64).",
    )
    api_key = forms.CharField(
        required=False,
        max_length=outbound.MAX_KEY_CHARS,
        label="API key",
        strip=True,
        widget=forms.PasswordInput(render_value=False),
        help_text=API_KEY_HELP,
    )
    then_select = forms.BooleanField(
        required=False, label="Then select the next generation (with the active model version)"
    )

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        what = list(self.fields)[: list(self.fields).index("api_key")]
        self.fields.update(form_fields(sampling.RolloutParams))
        self.fields.update(generator_fields())
        self.fields.update(form_fields(SelectionParams, only=["batch_size"]))
        batch = self.fields["batch_size"]
        batch.label, batch.initial = "Selection batch size", None
        batch.help_text = "Empty: SELECTION_BATCH_SIZE."
        # The key right after the server it is for; the selection's batch size last.
        self.order_fields(
            [
                *what,
                *names(sampling.RolloutParams),
                *names(GeneratorChoice),
                "api_key",
                *names(SamplingSettings),
                "then_select",
            ]
        )
        self.local_models = list(LocalModel.objects.values_list("name", flat=True))
        self.fields["model"].widget.attrs["list"] = "local-models"
        self.fields["base_url"].help_text = base_url_help()

    def clean(self) -> dict:
        data = super().clean()
        if self.errors:
            return data
        chosen = clean_generator(self, api_key=data.get("api_key", ""))
        rollout = params_from_form(self, sampling.RolloutParams, only=names(sampling.RolloutParams))
        if chosen is None or rollout is None:
            return data
        self.search = rollout.search
        self.generator, self.settings = chosen
        self.problem_ids = self.solution_ids = None
        if data["purpose"] == SamplingRun.Purpose.SOLUTIONS:
            ids = _ids(data.get("problem_ids", ""), what="Problem")
            if not ids:
                ids = sampling.problem_ids_matching(
                    split=data.get("split", ""),
                    subject=data.get("subject", ""),
                    level=data.get("level"),
                    limit=data["limit"],
                )
                if not ids:
                    raise forms.ValidationError("No problem matches the filter.")
            self.problem_ids = ids
        else:
            self.solution_ids = _ids(data.get("solution_ids", ""), what="Solution")
            if not self.solution_ids:
                raise forms.ValidationError("A run of rollouts needs solution ids.")
        self.then_select = None
        if data.get("then_select"):
            self.then_select = params_from_form(
                self, SelectionParams, only=["batch_size"]
            ).to_dict()
        return data

    def request_kwargs(self) -> dict:
        """What `request_sampling_run` takes besides the user, once the form is valid."""
        return {
            "purpose": self.cleaned_data["purpose"],
            "generator": self.generator,
            "settings": self.settings,
            "samples": self.cleaned_data["samples"],
            "problem_ids": self.problem_ids,
            "solution_ids": self.solution_ids,
            "then_select": self.then_select,
            "search": self.search,
        }
