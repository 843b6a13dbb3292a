"""The researcher's forms: a training run's parameters (drawn from TrainingParams), a
generation's selection parameters, and the TRL export's filters and example parameters."""

from django import forms
from django.utils.html import format_html, format_html_join

from core.params import form_fields, names, params_from_form
from generators.models import LocalModel
from labeling.filters import FilterForm
from labeling.services.overlap import OverlapParams
from trainer.selection.services import SelectionParams
from trainer.training.base_models import refusal as base_model_refusal
from trainer.training.params import TrainingParams


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
    """The TrainingParams fields marked `form=True`; the others keep their defaults. Every field
    may be left empty (its default applies), as in the API."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields.update(form_fields(TrainingParams))
        # The recorded checkpoints are offered by name; a path inside PRM_MODEL_DIR still works.
        recorded = list(
            LocalModel.objects.filter(kind=LocalModel.Kind.CHECKPOINT).values_list(
                "name", flat=True
            )
        )
        self.fields["base_model"].widget = SuggestingInput(options=recorded)
        self.recorded = recorded
        if recorded:
            self.fields["base_model"].help_text += f" Recorded: {', '.join(recorded)}."

    def clean(self):
        data = super().clean()
        if not self.errors:
            self.training_params = params_from_form(
                self, TrainingParams, only=list(self.fields), build=TrainingParams.requested
            )
            self._reword_base_model_refusal()
        return data

    def _reword_base_model_refusal(self) -> None:
        # The API's refusal names PRM_MODEL_DIR's place on the server; a person at the form is
        # told what to choose instead, and no path of the server's (issue 43).
        errors = self.errors.get("base_model")
        if not errors or base_model_refusal() not in errors:
            return
        message = base_model_refused(recorded=self.recorded)
        self.errors["base_model"] = self.error_class(
            [message if error == base_model_refusal() else error for error in errors]
        )


def base_model_refused(*, recorded: list[str]) -> str:
    """The form's one sentence for every base model refused at request time (as the API's,
    nothing in it depends on the disk), naming the recorded checkpoints to choose from."""
    choose = f"Choose a recorded one ({', '.join(recorded)}), or leave" if recorded else "Leave"
    return (
        "No recorded checkpoint model has this name, and it is not a checkpoint directory "
        f"inside the models directory. {choose} the field empty for the default base model."
    )


class OverlapForm(forms.Form):
    """A generation's overlap, changed after it was published."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields.update(form_fields(OverlapParams, required=True))

    def clean(self):
        data = super().clean()
        if not self.errors:
            params_from_form(self, OverlapParams, only=names(OverlapParams))
        return data


class GenerationForm(forms.Form):
    """Selection parameters for publishing the next generation; initial values are the
    SELECTION_* settings, and the overlap, the judge display and the ensemble may be left empty
    for theirs."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        optional = {
            "overlap_share",
            "overlap_labelers",
            "judge_display",
            "ensemble_members",
            "ensemble_dropout",
        }
        required = set(names(SelectionParams)) - optional
        self.fields.update(form_fields(SelectionParams, required=required))

    def clean(self):
        data = super().clean()
        if not self.errors:
            self.selection_params = params_from_form(
                self, SelectionParams, only=names(SelectionParams)
            )
        return data

    def params(self) -> SelectionParams:
        return self.selection_params


class StepwiseExportForm(FilterForm):
    """The data filters (`DataFilters`) and the training parameters that choose the examples
    (`EXAMPLE_PARAMS`, as `manage.py export_stepwise` takes them)."""

    def __init__(self, *args, **kwargs) -> None:
        from trainer.stepwise_download import EXAMPLE_PARAMS

        super().__init__(*args, **kwargs)
        self.example_params = EXAMPLE_PARAMS
        self.fields.update(form_fields(TrainingParams, only=EXAMPLE_PARAMS))

    @property
    def option_fields(self) -> list:
        return [self[name] for name in self.example_params]

    def params(self) -> TrainingParams | None:
        return params_from_form(self, TrainingParams, only=self.example_params)
