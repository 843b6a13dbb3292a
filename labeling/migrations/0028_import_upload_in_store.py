"""An import job's upload is kept in the artifact store: its row holds a reference
(`<key>@<sha256>`, core/store.py), not a path on the web host. The column is renamed; old rows
keep their absolute paths, which the worker still reads where they exist."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('labeling', '0027_session_judge_run'),
    ]

    operations = [
        migrations.RenameField(
            model_name='importjob',
            old_name='stored_path',
            new_name='upload',
        ),
        migrations.AlterField(
            model_name='importjob',
            name='upload',
            field=models.CharField(help_text='The uploaded file in the artifact store, a reference `<key>@<sha256>` (core/store.py); rows made before the store hold an absolute path on the web host.', max_length=1024),
        ),
    ]
