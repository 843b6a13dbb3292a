"""The workbench's rating controls, drawn in Python: a rating's answer re-renders every shown
item's controls, and as an included template they were a quarter of that request's time.
Drawn once per distinct state and kept: format_html's escaping was still two fifths of the
render, for controls whose every part is a small number, a flag or a fixed text."""

from functools import lru_cache

from django import template
from django.utils.html import format_html, format_html_join

register = template.Library()


@register.simple_tag
def rate_buttons(item, choices) -> str:
    """Rating controls for one item: a step (completion 0) or one of its alternatives.

    The buttons and the box send nothing themselves: workbench.js queues each press and sends
    them one at a time, naming the item, so that presses typed ahead of the network apply in
    order. data-rated and data-flagged are what is stored.
    """
    return _drawn(
        item.index,
        item.completion or 0,
        item.rating,
        bool(item.flagged),
        item.key,
        choices,
        getattr(item, "suggestion", None),
    )


# Steps x completions x ratings x flags: a few thousand states at real lengths (40 steps).
@lru_cache(maxsize=16384)
def _drawn(
    index: int,
    completion: int,
    rating: int | None,
    flagged: bool,
    key: str,
    choices,
    suggestion: int | None = None,
):
    step = index + 1
    label = f"Rate alternative {completion} of step {step}" if completion else f"Rate step {step}"
    stored = (
        format_html(' data-rated="{}" data-flagged="{}"', rating, "1" if flagged else "0")
        if rating is not None
        else ""
    )
    # The judge's suggestion (confirm) is marked on its button, never pressed for the labeler.
    buttons = format_html_join(
        "",
        '<button type="button" class="{}{}{}" data-rating="{}" aria-pressed="{}">{}</button>',
        (
            (
                css,
                " chosen" if rating == value else "",
                " suggested" if suggestion == value else "",
                value,
                "true" if rating == value else "false",
                text,
            )
            for value, css, text in choices
        ),
    )
    return format_html(
        '<div class="rate" role="group" aria-label="{}" data-step="{}" data-completion="{}"{}>'
        "{}"
        '<label class="unsure"><input type="checkbox" id="flag-{}" name="flagged" value="1"{}>'
        " unsure</label></div>",
        label,
        index,
        completion,
        stored,
        buttons,
        key,
        " checked" if flagged else "",
    )
