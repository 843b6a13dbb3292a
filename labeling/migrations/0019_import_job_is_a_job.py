"""An import job becomes a job (core.jobs.Job): `created_by` is its `requested_by`, it may be
cancelled, and it records its worker, heartbeat and log like every job. Its statuses were
already the jobs' (less cancelled)."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("labeling", "0018_solution_labels_submitted"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RenameField(
            model_name="importjob", old_name="created_by", new_name="requested_by"
        ),
        migrations.AlterField(
            model_name="importjob",
            name="requested_by",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.RemoveConstraint(model_name="importjob", name="import_job_status_known"),
        migrations.AlterField(
            model_name="importjob",
            name="status",
            field=models.CharField(
                choices=[
                    ("queued", "Queued"),
                    ("running", "Running"),
                    ("succeeded", "Succeeded"),
                    ("failed", "Failed"),
                    ("cancelled", "Cancelled"),
                ],
                default="queued",
                max_length=16,
            ),
        ),
        migrations.AddConstraint(
            model_name="importjob",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("status__in", ["queued", "running", "succeeded", "failed", "cancelled"])
                ),
                name="import_job_status_known",
            ),
        ),
        migrations.AlterField(
            model_name="importjob", name="error", field=models.TextField(blank=True)
        ),
        migrations.AddField(
            model_name="importjob",
            name="cancel_requested",
            field=models.BooleanField(default=False),
        ),
        migrations.AddField(
            model_name="importjob",
            name="heartbeat_at",
            field=models.DateTimeField(blank=True, db_index=True, null=True),
        ),
        migrations.AddField(
            model_name="importjob", name="log_tail", field=models.TextField(blank=True)
        ),
        migrations.AddField(
            model_name="importjob",
            name="worker_hostname",
            field=models.CharField(blank=True, max_length=255),
        ),
        migrations.AddField(
            model_name="importjob",
            name="worker_pid",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
    ]
