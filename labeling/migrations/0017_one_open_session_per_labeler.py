"""One open session per labeler, held by a partial unique index.

Two "next session" requests of one labeler at once could each open a session before. A
database that holds such pairs migrates instead of failing: each labeler keeps the open session
they worked on last, and the others end as a lapsed lease ends (abandoned, their ratings kept,
their places freed for other labelers).
"""

from django.db import migrations, models
from django.db.models import Count, F
from django.utils import timezone


def end_all_but_the_latest_open_session(apps, schema_editor):
    LabelingSession = apps.get_model("labeling", "LabelingSession")
    open_sessions = LabelingSession.objects.filter(
        submitted_at__isnull=True, abandoned_at__isnull=True
    )
    doubled = (
        open_sessions.values("labeler_id")
        .annotate(n=Count("pk"))
        .filter(n__gt=1)
        .values_list("labeler_id", flat=True)
    )
    now = timezone.now()
    for labeler_id in list(doubled):
        mine = open_sessions.filter(labeler_id=labeler_id).order_by(
            F("last_activity_at").desc(nulls_last=True), "-pk"
        )
        keep = mine.values_list("pk", flat=True).first()
        mine.exclude(pk=keep).update(abandoned_at=now)


class Migration(migrations.Migration):
    dependencies = [
        ("labeling", "0016_problem_level_range"),
    ]

    operations = [
        migrations.RunPython(
            end_all_but_the_latest_open_session, migrations.RunPython.noop, elidable=True
        ),
        # Implied by the new one (one open session per labeler is one per labeler and solution).
        migrations.RemoveConstraint(
            model_name="labelingsession",
            name="one_open_session_per_labeler_and_solution",
        ),
        migrations.AddConstraint(
            model_name="labelingsession",
            constraint=models.UniqueConstraint(
                condition=models.Q(("abandoned_at__isnull", True), ("submitted_at__isnull", True)),
                fields=("labeler",),
                name="one_open_session_per_labeler",
            ),
        ),
    ]
