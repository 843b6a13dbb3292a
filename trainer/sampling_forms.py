"""The form that starts a sampling run: what to sample, from which generator, how."""

from django import forms

from annotate.errors import DomainError
from trainer import sampling
from trainer.generators import GeneratorSpec, SamplingSettings, outbound
from trainer.models import LocalModel, SamplingRun

DEFAULTS = SamplingSettings()
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
    backend = forms.ChoiceField(
        required=False,
        choices=[
            ("", "Configured default"),
            ("openai", "OpenAI-compatible server"),
            ("local", "Local model"),
        ],
        help_text="The default is GENERATOR_MODEL (and GENERATOR_BASE_URL).",
    )
    model = forms.CharField(
        required=False, max_length=255, help_text="The served model, or a local model's name."
    )
    base_url = forms.CharField(required=False, max_length=1024, label="Base URL")
    api_key = forms.CharField(
        required=False,
        max_length=outbound.MAX_KEY_CHARS,
        label="API key",
        strip=True,
        widget=forms.PasswordInput(render_value=False),
        help_text=API_KEY_HELP,
    )
    temperature = forms.FloatField(initial=DEFAULTS.temperature, min_value=0, max_value=2)
    top_p = forms.FloatField(initial=DEFAULTS.top_p, min_value=0.01, max_value=1, label="top_p")
    max_tokens = forms.IntegerField(initial=DEFAULTS.max_tokens, min_value=1, max_value=32768)
    seed = forms.IntegerField(initial=DEFAULTS.seed, min_value=0, max_value=2**31 - 1)
    then_select = forms.BooleanField(
        required=False, label="Then select the next generation (with the active model version)"
    )
    batch_size = forms.IntegerField(
        required=False,
        min_value=0,
        max_value=1_000_000,
        label="Selection batch size",
        help_text="Empty: SELECTION_BATCH_SIZE.",
    )

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.local_models = list(LocalModel.objects.values_list("name", flat=True))
        self.fields["model"].widget.attrs["list"] = "local-models"
        self.fields["base_url"].help_text = base_url_help()

    def clean(self) -> dict:
        data = super().clean()
        if self.errors:
            return data
        try:
            self.generator = GeneratorSpec.requested(
                {
                    "backend": data["backend"],
                    "model": data.get("model", ""),
                    "base_url": data.get("base_url", ""),
                }
                if data.get("backend")
                else None,
                api_key=data.get("api_key", ""),
            )
            self.settings = SamplingSettings.from_dict(
                {k: data[k] for k in ("temperature", "top_p", "max_tokens", "seed")}
            )
        except DomainError as exc:
            raise forms.ValidationError(str(exc)) from None
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
            batch = data.get("batch_size")
            self.then_select = {} if batch is None else {"batch_size": batch}
        return data
