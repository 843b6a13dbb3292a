"""A local model's files go into the artifact store (issue 39): the record holds the reference.

Records made before keep a blank artifact; `manage.py register_models`, run on the host that
has their files, publishes them.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("generators", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="localmodel",
            name="artifact",
            field=models.CharField(
                blank=True,
                help_text="Artifact store reference of the model's files; blank: recorded "
                "before the store (read from PRM_MODEL_DIR on the host that has them).",
                max_length=1024,
            ),
        ),
    ]
