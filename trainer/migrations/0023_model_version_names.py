"""Versions recorded by a training run were named "run N" after their run: renamed "model
version M", the name every page, API and log gives them (issue 43, item 7). A name a person
gave (or a version with no run) is kept."""

from django.db import migrations


def rename(apps, schema_editor):
    ModelVersion = apps.get_model("trainer", "ModelVersion")
    for version in ModelVersion.objects.filter(training_run__isnull=False).only(
        "pk", "name", "training_run_id"
    ):
        if version.name == f"run {version.training_run_id}":
            version.name = f"model version {version.pk}"
            version.save(update_fields=["name"])


class Migration(migrations.Migration):
    dependencies = [("trainer", "0022_training_run_estimated_peak")]

    operations = [migrations.RunPython(rename, migrations.RunPython.noop)]
