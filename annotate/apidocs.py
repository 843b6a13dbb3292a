"""The API's schema and its docs page, behind the API's own login rule.

The schema lists every endpoint, parameter and role rule: a map for an attacker, so it is
served to signed-in users and token holders only, unless API_SCHEMA_PUBLIC says otherwise.
"""

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.exceptions import NotAuthenticated
from rest_framework.permissions import BasePermission


class SchemaAccess(BasePermission):
    """Signed in (session or token), as every other API call, or anyone when the setting
    makes the schema public; read per request, so the setting needs no restart of the view."""

    def has_permission(self, request, view) -> bool:
        if settings.API_SCHEMA_PUBLIC:
            return True
        return bool(request.user and request.user.is_authenticated)


class SchemaView(SpectacularAPIView):
    permission_classes = [SchemaAccess]


class SchemaDocsView(SpectacularSwaggerSplitView):
    """Swagger UI; a browser that is not signed in is sent to the login page and back."""

    permission_classes = [SchemaAccess]

    def handle_exception(self, exc):
        if isinstance(exc, NotAuthenticated):
            return redirect_to_login(self.request.get_full_path())
        return super().handle_exception(exc)
