"""LocalModel now lives in the generators app (its 0001 takes the table over as it is)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("trainer", "0010_jobs"),
        ("generators", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="LocalModel")],
            database_operations=[],
        ),
    ]
