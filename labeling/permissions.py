"""Roles, checked in one place. Roles are Django groups created by a migration."""

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

ANNOTATOR = "annotator"
RESEARCHER = "researcher"
ADMIN = "admin"
ROLES = (ANNOTATOR, RESEARCHER, ADMIN)


def has_role(user: AbstractBaseUser | AnonymousUser, *roles: str) -> bool:
    if not user.is_authenticated or not user.is_active:
        return False
    if user.is_superuser:
        return True
    return user.groups.filter(name__in=roles).exists()


def can_export_labels(user: AbstractBaseUser | AnonymousUser) -> bool:
    return has_role(user, ADMIN)
