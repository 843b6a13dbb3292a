"""The `disagreement` selection strategy's reason: the machine label sources put the first
error at different steps (trainer/selection/strategies.py)."""

from django.db import migrations, models

REASONS = [
    "",
    "wrong_answer_convincing",
    "convincing",
    "uniform",
    "uncertainty",
    "disagreement",
    "quality_control",
]


class Migration(migrations.Migration):
    dependencies = [("labeling", "0023_label_corrections")]

    operations = [
        migrations.RemoveConstraint(model_name="solution", name="solution_selection_reason_known"),
        migrations.AlterField(
            model_name="solution",
            name="selection_reason",
            field=models.CharField(
                blank=True,
                choices=[
                    ("wrong_answer_convincing", "Convincing wrong answer"),
                    ("convincing", "Convincing"),
                    ("uniform", "Uniform sample"),
                    ("uncertainty", "Uncertain score"),
                    ("disagreement", "Sources disagree"),
                    ("quality_control", "Quality control"),
                ],
                help_text="Why it was selected.",
                max_length=32,
            ),
        ),
        migrations.AddConstraint(
            model_name="solution",
            constraint=models.CheckConstraint(
                condition=models.Q(selection_reason__in=REASONS),
                name="solution_selection_reason_known",
            ),
        ),
    ]
