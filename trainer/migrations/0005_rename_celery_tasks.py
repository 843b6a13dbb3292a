"""The Celery tasks end in `_task` now: rename the task of periodic tasks stored in the database.

The default retrain schedule (0003) and any a person added in the admin name the task by its
dotted path; beat would otherwise send a name no worker knows.
"""

from django.db import migrations
from django.utils import timezone

RENAMED = {
    "trainer.tasks.train_prm": "trainer.tasks.train_task",
    "trainer.tasks.score_solutions": "trainer.tasks.score_task",
    "trainer.tasks.select_generation": "trainer.tasks.select_generation_task",
    "trainer.tasks.periodic_retrain": "trainer.tasks.periodic_retrain_task",
}


def _rename(apps, names: dict[str, str]) -> None:
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    changed = 0
    for old, new in names.items():
        changed += PeriodicTask.objects.filter(task=old).update(task=new)
    if changed:
        # A running beat reloads its schedule only when this timestamp moves.
        PeriodicTasks = apps.get_model("django_celery_beat", "PeriodicTasks")
        PeriodicTasks.objects.update_or_create(ident=1, defaults={"last_update": timezone.now()})


def forwards(apps, schema_editor):
    _rename(apps, RENAMED)


def backwards(apps, schema_editor):
    _rename(apps, {new: old for old, new in RENAMED.items()})


class Migration(migrations.Migration):
    dependencies = [
        ("trainer", "0004_training_run_role_permissions"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
