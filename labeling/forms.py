from django import forms

from labeling.export import ExportFilters
from labeling.models import Generation


class ExportForm(forms.Form):
    generation = forms.IntegerField(required=False, help_text="Generation number")
    since = forms.DateTimeField(required=False, help_text="Submitted at or after")
    labeler = forms.UUIDField(required=False, help_text="Labeler UUID")
    include_quality_control = forms.BooleanField(
        required=False, initial=True, label="Include quality-control sessions"
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["generation"].widget.attrs["list"] = "generations"
        self.generations = Generation.objects.values_list("number", flat=True)

    def filters(self) -> ExportFilters:
        data = self.cleaned_data
        return ExportFilters(
            generation=data["generation"],
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
