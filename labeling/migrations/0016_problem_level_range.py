"""Problem levels are MATH's 1 to 5, or none: checked at every entry and held by a CHECK.

A level outside that range was accepted before (99999 imported as is). It says nothing a
level can say, so it becomes "unknown" (NULL) before the constraint is added: a database
that holds one migrates instead of failing.
"""

import django.core.validators
from django.db import migrations, models


def forget_impossible_levels(apps, schema_editor):
    Problem = apps.get_model("labeling", "Problem")
    Problem.objects.exclude(level__isnull=True).exclude(level__range=(1, 5)).update(level=None)


class Migration(migrations.Migration):
    dependencies = [
        ("labeling", "0015_solution_sampling_run"),
    ]

    operations = [
        migrations.RunPython(forget_impossible_levels, migrations.RunPython.noop, elidable=True),
        migrations.AlterField(
            model_name="problem",
            name="level",
            field=models.PositiveSmallIntegerField(
                blank=True,
                help_text="MATH difficulty, 1 to 5; empty if unknown.",
                null=True,
                validators=[
                    django.core.validators.MinValueValidator(1),
                    django.core.validators.MaxValueValidator(5),
                ],
            ),
        ),
        migrations.AddConstraint(
            model_name="problem",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("level__isnull", True), ("level__range", (1, 5)), _connector="OR"
                ),
                name="problem_level_math_range",
            ),
        ),
    ]
