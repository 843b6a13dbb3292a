""" "qc" is spelled out in stored parameters: `include_qc` → `include_quality_control` in
TrainingRun.params, `qc_count` → `quality_control_count` in labeling's Generation.params.

The scheduled retrain reuses the last good run's parameters through TrainingParams.from_dict,
which refuses unknown keys: old rows must carry the new names.
"""

from django.db import migrations

CHUNK = 500


def _rename_key(model, old: str, new: str) -> None:
    rows = []
    for row in model.objects.only("pk", "params").iterator(chunk_size=CHUNK):
        params = row.params
        if isinstance(params, dict) and old in params:
            params[new] = params.pop(old)
            rows.append(row)
    model.objects.bulk_update(rows, ["params"], batch_size=CHUNK)


def forwards(apps, schema_editor):
    _rename_key(apps.get_model("trainer", "TrainingRun"), "include_qc", "include_quality_control")
    _rename_key(apps.get_model("labeling", "Generation"), "qc_count", "quality_control_count")


def backwards(apps, schema_editor):
    _rename_key(apps.get_model("trainer", "TrainingRun"), "include_quality_control", "include_qc")
    _rename_key(apps.get_model("labeling", "Generation"), "quality_control_count", "qc_count")


class Migration(migrations.Migration):
    dependencies = [
        ("trainer", "0005_rename_celery_tasks"),
        ("labeling", "0009_solution_queue_indexes"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
