"""The API's OpenAPI schema is generated without a warning: two serializers sharing a name, a
view whose parameters cannot be read, a field of unknown type each make the schema wrong for
every client generated from it."""

import pytest
from django.core.management import call_command


@pytest.mark.django_db
def test_the_schema_is_valid_and_generated_without_a_warning(tmp_path):
    call_command(
        "spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yml")
    )
    assert (tmp_path / "schema.yml").read_text().startswith("openapi: 3")
