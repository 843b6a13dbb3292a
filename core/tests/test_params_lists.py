"""List parameters (`tuple[X, ...]` fields of a `core.params` set): one definition gives the
check of each value, a comma-separated option, a form's text field and an API list."""

import argparse
from dataclasses import dataclass

import pytest
from django import forms
from rest_framework import serializers

from core.errors import Invalid
from core.params import (
    Params,
    add_arguments,
    form_fields,
    given_options,
    names,
    param,
    params_from_data,
    params_from_form,
    serializer_fields,
)


@dataclass(frozen=True)
class Sweep(Params):
    noun = "sweep parameter"

    sizes: tuple[int, ...] = param((1, 4), label="Sizes", low=1)
    arms: tuple[str, ...] = param(("human",), label="Arms", choices=("human", "rollout"))
    rates: tuple[float, ...] = param((0.5,), label="Rates", low=0, high=1)
    trials: int = param(10, label="Trials", low=1)


def test_a_list_takes_a_list_or_its_comma_separated_text_each_value_once():
    assert Sweep().sizes == (1, 4)
    assert Sweep(sizes=" 1, 4,,16 ").sizes == (1, 4, 16)
    assert Sweep(sizes=[16, 4, 16]).sizes == (16, 4)  # a repeat counts once, first place kept
    assert Sweep(arms="rollout,human").arms == ("rollout", "human")
    assert Sweep(rates="0.1,1").rates == (0.1, 1.0)
    assert Sweep(sizes=[2.0]).sizes == (2,)  # a whole float is a count, as a single value is


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"sizes": "1,x"}, "sizes takes comma-separated whole numbers."),
        ({"sizes": "1,2.5"}, "sizes takes comma-separated whole numbers."),
        ({"sizes": "4,0"}, "sizes must be at least 1."),
        ({"sizes": []}, "sizes needs at least one value."),
        ({"sizes": 4}, "sizes must be a list."),
        ({"sizes": [True]}, "sizes must be a whole number."),
        ({"arms": "human,crowd"}, "arms must be one of human, rollout."),
        ({"rates": "0.5,nan"}, "rates must be a finite number."),
        ({"rates": "0.5,2"}, "rates must be between 0 and 1."),
    ],
)
def test_each_value_of_a_list_is_checked_as_its_field_says(values, message):
    with pytest.raises(Invalid, match=message.replace(".", r"\.")) as caught:
        Sweep(**values)
    assert caught.value.field == next(iter(values))


def test_a_list_is_a_comma_separated_option_left_out_its_default():
    parser = argparse.ArgumentParser()
    add_arguments(parser, Sweep)
    given = vars(parser.parse_args(["--sizes", "2,8", "--arms", "rollout"]))
    assert Sweep(**given_options(Sweep, given)) == Sweep(sizes=(2, 8), arms=("rollout",))
    assert Sweep(**given_options(Sweep, vars(parser.parse_args([])))) == Sweep()
    shown = parser.format_help()
    assert "--sizes N,..." in shown and "(default: 1,4)" in shown
    assert "--arms {human,rollout},..." in shown
    bad = vars(parser.parse_args(["--sizes", "2,x"]))
    with pytest.raises(Invalid, match="sizes takes comma-separated whole numbers"):
        Sweep(**given_options(Sweep, bad))


class SweepForm(forms.Form):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields.update(form_fields(Sweep))


def test_a_list_is_a_text_field_of_a_form_refused_beside_it():
    form = SweepForm()
    assert form.fields["sizes"].initial == "1,4"
    form = SweepForm(data={"sizes": "2, 8", "arms": "human,rollout", "rates": "", "trials": ""})
    assert form.is_valid()
    made = params_from_form(form, Sweep, only=names(Sweep))
    assert made == Sweep(sizes=(2, 8), arms=("human", "rollout"))
    form = SweepForm(data={"sizes": "2,0"})
    assert form.is_valid()
    assert params_from_form(form, Sweep, only=names(Sweep)) is None
    assert form.errors["sizes"] == ["sizes must be at least 1."]


class SweepSerializer(serializers.Serializer):
    def get_fields(self):
        return {**super().get_fields(), **serializer_fields(Sweep)}


def test_a_list_is_a_json_list_of_the_api_refused_by_name():
    data = SweepSerializer(data={"sizes": [2, 8], "arms": "rollout"})
    assert data.is_valid(), data.errors
    assert params_from_data(Sweep, data.validated_data) == Sweep(sizes=(2, 8), arms=("rollout",))
    data = SweepSerializer(data={"sizes": [2, 0]})
    assert data.is_valid()
    with pytest.raises(serializers.ValidationError) as caught:
        params_from_data(Sweep, data.validated_data)
    assert caught.value.detail == {"sizes": ["sizes must be at least 1."]}
