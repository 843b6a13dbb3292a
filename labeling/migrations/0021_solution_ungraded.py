from django.db import migrations, models


def ungrade_empty_answers(apps, schema_editor):
    # A solution stored with no final answer was graded wrong before "ungraded" existed; it is
    # ungraded. Answers that a better extraction can now read are regraded by `manage.py regrade`.
    Solution = apps.get_model("labeling", "Solution")
    Solution.objects.filter(answer="").update(is_correct=None)


def wrong_again(apps, schema_editor):
    Solution = apps.get_model("labeling", "Solution")
    Solution.objects.filter(is_correct__isnull=True).update(is_correct=False)


class Migration(migrations.Migration):
    dependencies = [
        ("labeling", "0020_job_origin"),
    ]

    operations = [
        migrations.AlterField(
            model_name="solution",
            name="is_correct",
            field=models.BooleanField(
                blank=True,
                help_text="Final answer equals the ground truth; empty if ungraded.",
                null=True,
            ),
        ),
        migrations.RunPython(ungrade_empty_answers, wrong_again, elidable=True),
    ]
