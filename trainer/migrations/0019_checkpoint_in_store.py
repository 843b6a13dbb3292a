from django.db import migrations, models


class Migration(migrations.Migration):
    """A model version's checkpoint is a store reference, not a host's path (issue 39).

    Rows made before keep their absolute path: `core.store.local_tree` still opens it on the
    host that has it, and `manage.py publish_legacy_artifacts` run there moves it into the store.
    """

    dependencies = [("trainer", "0018_run_step_labels")]

    operations = [
        migrations.RenameField(
            model_name="modelversion", old_name="checkpoint_path", new_name="checkpoint"
        ),
        migrations.AlterField(
            model_name="modelversion",
            name="checkpoint",
            field=models.CharField(help_text="Its artifact in the store.", max_length=1024),
        ),
    ]
