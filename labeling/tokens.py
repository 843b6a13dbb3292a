"""Per-user API tokens (django-rest-knox): stored as hashes, shown once, optional expiry."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Q, QuerySet
from django.utils import timezone
from knox.models import AuthToken


@dataclass
class NewToken:
    token: str  # the secret itself; never stored, never shown again
    token_key: str
    expiry: datetime | None


def api_tokens(*, user) -> QuerySet[AuthToken]:
    """The user's tokens that still work, newest first."""
    live = Q(expiry__isnull=True) | Q(expiry__gt=timezone.now())
    return AuthToken.objects.filter(live, user=user).order_by("-created")


def create_api_token(*, user, expires_in_days: int | None = None) -> NewToken:
    expiry = timedelta(days=expires_in_days) if expires_in_days else None
    instance, token = AuthToken.objects.create(user=user, expiry=expiry)
    return NewToken(token=token, token_key=instance.token_key, expiry=instance.expiry)


def revoke_api_token(*, user, token_key: str) -> bool:
    """Revoke one of the user's own tokens; someone else's key revokes nothing."""
    deleted, _ = AuthToken.objects.filter(user=user, token_key=token_key).delete()
    return deleted > 0
