"""Give the role groups their permissions on training runs (researchers read, admins manage)."""

from django.db import migrations

ROLE_PERMISSIONS = {
    "researcher": ["view_trainingrun"],
    "admin": ["add_trainingrun", "change_trainingrun", "delete_trainingrun", "view_trainingrun"],
}


def grant(apps, schema_editor):
    from django.contrib.auth.management import create_permissions

    # Permissions are normally created after all migrations ran; make sure they exist now.
    app_config = apps.get_app_config("trainer")
    app_config.models_module = True
    create_permissions(app_config, verbosity=0)
    app_config.models_module = None

    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    for role, codenames in ROLE_PERMISSIONS.items():
        group, _ = Group.objects.get_or_create(name=role)
        group.permissions.add(
            *Permission.objects.filter(content_type__app_label="trainer", codename__in=codenames)
        )


def revoke(apps, schema_editor):
    Permission = apps.get_model("auth", "Permission")
    Group = apps.get_model("auth", "Group")
    for group in Group.objects.filter(name__in=ROLE_PERMISSIONS):
        group.permissions.remove(
            *Permission.objects.filter(
                content_type__app_label="trainer", codename__endswith="_trainingrun"
            )
        )


class Migration(migrations.Migration):
    dependencies = [
        ("trainer", "0003_default_retrain_schedule"),
        ("labeling", "0002_roles"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(grant, revoke)]
