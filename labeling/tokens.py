"""Per-user API tokens (django-rest-knox): stored as hashes, shown once, optional expiry."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone
from drf_spectacular.contrib.knox_auth_token import KnoxTokenScheme
from knox.auth import TokenAuthentication as KnoxTokenAuthentication
from knox.models import AuthToken
from rest_framework.exceptions import AuthenticationFailed


@dataclass
class NewToken:
    token: str  # the secret itself; never stored, never shown again
    token_key: str
    expiry: datetime | None


def api_tokens(*, user) -> QuerySet[AuthToken]:
    """The user's tokens that still work, newest first."""
    live = Q(expiry__isnull=True) | Q(expiry__gt=timezone.now())
    return AuthToken.objects.filter(live, user=user).order_by("-created")


def create_api_token(
    *, user, expires_in_days: int | None = None, created_with: AuthToken | None = None
) -> NewToken:
    """A new token for `user`; `created_with` is the token the request came with, if any.

    A token never outlives the one that created it: otherwise a stolen token that expires
    tomorrow buys a token that never does. Its expiry is the earlier of the two (the
    response shows it); a request signed in with a session has no such bound.
    """
    now = timezone.now()
    expiry = now + timedelta(days=expires_in_days) if expires_in_days else None
    bound = getattr(created_with, "expiry", None)
    if bound is not None and (expiry is None or expiry > bound):
        expiry = bound
    with transaction.atomic():
        instance, token = AuthToken.objects.create(user=user, expiry=None)
        if expiry is not None:
            # An exact time: knox would add a time to live to its own, later, `now`.
            AuthToken.objects.filter(pk=instance.pk).update(expiry=expiry)
            instance.expiry = expiry
    return NewToken(token=token, token_key=instance.token_key, expiry=instance.expiry)


def revoke_api_token(*, user, token_key: str) -> bool:
    """Revoke one of the user's own tokens; someone else's key revokes nothing."""
    deleted, _ = AuthToken.objects.filter(user=user, token_key=token_key).delete()
    return deleted > 0


class TokenAuthentication(KnoxTokenAuthentication):
    """knox's `Authorization: Token …`, with a header that is not UTF-8 refused as a 401.

    knox decodes the token as UTF-8 and lets the error out as a 500; a token is ASCII, so
    such a header is simply a wrong token.
    """

    def authenticate_credentials(self, token: bytes):
        try:
            token.decode("ascii")
        except UnicodeDecodeError:
            raise AuthenticationFailed("Invalid token.") from None
        return super().authenticate_credentials(token)


class TokenScheme(KnoxTokenScheme):
    """The OpenAPI security scheme of `TokenAuthentication`: knox's, which drf-spectacular
    finds by exact class, so a subclass needs its own."""

    target_class = "labeling.tokens.TokenAuthentication"
