"""Formatting of the quality figures: missing values show as a dash, not as 0."""

from django import template

register = template.Library()
DASH = "–"


def _number(value) -> bool:
    # A figure that does not exist (no gold yet, no time on task) arrives as None or "".
    return isinstance(value, int | float) and not isinstance(value, bool)


@register.filter
def percent(value: float | None) -> str:
    return f"{value:.0%}" if _number(value) else DASH


@register.filter
def rate(value: float | None) -> str:
    return f"{value:.1f}" if _number(value) else DASH


@register.filter
def duration_ms(value: int | None) -> str:
    """Milliseconds as '1 h 05 min', '12 min' or '40 s'."""
    seconds = (value or 0) // 1000
    hours, rest = divmod(seconds, 3600)
    minutes = rest // 60
    if hours:
        return f"{hours} h {minutes:02d} min"
    if minutes:
        return f"{minutes} min"
    return f"{seconds} s"


@register.filter
def finish_reason(value: str | None) -> str:
    """A label's finish reason in words ("Found an error"), as LabelingSession says it."""
    from labeling.models import FinishReason

    return dict(FinishReason.choices).get(value or "", value or DASH)
