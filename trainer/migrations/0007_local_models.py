"""LocalModel: the registry of models on disk under PRM_MODEL_DIR (generators/local_models.py)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("trainer", "0006_quality_control_param_names"),
    ]

    operations = [
        migrations.CreateModel(
            name="LocalModel",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("name", models.CharField(max_length=255, unique=True)),
                (
                    "kind",
                    models.CharField(
                        choices=[("checkpoint", "Checkpoint directory"), ("gguf", "GGUF file")],
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
                "ordering": ["name"],
                "constraints": [
                    models.CheckConstraint(
                        condition=models.Q(("kind__in", ["checkpoint", "gguf"])),
                        name="local_model_kind_valid",
                    )
                ],
            },
        ),
    ]
