"""The session's user as every request reads it: the user, their labeler and their role names
in one statement.

Django's ModelBackend reads the user, and the workbench then read the labeler and the roles:
two round trips and two statements to compile on every rating, the hottest request, for
facts that a join brings along (the roles are checked per request, never kept across them).
"""

from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.db.models import F

from core.permissions import remember_role_names


class UserWithRolesBackend(ModelBackend):
    def get_user(self, user_id):
        # One row per group (none: one row with no name), each the same user and labeler.
        rows = list(
            get_user_model()
            ._default_manager.filter(pk=user_id)
            .select_related("labeler")
            .annotate(role_name=F("groups__name"))
        )
        if not rows:
            return None
        user = rows[0]
        remember_role_names(user, {row.role_name for row in rows if row.role_name is not None})
        return user if self.user_can_authenticate(user) else None
