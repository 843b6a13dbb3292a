"""Lists of row ids taken from a request: one field shape and one limit (MAX_JSON_ARRAY_ITEMS)
for every list of ids the API takes, so no endpoint validates a million ids one by one."""

from django.conf import settings
from rest_framework import serializers

# A row id the database can hold: a larger one is a 400, not a 500.
MAX_ID = 2**63 - 1


def id_list_field(**kwargs) -> serializers.ListField:
    """A list of positive row ids of at most MAX_JSON_ARRAY_ITEMS; `kwargs` go to ListField
    (required, min_length, help_text, a smaller max_length)."""
    kwargs.setdefault("max_length", settings.MAX_JSON_ARRAY_ITEMS)
    return serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=MAX_ID), **kwargs
    )
