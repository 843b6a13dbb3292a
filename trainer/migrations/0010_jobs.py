"""Training runs, sampling runs and scoring chunks become jobs (core.jobs.Job): one status
set, one requester field, one set of worker fields. Tables and rows stay; a training run's
`triggered_by` is its `requested_by`, a chunk's `claimed_at` its `started_at`, and a chunk's
statuses pending and done are the jobs' queued and succeeded."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

JOB_STATUSES = [
    ("queued", "Queued"),
    ("running", "Running"),
    ("succeeded", "Succeeded"),
    ("failed", "Failed"),
    ("cancelled", "Cancelled"),
]
CHUNK_STATUS = {"pending": "queued", "done": "succeeded"}


def chunk_statuses_to_job_statuses(apps, schema_editor):
    chunks = apps.get_model("trainer", "ScoringChunk").objects
    for old, new in CHUNK_STATUS.items():
        chunks.filter(status=old).update(status=new)


def job_statuses_to_chunk_statuses(apps, schema_editor):
    chunks = apps.get_model("trainer", "ScoringChunk").objects
    for old, new in CHUNK_STATUS.items():
        chunks.filter(status=new).update(status=old)
    # A chunk failed or cancelled is scored again: the old chunks knew only pending for it.
    chunks.filter(status__in=["failed", "cancelled"]).update(status="pending")


def requester():
    return models.ForeignKey(
        blank=True,
        null=True,
        on_delete=django.db.models.deletion.SET_NULL,
        related_name="+",
        to=settings.AUTH_USER_MODEL,
    )


class Migration(migrations.Migration):
    dependencies = [
        ("trainer", "0009_scoring_chunks"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RenameField(
            model_name="trainingrun", old_name="triggered_by", new_name="requested_by"
        ),
        migrations.AlterField(model_name="trainingrun", name="requested_by", field=requester()),
        migrations.AlterField(model_name="samplingrun", name="requested_by", field=requester()),
        migrations.RenameField(
            model_name="scoringchunk", old_name="claimed_at", new_name="started_at"
        ),
        migrations.RemoveConstraint(model_name="scoringchunk", name="scoring_chunk_status_valid"),
        migrations.RemoveIndex(model_name="scoringchunk", name="scoring_chunk_todo"),
        migrations.RunPython(chunk_statuses_to_job_statuses, job_statuses_to_chunk_statuses),
        migrations.AlterField(
            model_name="scoringchunk",
            name="status",
            field=models.CharField(choices=JOB_STATUSES, default="queued", max_length=16),
        ),
        migrations.AddField(
            model_name="scoringchunk",
            name="cancel_requested",
            field=models.BooleanField(default=False),
        ),
        migrations.AddField(
            model_name="scoringchunk", name="error", field=models.TextField(blank=True)
        ),
        migrations.AddField(
            model_name="scoringchunk", name="log_tail", field=models.TextField(blank=True)
        ),
        migrations.AddField(model_name="scoringchunk", name="requested_by", field=requester()),
        migrations.AddField(
            model_name="scoringchunk",
            name="worker_pid",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name="scoringchunk",
            name="heartbeat_at",
            field=models.DateTimeField(blank=True, db_index=True, null=True),
        ),
        migrations.AddIndex(
            model_name="scoringchunk",
            index=models.Index(
                condition=models.Q(("status__in", ("queued", "running"))),
                fields=["model_version", "first_solution_id"],
                name="scoring_chunk_todo",
            ),
        ),
        migrations.AddConstraint(
            model_name="scoringchunk",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("status__in", ["queued", "running", "succeeded", "failed", "cancelled"])
                ),
                name="scoring_chunk_status_valid",
            ),
        ),
    ]
