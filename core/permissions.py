"""Roles, checked in one place. Roles are Django groups created by a migration."""

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request
from rest_framework.views import APIView

ANNOTATOR = "annotator"
RESEARCHER = "researcher"
ADMIN = "admin"
ROLES = (ANNOTATOR, RESEARCHER, ADMIN)


def role_names(user: AbstractBaseUser) -> frozenset[str]:
    """The user's groups, read once per user object, i.e. once per request: the view, the
    navigation and the API permissions all ask, and a rating is the hottest request."""
    names = getattr(user, "_stepwise_role_names", None)
    if names is None:
        names = frozenset(user.groups.values_list("name", flat=True))
        user._stepwise_role_names = names
    return names


def remember_role_names(user: AbstractBaseUser, names: set[str]) -> None:
    """Keep the user's role names, read by another query (the session's user is read with
    them, labeling.auth; `selectors.labeler_with_roles` reads them with the labeler), for
    `role_names` to answer without a query of its own."""
    user._stepwise_role_names = frozenset(names)


def knows_role_names(user: AbstractBaseUser) -> bool:
    """Whether the user's role names were read already (no query to ask them)."""
    return getattr(user, "_stepwise_role_names", None) is not None


def has_role(user: AbstractBaseUser | AnonymousUser, *roles: str) -> bool:
    if not user.is_authenticated or not user.is_active:
        return False
    if user.is_superuser:
        return True
    return not role_names(user).isdisjoint(roles)


def can_export_labels(user: AbstractBaseUser | AnonymousUser) -> bool:
    return has_role(user, ADMIN)


def can_view_quality(user: AbstractBaseUser | AnonymousUser) -> bool:
    return has_role(user, RESEARCHER, ADMIN)


def require_researcher(request: HttpRequest, *, refusal: str) -> None:
    """For a researcher's page: refused (403, saying `refusal`) to anyone but researchers and
    admins."""
    if not has_role(request.user, RESEARCHER, ADMIN):
        raise PermissionDenied(refusal)


def can_review_problem_reports(user: AbstractBaseUser | AnonymousUser) -> bool:
    """Confirm or dismiss bad-problem reports (researchers only read them)."""
    return has_role(user, ADMIN)


def can_manage_labelers(user: AbstractBaseUser | AnonymousUser) -> bool:
    """Deactivate labelers and see who is behind a labeler UUID."""
    return has_role(user, ADMIN)


class _RolePermission(BasePermission):
    roles: tuple[str, ...] = ()
    message = "Your role does not allow this."

    def has_permission(self, request: Request, view: APIView) -> bool:
        return has_role(request.user, *self.roles)


class IsLabeler(_RolePermission):
    roles = (ANNOTATOR, RESEARCHER, ADMIN)


class IsResearcher(_RolePermission):
    """Researchers and admins: read labels, run training and selection."""

    roles = (RESEARCHER, ADMIN)


class IsAdmin(_RolePermission):
    roles = (ADMIN,)


class ReadResearcherWriteAdmin(BasePermission):
    """Researchers read; only admins change (imports, QC marks)."""

    message = "Only admins can change this."

    def has_permission(self, request: Request, view: APIView) -> bool:
        if request.method in SAFE_METHODS:
            return has_role(request.user, RESEARCHER, ADMIN)
        return has_role(request.user, ADMIN)
