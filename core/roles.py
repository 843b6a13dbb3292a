"""The three roles as auth groups, and the model permissions each one carries.

Migrations created the groups once, but a database flush (as between browser tests) or a
new model leaves groups without their permissions; syncing after every `migrate`/`flush`
keeps them whole.
"""

from django.apps import apps as global_apps
from django.contrib.auth.management import create_permissions
from django.contrib.auth.models import Group, Permission
from django.db.models import Q

ROLES = ("annotator", "researcher", "admin")

_ADMIN_MODELS = {
    "labeling": [
        "problem",
        "solution",
        "generation",
        "labeler",
        "labelingsession",
        "steplabel",
        "steprating",
        "guideline",
        "importjob",
    ],
    "trainer": ["modelversion", "trainingrun"],
}

# Researchers read labels and drive training; admins manage everything.
ROLE_PERMISSIONS: dict[str, list[tuple[str, str]]] = {
    "annotator": [],
    "researcher": [
        ("labeling", f"view_{model}")
        for model in (
            "problem",
            "solution",
            "generation",
            "labelingsession",
            "steplabel",
            "steprating",
            "guideline",
        )
    ]
    + [("trainer", "view_modelversion"), ("trainer", "view_trainingrun")],
    "admin": [
        (app, f"{action}_{model}")
        for app, models in _ADMIN_MODELS.items()
        for model in models
        for action in ("add", "change", "delete", "view")
    ],
}


def sync_role_groups() -> None:
    """Create the role groups if missing and give each exactly its permissions (idempotent)."""
    for label in {app for pairs in ROLE_PERMISSIONS.values() for app, _ in pairs}:
        create_permissions(global_apps.get_app_config(label), verbosity=0)
    for role, pairs in ROLE_PERMISSIONS.items():
        group, _ = Group.objects.get_or_create(name=role)
        wanted = Q(pk__in=[])
        for app_label, codename in pairs:
            wanted |= Q(content_type__app_label=app_label, codename=codename)
        group.permissions.set(Permission.objects.filter(wanted))


def sync_role_groups_after_migrate(sender, using: str = "default", **kwargs) -> None:
    sync_role_groups()
