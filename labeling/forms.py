from django import forms

from core.params import names
from generators import PROPOSAL_SETTINGS, GeneratorChoice, outbound
from generators.forms import clean_generator, generator_fields
from labeling.export import ExportFilters
from labeling.filters import FilterForm
from labeling.models import Generation


class ExportForm(FilterForm):
    """The data filters (`DataFilters`, whose `generation` is the label's) and the export's own
    options."""

    since = forms.DateTimeField(required=False, help_text="Submitted at or after")
    labeler = forms.UUIDField(required=False, help_text="Labeler UUID")
    include_quality_control = forms.BooleanField(
        required=False, initial=True, label="Include quality-control sessions"
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["generation"].widget.attrs["list"] = "generations"
        self.generations = Generation.objects.values_list("number", flat=True)

    @property
    def option_fields(self) -> list:
        return [self[name] for name in ("since", "labeler", "include_quality_control")]

    def filters(self) -> ExportFilters:
        """The export's own options; the data filters (`data_filters`) choose the labels."""
        data = self.cleaned_data
        return ExportFilters(
            since=data["since"],
            labeler=data["labeler"],
            include_quality_control=data["include_quality_control"],
        )


class ApiTokenForm(forms.Form):
    expires_in_days = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=3650,
        label="Expires in (days)",
        help_text="Leave empty for a token that does not expire.",
    )


class LiveGenerationForm(forms.Form):
    """A live (phase-1) generation: problems, the generator, its sampling, proposals per step."""

    problems = forms.CharField(
        help_text="Problem ids, separated by commas or spaces.",
        widget=forms.Textarea(attrs={"rows": 2}),
    )
    proposals = forms.IntegerField(min_value=1, max_value=8, initial=3, label="Proposals per step")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields.update(generator_fields(defaults=PROPOSAL_SETTINGS))
        self.order_fields(["problems", *names(GeneratorChoice), "proposals"])
        # A live generation lasts for hours of labeling: no key of a researcher's is kept that
        # long, so a server of their own is one that needs none.
        listed = ", ".join(outbound.operator_urls()) or "none"
        self.fields["base_url"].help_text = (
            f"For a server: one of the operator's ({listed}), or a server of your own at a "
            "public address that needs no key."
        )

    def clean_problems(self) -> list[int]:
        words = self.cleaned_data["problems"].replace(",", " ").split()
        if not words or not all(w.isdigit() for w in words):
            raise forms.ValidationError("Problem ids are whole numbers.")
        return [int(w) for w in words]

    def clean(self):
        data = super().clean()
        if not self.errors:
            chosen = clean_generator(self, defaults=PROPOSAL_SETTINGS)
            if chosen is not None:
                data["generator"], data["settings"] = chosen
        return data

    def service_arguments(self) -> dict:
        data = self.cleaned_data
        return {
            "problem_ids": data["problems"],
            "generator": data["generator"],
            "settings": data["settings"],
            "proposals": data["proposals"],
        }
