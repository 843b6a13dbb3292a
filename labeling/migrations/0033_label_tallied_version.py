"""Each label marked with the version its tally was counted from, and a partial index of the
labels whose mark is not their version, so the quality figures find what to count again
without comparing every label with its tally (issue 44). Existing tallies keep their count."""

import django.db.models.functions.comparison
from django.conf import settings
from django.db import migrations, models


def mark_counted(apps, schema_editor):
    LabelingSession = apps.get_model("labeling", "LabelingSession")
    SessionTally = apps.get_model("labeling", "SessionTally")
    LabelingSession.objects.filter(tally__isnull=False).update(
        tallied_version=models.Subquery(
            SessionTally.objects.filter(session_id=models.OuterRef("pk")).values("counted_version")[
                :1
            ]
        )
    )


class Migration(migrations.Migration):
    dependencies = [
        ("labeling", "0032_tally_ratings_as_text"),
        ("trainer", "0023_model_version_names"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="labelingsession",
            name="tallied_version",
            field=models.DateTimeField(blank=True, editable=False, null=True),
        ),
        migrations.RunPython(mark_counted, migrations.RunPython.noop),
        migrations.AddIndex(
            model_name="labelingsession",
            index=models.Index(
                condition=models.Q(
                    ("submitted_at__isnull", False),
                    models.Q(
                        ("reopened_at__isnull", False),
                        ("tallied_version__isnull", True),
                        (
                            "tallied_version__lt",
                            django.db.models.functions.comparison.Coalesce(
                                models.F("edited_at"), models.F("submitted_at")
                            ),
                        ),
                        (
                            "tallied_version__gt",
                            django.db.models.functions.comparison.Coalesce(
                                models.F("edited_at"), models.F("submitted_at")
                            ),
                        ),
                        _connector="OR",
                    ),
                ),
                fields=["id"],
                name="session_untallied",
            ),
        ),
    ]
