"""Create the three roles as groups with their model permissions."""

from django.db import migrations

# Researchers read labels and drive training; admins manage everything labeling-related.
ROLE_PERMISSIONS = {
    "annotator": [],
    "researcher": [
        ("labeling", "view_problem"),
        ("labeling", "view_solution"),
        ("labeling", "view_generation"),
        ("labeling", "view_labelingsession"),
        ("labeling", "view_steplabel"),
        ("labeling", "view_steprating"),
        ("trainer", "view_modelversion"),
    ],
    "admin": [
        (app, f"{action}_{model}")
        for app, models in {
            "labeling": [
                "problem",
                "solution",
                "generation",
                "labeler",
                "labelingsession",
                "steplabel",
                "steprating",
            ],
            "trainer": ["modelversion"],
        }.items()
        for model in models
        for action in ("add", "change", "delete", "view")
    ],
}


def create_roles(apps, schema_editor):
    from django.contrib.auth.management import create_permissions

    # Permissions are normally created after all migrations ran; make sure they exist now.
    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, verbosity=0)
        app_config.models_module = None

    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    for role, codenames in ROLE_PERMISSIONS.items():
        group, _ = Group.objects.get_or_create(name=role)
        for app_label, codename in codenames:
            group.permissions.add(
                Permission.objects.get(content_type__app_label=app_label, codename=codename)
            )


def remove_roles(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name__in=ROLE_PERMISSIONS).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("labeling", "0001_initial"),
        ("trainer", "0001_initial"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(create_roles, remove_roles)]
