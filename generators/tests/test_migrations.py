"""LocalModel moved from trainer to generators without a row moving (issue 28)."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor


@pytest.mark.django_db(transaction=True)
def test_the_move_keeps_the_rows_and_takes_the_content_type_along():
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes()
    before = [("generators", None)]  # trainer's 0011 goes too: it depends on generators' 0001
    try:
        old = executor.migrate(before).apps
        ContentType = old.get_model("contenttypes", "ContentType")
        Permission = old.get_model("auth", "Permission")
        old_type = ContentType.objects.get(model="localmodel")
        assert old_type.app_label == "trainer"  # moved back by the reverse
        old.get_model("trainer", "LocalModel").objects.create(
            name="smol", kind="checkpoint", path="smol", parameter_count=135
        )

        executor = MigrationExecutor(connection)
        executor.migrate(latest)
    finally:
        MigrationExecutor(connection).migrate(latest)

    from django.contrib.auth.models import Permission
    from django.contrib.contenttypes.models import ContentType

    from generators.models import LocalModel

    assert list(LocalModel.objects.values_list("name", "kind", "parameter_count")) == [
        ("smol", "checkpoint", 135)
    ]
    ContentType.objects.clear_cache()
    new_type = ContentType.objects.get(model="localmodel")
    assert (new_type.pk, new_type.app_label) == (old_type.pk, "generators")
    assert ContentType.objects.get_for_model(LocalModel) == new_type
    assert Permission.objects.filter(content_type=new_type).count() == 4
