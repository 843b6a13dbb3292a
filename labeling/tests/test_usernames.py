"""Look-alike usernames cannot coexist (issue 41, item 3): one identity, core.usernames."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from core.usernames import username_skeleton
from labeling.services.usernames import UsernameTaken

ALIKE = [
    ("admin", "\u0430dmin"),  # Cyrillic а
    ("paypal", "\u0440\u0430\u0443\u0440\u0430l"),  # Cyrillic р, а, у
    ("admin", "\uff41\uff44\uff4d\uff49\uff4e"),  # full width
    ("admin", "ADMIN"),
    ("admin", "Admin"),
    ("admin", "adrnin"),  # rn reads as m
    ("bob", "b\u200bob"),  # an invisible zero width space
]


@pytest.mark.parametrize(("first", "second"), ALIKE)
def test_names_that_read_the_same_have_one_skeleton(first, second):
    assert first != second
    assert username_skeleton(first) == username_skeleton(second)


@pytest.mark.parametrize(("first", "second"), [("ann", "anna"), ("bob", "rob"), ("a1", "a2")])
def test_different_names_stay_different(first, second):
    assert username_skeleton(first) != username_skeleton(second)


@pytest.mark.parametrize(("first", "second"), ALIKE)
def test_a_second_user_with_a_look_alike_name_is_refused(db, first, second):
    users = get_user_model().objects
    users.create_user(first)
    with pytest.raises(UsernameTaken, match="reads the same"):
        users.create_user(second)
    assert users.filter(username=second).count() == 0


def test_renaming_to_a_look_alike_is_refused_and_a_login_still_saves(db):
    users = get_user_model().objects
    users.create_user("admin")
    bob = users.create_user("bob")
    bob.username = "\u0430dmin"
    with pytest.raises(UsernameTaken):
        bob.save()
    bob.refresh_from_db()
    bob.username = "bobby"
    bob.save()
    bob.save(update_fields=["last_login"])


def test_the_admin_forms_show_the_refusal_as_a_form_error(db, make_user):
    make_user("admin", role=None)
    root = make_user("root", role=None, is_staff=True, is_superuser=True)
    client = Client()
    client.force_login(root)
    page = client.post(
        "/admin/auth/user/add/", {"username": "\u0430dmin", "usable_password": "false"}
    )
    assert page.status_code == 200
    assert "reads the same as the existing user" in page.content.decode()
    page = client.post(
        f"/admin/auth/user/{root.pk}/change/",
        {"username": "ADMIN", "date_joined_0": "2024-01-01", "date_joined_1": "00:00:00"},
    )
    assert "reads the same as the existing user" in page.content.decode()
    assert get_user_model().objects.filter(username__in=["\u0430dmin", "ADMIN"]).count() == 0
