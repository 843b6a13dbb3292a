"""The quality-control selection reason is stored as "quality_control", not "qc" (one name),
in Solution.selection_reason and in the counts a Generation keeps in params["selected"]."""

from django.db import migrations, models

OLD, NEW = "qc", "quality_control"
REASONS = ["wrong_answer_convincing", "convincing", "uniform", "uncertainty"]


def _rename(apps, old: str, new: str) -> None:
    apps.get_model("labeling", "Solution").objects.filter(selection_reason=old).update(
        selection_reason=new
    )
    Generation = apps.get_model("labeling", "Generation")
    changed = []
    for generation in Generation.objects.only("pk", "params").iterator(chunk_size=500):
        selected = (generation.params or {}).get("selected")
        if isinstance(selected, dict) and old in selected:
            selected[new] = selected.pop(old)
            changed.append(generation)
    Generation.objects.bulk_update(changed, ["params"], batch_size=500)


def forwards(apps, schema_editor):
    _rename(apps, OLD, NEW)


def backwards(apps, schema_editor):
    _rename(apps, NEW, OLD)


def _known(last: str) -> models.CheckConstraint:
    return models.CheckConstraint(
        condition=models.Q(selection_reason__in=["", *REASONS, last]),
        name="solution_selection_reason_known",
    )


class Migration(migrations.Migration):
    dependencies = [("labeling", "0010_step_labels_related_name")]

    operations = [
        migrations.RemoveConstraint(model_name="solution", name="solution_selection_reason_known"),
        migrations.AlterField(
            model_name="solution",
            name="selection_reason",
            field=models.CharField(
                blank=True,
                choices=[
                    ("wrong_answer_convincing", "Convincing wrong answer"),
                    ("convincing", "Convincing"),
                    ("uniform", "Uniform sample"),
                    ("uncertainty", "Uncertain score"),
                    ("quality_control", "Quality control"),
                ],
                help_text="Why it was selected.",
                max_length=32,
            ),
        ),
        migrations.RunPython(forwards, backwards),
        migrations.AddConstraint(model_name="solution", constraint=_known(NEW)),
    ]
