"""The colour scale of PRM scores on the inspection pages: a CSS class per score bucket."""

from django import template

register = template.Library()

# A score (p(step ok), 0..1) takes the first bucket whose lower bound it reaches.
BUCKETS = ((0.8, "score-high"), (0.6, "score-fair"), (0.4, "score-mid"), (0.2, "score-low"))


@register.filter
def score_bucket(score: float | None) -> str:
    if score is None:
        return "score-none"
    return next((name for low, name in BUCKETS if score >= low), "score-bad")


@register.filter
def rating_class(rating: int) -> str:
    """The workbench's badge class of a human rating."""
    return {1: "good", 0: "ok", -1: "bad"}.get(rating, "")
