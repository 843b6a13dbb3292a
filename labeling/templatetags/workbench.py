"""The workbench's rating controls, drawn in Python: a rating's answer re-renders every shown
item's controls, and as an included template they were a quarter of that request's time."""

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
    step = item.index + 1
    label = (
        f"Rate alternative {item.completion} of step {step}"
        if item.completion
        else f"Rate step {step}"
    )
    stored = (
        format_html(' data-rated="{}" data-flagged="{}"', item.rating, "1" if item.flagged else "0")
        if item.rating is not None
        else ""
    )
    buttons = format_html_join(
        "",
        '<button type="button" class="{}{}" data-rating="{}" aria-pressed="{}">{}</button>',
        (
            (
                css,
                " chosen" if item.rating == value else "",
                value,
                "true" if item.rating == value else "false",
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
        item.index,
        item.completion or 0,
        stored,
        buttons,
        item.key,
        " checked" if item.flagged else "",
    )
