from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("labeling", "0022_import_job_public_formats"),
    ]

    operations = [
        migrations.AddField(
            model_name="labelingsession",
            name="reopened_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="labelingsession",
            name="edited_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="labelingsession",
            name="used_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
