"""What a generation's labelers see of the judge (labeling/judge_display.py), and beside each
rating what was shown with it. Existing ratings were made with nothing shown: hidden."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("labeling", "0024_selection_reason_disagreement"),
        ("trainer", "0016_judge_labels"),
    ]

    operations = [
        migrations.AddField(
            model_name="generation",
            name="judge_display",
            field=models.CharField(
                choices=[
                    ("hidden", "Hidden"),
                    ("revealed", "Revealed after rating"),
                    ("confirm", "Suggested, to confirm"),
                ],
                default="hidden",
                max_length=8,
            ),
        ),
        migrations.AddField(
            model_name="steprating",
            name="judge_display",
            field=models.CharField(
                choices=[
                    ("hidden", "Hidden"),
                    ("revealed", "Revealed after rating"),
                    ("confirm", "Suggested, to confirm"),
                ],
                default="hidden",
                max_length=8,
            ),
        ),
        migrations.AddField(
            model_name="steprating",
            name="judge_rating",
            field=models.SmallIntegerField(
                blank=True, help_text="The judge's rating shown (suggested or revealed).", null=True
            ),
        ),
        migrations.AddField(
            model_name="steprating",
            name="judge_run",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to="trainer.judgerun",
            ),
        ),
        migrations.AddConstraint(
            model_name="generation",
            constraint=models.CheckConstraint(
                condition=models.Q(("judge_display__in", ["hidden", "revealed", "confirm"])),
                name="generation_judge_display_known",
            ),
        ),
        migrations.AddConstraint(
            model_name="generation",
            constraint=models.CheckConstraint(
                condition=models.Q(("mode", "rate"), ("judge_display", "hidden"), _connector="OR"),
                name="generation_live_judge_hidden",
            ),
        ),
        migrations.AddConstraint(
            model_name="steprating",
            constraint=models.CheckConstraint(
                condition=models.Q(("judge_display__in", ["hidden", "revealed", "confirm"])),
                name="step_rating_judge_display_known",
            ),
        ),
        migrations.AddConstraint(
            model_name="steprating",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("judge_rating__isnull", True),
                    models.Q(
                        ("judge_rating__in", [-1, 0, 1]),
                        models.Q(("judge_display", "hidden"), _negated=True),
                    ),
                    _connector="OR",
                ),
                name="step_rating_judge_rating_shown",
            ),
        ),
    ]
