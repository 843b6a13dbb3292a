"""The one owner of username identity on every path that creates or renames a user.

The admin's forms, `createsuperuser`, seed_demo, imports of pseudonymous labelers and the
simulation all end in `User.save()`, so the check sits on the user model's save signals and
not in each path: `refuse_lookalike` before the row is written (a clear refusal, `UsernameTaken`,
a 400), `record_skeleton` after it (the UsernameSkeleton row, whose unique constraint decides
a race between two saves that both passed the check). The admin's forms ask
`lookalike_of` first, to show the refusal as a form error.
"""

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction

from core.errors import Invalid
from core.usernames import username_skeleton
from labeling.models import UsernameSkeleton


class UsernameTaken(Invalid):
    """The username reads as an existing user's (the same letters in another script, width
    or case)."""


def lookalike_of(*, username: str, user_pk: int | None = None) -> str | None:
    """The existing username that `username` would read as, other than user `user_pk`'s."""
    taken = (
        UsernameSkeleton.objects.filter(skeleton=username_skeleton(username))
        .exclude(user_id=user_pk)
        .select_related("user")
        .first()
    )
    return taken.user.get_username() if taken is not None else None


def refusal_message(*, username: str, existing: str) -> str:
    return (
        f"The username {username!r} reads the same as the existing user {existing!r} "
        "(letters of another script, width or case); choose another."
    )


def _username_written(update_fields) -> bool:
    # A login saves last_login only: no name changes, no query.
    return update_fields is None or "username" in update_fields


def refuse_lookalike(sender, instance, raw=False, update_fields=None, **kwargs) -> None:
    if raw or not _username_written(update_fields):
        return
    username = instance.get_username()
    existing = lookalike_of(username=username, user_pk=instance.pk)
    if existing is not None:
        raise UsernameTaken(refusal_message(username=username, existing=existing))


def record_skeleton(sender, instance, created, raw=False, update_fields=None, **kwargs) -> None:
    if raw or not _username_written(update_fields):
        return
    skeleton = username_skeleton(instance.get_username())
    try:
        with transaction.atomic():
            UsernameSkeleton.objects.update_or_create(
                user_id=instance.pk, defaults={"skeleton": skeleton}
            )
    except IntegrityError:
        if created and transaction.get_autocommit():
            # Outside a transaction the user's row is already committed: without this the
            # loser of the race would stay, a look-alike with no skeleton.
            instance.delete()
        raise


def connect_username_identity() -> None:
    from django.db.models.signals import post_save, pre_save

    user_model = get_user_model()
    pre_save.connect(refuse_lookalike, sender=user_model, dispatch_uid="usernames.refuse")
    post_save.connect(record_skeleton, sender=user_model, dispatch_uid="usernames.record")
