"""Parameter sets, each defined once; its form, serializer and command options derived from it.

A parameter set is a frozen dataclass that subclasses `Params` and makes its fields with
`param`: the default (or the setting it comes from), the words a person reads (label, help),
bounds or choices. From that one definition come

- the check of every value (`check_value`, run by the dataclass itself on construction, so an
  instance is valid wherever it came from, with one sentence per refusal);
- a web form's fields (`form_fields`) and the form's validation (`params_from_form`);
- an API serializer's fields (`serializer_fields`) and its validation (`params_from_data`);
- a management command's options (`add_arguments`, `given_options`), HfArgumentParser-style:
  `--batch-size N`, a bool as `--x/--no-x`.

A field typed `tuple[X, ...]` is a list parameter: its bounds and choices hold for each value,
and it takes a list or the comma-separated text a form field and an option give (`--seeds 0,1,2`).

The derived form and serializer fields only parse (a number out of text); their bounds and
choices are checked by the dataclass, so a bad value is refused with the same sentence from the
form, the API and the command line. The browser still gets the bounds as hints.

The ground floor: nothing here imports an app, and Django's forms and DRF are imported only by
the functions that build them (the training loop imports its parameters without Django).
"""

import argparse
import math
import types
import typing
from collections.abc import Callable, Collection, Mapping
from dataclasses import MISSING, Field, asdict, field, fields, replace
from typing import Any, ClassVar, Self

from core.errors import Invalid

_KINDS = {"bool": bool, "int": int, "float": float, "str": str}


def param(
    default: Any = MISSING,
    *,
    label: str,
    help: str = "",
    setting: str = "",
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
    choices: Mapping[str, str] | tuple[str, ...] | Callable[[], Mapping[str, str]] = (),
    form: bool = True,
) -> Any:
    """A dataclass field with what the form, the serializer, the options and the check need.

    `setting` names the Django setting the default is read from (when the set is made, so a
    changed setting applies without a restart); `low`/`high` bound the value (inclusive unless
    `low_open`/`high_open`); `choices` are the allowed values, or a mapping of each to the words
    a form shows for it, or a function that gives that mapping each time it is read (a registry
    that grows after the set is defined: `trainer.training.label_sources`); `form=False` keeps a
    rarely changed parameter off the web form (the API and the command line still take it).
    """
    if callable(choices):
        labels: Mapping[str, str] = LiveChoices(choices)
    elif isinstance(choices, LiveChoices):
        labels = choices
    else:
        labels = dict(choices) if isinstance(choices, Mapping) else {c: c for c in choices}
    meta = {
        "label": label,
        "help": help,
        "setting": setting,
        "low": low,
        "high": high,
        "low_open": low_open,
        "high_open": high_open,
        "choices": labels.keys() if isinstance(labels, LiveChoices) else tuple(labels),
        "choice_labels": labels,
        "form": form,
    }
    if setting:
        return field(default_factory=lambda: _setting(setting), metadata=meta)
    return field(default=default, metadata=meta)


class LiveChoices(Mapping):
    """Choices read from a registry each time they are asked for, so that an entry registered
    after the parameter set was defined is offered and accepted like the others."""

    def __init__(self, read: Callable[[], Mapping[str, str]]) -> None:
        self.read = read

    def __getitem__(self, key: str) -> str:
        return self.read()[key]

    def __iter__(self):
        return iter(self.read())

    def __len__(self) -> int:
        return len(self.read())

    def __contains__(self, key: object) -> bool:
        # A value sent as a list or an object is no choice, not an error of the check.
        return isinstance(key, str) and key in self.read()


def like(other: type, name: str, **changes: Any) -> Any:
    """A field with the bounds and choices of `other`'s field `name`, and `changes` (label,
    help, default or setting): one range for one quantity that two sets both take."""
    meta = dict(next(f for f in fields(other) if f.name == name).metadata)
    meta["choices"] = meta.pop("choice_labels")
    return param(**{**meta, **changes})


def _setting(name: str) -> Any:
    from django.conf import settings

    return getattr(settings, name)


def refused(error: type[Invalid], name: str | None, message: str) -> Invalid:
    """`error(message)` that knows which parameter it is about (`field`), for a form to show it
    beside that field and a serializer to key it by that name."""
    exc = error(message)
    exc.field = name
    return exc


# --- one value against its field -------------------------------------------------------------


def value_type(f: Field) -> type:
    """The value type of a field whose annotation may be `X | None` (or its string); `tuple`
    for a list parameter (`tuple[X, ...]`, whose values are `item_type`)."""
    return _annotation(f)[0]


def item_type(f: Field) -> type:
    """The type of each value of a list parameter (a field typed `tuple[X, ...]`)."""
    kind = f.type
    if isinstance(kind, str):
        inner = kind.split("|")[0].strip().removeprefix("tuple[").split(",")[0]
        return _KINDS[inner.strip()]
    if isinstance(kind, types.UnionType):
        kind = next(a for a in typing.get_args(kind) if a is not type(None))
    return typing.get_args(kind)[0]


def is_optional(f: Field) -> bool:
    return _annotation(f)[1]


def _annotation(f: Field) -> tuple[type, bool]:
    kind = f.type
    if isinstance(kind, str):
        names = [part.strip() for part in kind.split("|")]
        first = tuple if names[0].startswith("tuple[") else _KINDS[names[0]]
        return first, "None" in names
    args = typing.get_args(kind) if isinstance(kind, types.UnionType) else ()
    if args:
        kind, optional = next(a for a in args if a is not type(None)), type(None) in args
    else:
        optional = False
    return (tuple if typing.get_origin(kind) is tuple else kind), optional


def default_of(f: Field) -> Any:
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        return f.default_factory()
    return None


def _shown(bound: float) -> str:
    return f"{bound:,}" if isinstance(bound, int) else f"{bound:g}"


def check_value(f: Field, value: Any, *, error: type[Invalid] = Invalid) -> Any:
    """`value` as field `f` takes it (a whole float as int, text stripped, empty text as None
    where None is allowed), or `error` naming the field. Types are strict: a JSON `true` is
    not a count and "nan" is not a rate. A list parameter's values are checked one by one."""
    name, meta, kind = f.name, f.metadata, value_type(f)
    if kind is str and isinstance(value, str):
        value = value.strip() or (None if is_optional(f) else "")
    if value is None and is_optional(f):
        return None
    if kind is tuple:
        return _items(f, value, error=error)
    return _one(name, meta, kind, value, error=error)


def _items(f: Field, value: Any, *, error: type[Invalid]) -> tuple:
    """A list parameter's values, each checked as a field of its item type with the same
    bounds and choices; comma-separated text is split (and its numbers read) first. Each value
    counts once, in the order given: a seed or a best-of N twice would only repeat a run."""
    name, kind = f.name, item_type(f)
    if isinstance(value, str):
        parts = [part.strip() for part in value.split(",") if part.strip()]
        try:
            value = parts if kind is str else [kind(part) for part in parts]
        except ValueError:
            whole = "whole numbers" if kind is int else "numbers"
            raise refused(error, name, f"{name} takes comma-separated {whole}.") from None
    if not isinstance(value, list | tuple):
        raise refused(error, name, f"{name} must be a list.")
    if not value:
        raise refused(error, name, f"{name} needs at least one value.")
    checked = (_one(name, f.metadata, kind, item, error=error) for item in value)
    return tuple(dict.fromkeys(checked))


def _one(name: str, meta: Mapping[str, Any], kind: type, value: Any, *, error) -> Any:
    if kind is bool:
        if not isinstance(value, bool):
            raise refused(error, name, f"{name} must be true or false.")
        return value
    if kind is str:
        if meta["choices"] and (not isinstance(value, str) or value not in meta["choices"]):
            raise refused(error, name, f"{name} must be one of {', '.join(meta['choices'])}.")
        if not isinstance(value, str):
            raise refused(error, name, f"{name} must be text.")
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        whole = "a whole number" if kind is int else "a number"
        raise refused(error, name, f"{name} must be {whole}.")
    if kind is int:
        if isinstance(value, float) and not value.is_integer():
            raise refused(error, name, f"{name} must be a whole number.")
        value = int(value)
    else:
        value = float(value)
        if not math.isfinite(value):
            raise refused(error, name, f"{name} must be a finite number.")
    return _in_bounds(name, value, meta=meta, error=error)


def _in_bounds(name: str, value: float, *, meta, error: type[Invalid]) -> float:
    low, high = meta["low"], meta["high"]
    if low is not None and (value < low or (meta["low_open"] and value == low)):
        if meta["low_open"]:
            raise refused(error, name, f"{name} must be above {_shown(low)}.")
        if low == 0:
            raise refused(error, name, f"{name} cannot be negative.")
        raise refused(error, name, f"{name} must be at least {_shown(low)}.")
    if high is not None and (value > high or (meta["high_open"] and value == high)):
        if meta["high_open"]:
            raise refused(error, name, f"{name} must be below {_shown(high)}.")
        if low is not None and not meta["low_open"]:
            raise refused(error, name, f"{name} must be between {_shown(low)} and {_shown(high)}.")
        raise refused(error, name, f"{name} must be at most {_shown(high)}.")
    return value


# --- the set ---------------------------------------------------------------------------------


class Params:
    """The base of a parameter set (a frozen dataclass of `param` fields): valid by construction.

    A subclass names its refusal (`invalid`) and what one of its parameters is called in a
    sentence (`noun`); checks between fields go in its `__post_init__`, after this one's.
    """

    invalid: ClassVar[type[Invalid]] = Invalid
    noun: ClassVar[str] = "parameter"

    def __post_init__(self) -> None:
        for f in fields(self):
            value = check_value(f, getattr(self, f.name), error=self.invalid)
            object.__setattr__(self, f.name, value)

    @classmethod
    def from_dict(cls, values: Mapping[str, Any] | None, *, defaults: Self | None = None) -> Self:
        """The set `values` give; a value left out, None or empty takes its default (from
        `defaults` when given). The refusal names the first bad parameter."""
        if values is None:
            values = {}
        if not isinstance(values, Mapping):
            raise cls.invalid(f"{cls.noun.capitalize()}s are an object.")
        unknown = sorted(str(name) for name in set(values) - set(names(cls)))
        if unknown:
            raise cls.invalid(f"Unknown {cls.noun}(s): {', '.join(unknown)}.")
        given = {key: value for key, value in values.items() if not _empty(value)}
        return replace(defaults, **given) if defaults is not None else cls(**given)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def check(cls, **values: Any) -> dict[str, Any]:
        """Some of the set's parameters, each checked as the set checks it (for a function that
        takes only a few of them)."""
        by_name = {f.name: f for f in fields(cls)}
        return {
            name: check_value(by_name[name], value, error=cls.invalid)
            for name, value in values.items()
        }


def _empty(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def names(cls: type) -> list[str]:
    return [f.name for f in fields(cls)]


def _chosen(cls: type, chosen: Collection[str] | None) -> list[Field]:
    return [f for f in fields(cls) if chosen is None or f.name in chosen]


def describe(cls: type) -> str:
    """The set's parameter names, for an API field that takes them as one object."""
    return ", ".join(names(cls))


# --- a web form ------------------------------------------------------------------------------


def form_fields(
    cls: type,
    *,
    only: Collection[str] | None = None,
    required: bool | Collection[str] = False,
    defaults: Params | None = None,
) -> dict[str, Any]:
    """Django form fields of the set's fields (`only` these, else those marked `form`), their
    initial values the defaults (`defaults`' when given).

    `required`: True, False or the names that must be filled; an empty field takes its default.
    The fields parse text into values; `params_from_form` checks them against the set.
    """
    from django import forms

    class ChoiceField(forms.ChoiceField):
        def valid_value(self, value) -> bool:
            return True  # the set says which are allowed, in its own words

    made = {}
    for f in _chosen(cls, only):
        if only is None and not f.metadata["form"]:
            continue
        meta, kind = f.metadata, value_type(f)
        initial = getattr(defaults, f.name) if defaults is not None else default_of(f)
        needed = required if isinstance(required, bool) else f.name in required
        common = {"label": meta["label"], "help_text": meta["help"], "initial": initial}
        if kind is bool:
            made[f.name] = forms.BooleanField(required=False, **common)
        elif kind is tuple:
            # The comma-separated text; the set splits and checks it.
            common["initial"] = ",".join(map(str, initial or ()))
            made[f.name] = forms.CharField(required=needed, **common)
        elif meta["choices"]:
            blank = [("", "—")] if is_optional(f) else []
            made[f.name] = ChoiceField(
                choices=blank + list(meta["choice_labels"].items()), required=needed, **common
            )
        elif kind is str:
            made[f.name] = forms.CharField(required=needed, **common)
        else:
            hints = {
                key: value
                for key, value in (("min", meta["low"]), ("max", meta["high"]))
                if value is not None
            }
            if kind is float:
                hints["step"] = "any"
            number = forms.IntegerField if kind is int else forms.FloatField
            made[f.name] = number(required=needed, widget=forms.NumberInput(attrs=hints), **common)
    return made


def params_from_form(form, cls: type, *, only: Collection[str], build=None) -> Any:
    """`build(values)` (default: `cls.from_dict`) of the form's fields `only`, or None with each
    refusal shown beside the field it names (above the form when it names none)."""
    values = {name: form.cleaned_data.get(name) for name in only}
    try:
        return (build or cls.from_dict)(values)
    except Invalid as exc:
        for name, message in refusals(cls, values, exc).items():
            form.add_error(name if name in form.fields else None, message)
        return None


def refusals(cls: type, values: Mapping[str, Any], first: Invalid) -> dict[str | None, str]:
    """Every given value of the set that its field refuses, by name; else `first`, the refusal
    that made the set itself (between fields, or beyond them). A form or a serializer shows
    them all at once, as it would its own fields' errors."""
    by_name = {f.name: f for f in fields(cls)}
    found: dict[str | None, str] = {}
    for name, value in values.items():
        if name in by_name and not _empty(value):
            try:
                check_value(by_name[name], value, error=cls.invalid)
            except Invalid as exc:
                found[name] = str(exc)
    return found or {getattr(first, "field", None): str(first)}


# --- an API serializer -----------------------------------------------------------------------


def serializer_fields(
    cls: type, *, only: Collection[str] | None = None, required: bool = False
) -> dict[str, Any]:
    """DRF fields of the set's fields, optional unless `required` (left out or null: the
    default). They pass the JSON value through as sent; `params_from_data` checks it against
    the set."""
    from rest_framework import serializers

    def as_sent(base):
        return type(base.__name__, (base,), {"to_internal_value": lambda self, data: data})

    made = {}
    for f in _chosen(cls, only):
        meta, kind = f.metadata, value_type(f)
        common = {"required": required, "allow_null": not required, "help_text": _words(f)}
        if kind is tuple:
            # A JSON list (or its comma-separated text), checked by the set.
            made[f.name] = as_sent(serializers.ListField)(**common)
        elif meta["choices"]:
            made[f.name] = as_sent(serializers.ChoiceField)(choices=meta["choices"], **common)
        elif kind is str:
            made[f.name] = as_sent(serializers.CharField)(allow_blank=True, **common)
        else:
            base = {
                bool: serializers.BooleanField,
                int: serializers.IntegerField,
                float: serializers.FloatField,
            }[kind]
            made[f.name] = as_sent(base)(**common)
    return made


def params_from_data(cls: type, data: Mapping[str, Any], *, build=None) -> Any:
    """`build(data)` (default: `cls.from_dict`), its refusals as the serializer's errors keyed
    by the parameters they name."""
    from rest_framework import serializers

    try:
        return (build or cls.from_dict)(dict(data))
    except Invalid as exc:
        found = refusals(cls, data, exc)
        if list(found) == [None]:
            raise serializers.ValidationError(list(found.values())) from None
        raise serializers.ValidationError({k: [v] for k, v in found.items()}) from None


# --- a command's options ---------------------------------------------------------------------


def option(name: str) -> str:
    return "--" + name.replace("_", "-")


def _words(f: Field) -> str:
    meta = f.metadata
    words = meta["label"] + (f": {meta['help']}" if meta["help"] else "")
    low, high, low_open, high_open = (meta[k] for k in ("low", "high", "low_open", "high_open"))
    if low is not None and high is not None and not (low_open or high_open):
        return f"{words} [{_shown(low)} to {_shown(high)}]"
    bounds = [
        f"{above} {_shown(bound)}"
        for bound, above in (
            (low, "above" if low_open else "at least"),
            (high, "below" if high_open else "at most"),
        )
        if bound is not None
    ]
    return f"{words} [{', '.join(bounds)}]" if bounds else words


_METAVARS = {int: "N", float: "X", str: "TEXT"}


def add_arguments(
    parser: argparse.ArgumentParser,
    cls: type,
    *,
    only: Collection[str] | None = None,
    aliases: Mapping[str, tuple[str, ...]] | None = None,
) -> None:
    """One option per field of the set (`only` these): `--name-with-dashes VALUE`, a bool as
    `--x/--no-x`, a list parameter as `--name A,B,C`.

    Left out, an option is None and the parameter takes the set's default (the help says it).
    `aliases` adds other spellings of a field's option.
    """
    group = parser.add_argument_group(f"{cls.noun}s", f"The fields of {cls.__name__}.")
    for f in _chosen(cls, only):
        meta, kind = f.metadata, value_type(f)
        flags = [option(f.name), *(aliases or {}).get(f.name, ())]
        default = f"setting {meta['setting']}" if meta["setting"] else default_of(f)
        default = "none" if default is None else default
        if kind is tuple and isinstance(default, tuple):
            default = ",".join(map(str, default))
        shown = f"{_words(f)} (default: {default})".replace("%", "%%")
        if kind is bool:
            group.add_argument(
                *flags,
                dest=f.name,
                action=argparse.BooleanOptionalAction,
                default=None,
                help=shown,
            )
        elif kind is tuple:
            # The text as given: the set splits it and refuses a bad value in its own words.
            one = (
                "{" + ",".join(meta["choices"]) + "}"
                if meta["choices"]
                else _METAVARS[item_type(f)]
            )
            group.add_argument(*flags, dest=f.name, default=None, metavar=f"{one},...", help=shown)
        elif meta["choices"]:
            # Listed, not enforced by argparse: the set refuses a bad one in its own words.
            metavar = "{" + ",".join(meta["choices"]) + "}"
            group.add_argument(*flags, dest=f.name, default=None, metavar=metavar, help=shown)
        else:
            metavar = _METAVARS[kind]
            group.add_argument(
                *flags, dest=f.name, type=kind, default=None, metavar=metavar, help=shown
            )


def given_options(cls: type, options: Mapping[str, Any]) -> dict[str, Any]:
    """The set's parameters given on the command line (the others take their defaults)."""
    return {name: options[name] for name in names(cls) if options.get(name) is not None}
