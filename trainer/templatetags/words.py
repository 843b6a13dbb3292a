"""Names as people read them: a metric's and a selection strategy's (the keys stay the API's)."""

from django import template

from trainer.selection.strategies import STRATEGY_WORDS
from trainer.training.metrics import name_of

register = template.Library()
register.filter("metric_name", name_of)


@register.filter
def strategy_name(name: str | None) -> str:
    return STRATEGY_WORDS.get(name or "", (name or "").replace("_", " "))
