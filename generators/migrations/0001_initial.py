"""LocalModel moves here from trainer: its table (trainer_localmodel) and rows stay as they are.

Only Django's state changes (trainer's 0011 deletes the model from its own state, after this),
and the model's content type, with the permissions that hang on it, changes app.
"""

from django.db import migrations, models


def _move_content_type(apps, schema_editor, source, target):
    ContentType = apps.get_model("contenttypes", "ContentType")
    db = schema_editor.connection.alias
    types = ContentType.objects.using(db)
    if types.filter(app_label=target, model="localmodel").exists():
        return
    types.filter(app_label=source, model="localmodel").update(app_label=target)


def forwards(apps, schema_editor):
    _move_content_type(apps, schema_editor, "trainer", "generators")


def backwards(apps, schema_editor):
    _move_content_type(apps, schema_editor, "generators", "trainer")


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("trainer", "0007_local_models"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="LocalModel",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("name", models.CharField(max_length=255, unique=True)),
                        (
                            "kind",
                            models.CharField(
                                choices=[
                                    ("checkpoint", "Checkpoint directory"),
                                    ("gguf", "GGUF file"),
                                ],
                                max_length=16,
                            ),
                        ),
                        (
                            "path",
                            models.CharField(
                                help_text="Inside PRM_MODEL_DIR.", max_length=1024, unique=True
                            ),
                        ),
                        ("architecture", models.CharField(blank=True, max_length=128)),
                        ("parameter_count", models.BigIntegerField(blank=True, null=True)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                    ],
                    options={
                        "db_table": "trainer_localmodel",
                        "ordering": ["name"],
                        "constraints": [
                            models.CheckConstraint(
                                condition=models.Q(("kind__in", ["checkpoint", "gguf"])),
                                name="local_model_kind_valid",
                            )
                        ],
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(forwards, backwards, elidable=False),
    ]
