"""Bad-problem reports: one labeler's report is recorded, not applied to the problem."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("labeling", "0011_selection_reason_quality_control"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="ProblemReport",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("reason", models.TextField()),
                ("created_at", models.DateTimeField()),
                (
                    "status",
                    models.CharField(
                        choices=[
                            ("open", "Open"),
                            ("confirmed", "Confirmed"),
                            ("dismissed", "Dismissed"),
                        ],
                        default="open",
                        max_length=16,
                    ),
                ),
                ("reviewed_at", models.DateTimeField(blank=True, null=True)),
                (
                    "labeler",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="reports",
                        to="labeling.labeler",
                    ),
                ),
                (
                    "problem",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="reports",
                        to="labeling.problem",
                    ),
                ),
                (
                    "reviewed_by",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "session",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="problem_report",
                        to="labeling.labelingsession",
                    ),
                ),
            ],
            options={
                "ordering": ["created_at", "id"],
                "indexes": [
                    models.Index(fields=["labeler", "problem"], name="problem_report_by_labeler"),
                    models.Index(fields=["status", "problem"], name="problem_report_by_status"),
                ],
                "constraints": [
                    models.CheckConstraint(
                        condition=models.Q(("status__in", ["open", "confirmed", "dismissed"])),
                        name="problem_report_status_known",
                    ),
                    models.CheckConstraint(
                        condition=models.Q(
                            models.Q(("reviewed_at__isnull", True), ("status", "open")),
                            models.Q(
                                models.Q(("status", "open"), _negated=True),
                                ("reviewed_at__isnull", False),
                            ),
                            _connector="OR",
                        ),
                        name="problem_report_reviewed_when_closed",
                    ),
                ],
            },
        ),
    ]
