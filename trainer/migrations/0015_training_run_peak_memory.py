from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("trainer", "0014_evaluation_sets"),
    ]

    operations = [
        migrations.AddField(
            model_name="trainingrun",
            name="peak_rss_bytes",
            field=models.BigIntegerField(blank=True, help_text="Peak RSS, bytes.", null=True),
        ),
        migrations.AddField(
            model_name="trainingrun",
            name="peak_cuda_bytes",
            field=models.BigIntegerField(
                blank=True, help_text="Peak CUDA memory allocated, bytes.", null=True
            ),
        ),
    ]
