"""Labelers: the pseudonymous identity behind every label (exports show its UUID)."""

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from labeling.models import Labeler


def get_or_create_labeler(*, user) -> Labeler:
    labeler, _ = Labeler.objects.get_or_create(user=user)
    # The caller's user object, already loaded: `labeler.user` would fetch the same row again
    # (next_session reads it to refuse a deactivated labeler).
    labeler.user = user
    return labeler


def labelers_by_uuid(*, uuids: set) -> dict:
    found = {lab.uuid: lab for lab in Labeler.objects.filter(uuid__in=uuids)}
    missing = uuids - found.keys()
    if missing:
        user_model = get_user_model()
        annotators = Group.objects.get_or_create(name="annotator")[0]
        for value in sorted(missing, key=str):
            # Imported labelers are pseudonymous: a user that cannot log in, named by UUID.
            user = user_model(username=f"labeler-{value}")
            user.set_unusable_password()
            user.save()
            user.groups.add(annotators)
            found[value] = Labeler.objects.create(user=user, uuid=value)
    return found
