"""Per-user API tokens (django-rest-knox): stored as hashes, shown once, optional expiry,
and ended when what they act with changes (the password, the account's being active, its
roles)."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction
from django.db.models import Q, QuerySet
from django.db.models.signals import m2m_changed, post_save, pre_delete, pre_save
from django.utils import timezone
from drf_spectacular.contrib.knox_auth_token import KnoxTokenScheme
from knox.auth import TokenAuthentication as KnoxTokenAuthentication
from knox.models import AuthToken
from rest_framework.exceptions import AuthenticationFailed

from core.errors import Conflict


@dataclass
class NewToken:
    token: str  # the secret itself; never stored, never shown again
    token_key: str
    expiry: datetime | None


class TooManyTokens(Conflict):
    """The user holds API_TOKENS_PER_USER live tokens already.

    A 409, not a 429: waiting does not help (a token may never expire) and a client that
    backs off and retries would retry forever; revoking one is what changes the answer.
    """


def _live_tokens(*, user) -> QuerySet[AuthToken]:
    live = Q(expiry__isnull=True) | Q(expiry__gt=timezone.now())
    return AuthToken.objects.filter(live, user=user)


def api_tokens(*, user) -> QuerySet[AuthToken]:
    """The user's tokens that still work, newest first: at most API_TOKENS_PER_USER, which
    creating keeps them to (a lowered setting leaves the oldest unlisted, still working)."""
    return _live_tokens(user=user).order_by("-created")[: settings.API_TOKENS_PER_USER]


def live_token_count(*, user) -> int:
    return _live_tokens(user=user).count()


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
    cap = settings.API_TOKENS_PER_USER
    with transaction.atomic():
        # The user's row, locked: two requests at once must not both pass the count.
        get_user_model().objects.select_for_update().filter(pk=user.pk).first()
        AuthToken.objects.filter(user=user, expiry__lte=now).delete()  # dead: no longer count
        if _live_tokens(user=user).count() >= cap:
            raise TooManyTokens(
                f"You hold {cap} API tokens, the most one person may (API_TOKENS_PER_USER). "
                "Revoke one you no longer use, then create another."
            )
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


def end_api_tokens(*, user_ids: list[int]) -> int:
    """End every token of the given users; how many there were."""
    if not user_ids:
        return 0
    deleted, _ = AuthToken.objects.filter(user_id__in=user_ids).delete()
    return deleted


# --- a token ends with the credentials it was made under ------------------------------------
#
# A token acts as its user. One made before a password change, a deactivation or a change of
# role must not outlive it: the change is how an admin or the user takes access back (a
# stolen laptop, a leaked script, a labeler let go), and a token that lived on would undo it.
# A reactivated account therefore starts without tokens. The hooks are model signals, so
# every path is covered: the admin's forms, `manage.py changepassword`, password reset and
# change pages, deactivation on the quality page, `user.groups.add()` in a shell. Web
# sessions need nothing: Django ends them on a password change (the session keeps a hash of
# the password) and refuses an inactive user's.

# Fields of the user whose change ends its tokens, beside the password and the groups.
ACCESS_FIELDS = ("is_active", "is_superuser", "is_staff")


def _note_access_change(sender, instance, update_fields=None, raw=False, **kwargs) -> None:
    instance._stepwise_access_changed = False
    if raw or instance._state.adding or instance.pk is None:
        return
    # set_password() leaves the new password in `_password` until save(): Django's own mark of
    # a password change, which a hash upgrade at login clears (not a change). A hash assigned
    # directly and saved in full counts too.
    if getattr(instance, "_password", None) is not None:
        instance._stepwise_access_changed = True
        return
    fields = set(ACCESS_FIELDS) | ({"password"} if update_fields is None else set())
    if update_fields is not None:
        fields &= set(update_fields)
    if not fields:
        return  # e.g. the last_login update of every login: no query
    before = sender._default_manager.filter(pk=instance.pk).values(*fields).first()
    instance._stepwise_access_changed = before is not None and any(
        before[name] != getattr(instance, name) for name in fields
    )


def _end_tokens_on_access_change(sender, instance, created=False, raw=False, **kwargs) -> None:
    if getattr(instance, "_stepwise_access_changed", False):
        instance._stepwise_access_changed = False
        end_api_tokens(user_ids=[instance.pk])


def _end_tokens_on_role_change(sender, instance, action, reverse, pk_set, **kwargs) -> None:
    """A user's groups are their roles: any change ends the tokens of each user it touches."""
    if action in ("post_add", "post_remove") and pk_set:
        user_ids = list(pk_set) if reverse else [instance.pk]
    elif action == "pre_clear":
        # Before the clear, while the group's members can still be read.
        user_ids = _members(instance) if reverse else [instance.pk]
    else:
        return
    end_api_tokens(user_ids=user_ids)


def _members(group: Group) -> list[int]:
    return list(get_user_model().objects.filter(groups=group).values_list("pk", flat=True))


def _end_tokens_of_deleted_group(sender, instance, **kwargs) -> None:
    end_api_tokens(user_ids=_members(instance))


def connect_token_revocation() -> None:
    """Connect the hooks above (from the app's ready())."""
    user_model = get_user_model()
    pre_save.connect(_note_access_change, sender=user_model, dispatch_uid="tokens.note_access")
    post_save.connect(
        _end_tokens_on_access_change, sender=user_model, dispatch_uid="tokens.end_on_access"
    )
    m2m_changed.connect(
        _end_tokens_on_role_change,
        sender=user_model.groups.through,
        dispatch_uid="tokens.end_on_role",
    )
    pre_delete.connect(_end_tokens_of_deleted_group, sender=Group, dispatch_uid="tokens.group")


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
