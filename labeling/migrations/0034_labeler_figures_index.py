"""A covering index for the quality page's labeler figures (issue 44)."""

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("labeling", "0033_label_tallied_version"),
        ("trainer", "0023_model_version_names"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddIndex(
            model_name="labelingsession",
            index=models.Index(
                fields=["labeler", "submitted_at"],
                include=("total_time", "last_activity_at"),
                name="session_labeler_figures",
            ),
        ),
    ]
