"""Create the default periodic retrain (every 6 hours), editable afterwards in the admin.

The task itself decides whether enough new labels arrived (PRM_RETRAIN_MIN_NEW_LABELS), so a
frequent schedule is cheap; the interval only bounds how stale the model can get.
"""

from django.db import migrations

TASK_NAME = "Retrain the PRM when enough new labels arrived"


def create_schedule(apps, schema_editor):
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    every_6_hours, _ = IntervalSchedule.objects.get_or_create(every=6, period="hours")
    PeriodicTask.objects.get_or_create(
        name=TASK_NAME,
        defaults={
            "task": "trainer.tasks.periodic_retrain",
            "interval": every_6_hours,
            "queue": "default",
            "enabled": True,
            "description": "Starts a training run only when enough sessions were submitted "
            "since the last successful run; also marks runs whose worker died as failed.",
        },
    )


def remove_schedule(apps, schema_editor):
    apps.get_model("django_celery_beat", "PeriodicTask").objects.filter(name=TASK_NAME).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("trainer", "0002_training_runs"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(create_schedule, remove_schedule)]
