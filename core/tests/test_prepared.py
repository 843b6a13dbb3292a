"""core.prepared: a queryset compiled once and run with each call's values gives what the
queryset itself gives, for every value; a value the compiler writes into the SQL is refused."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db.models import Q
from django.utils import timezone

from core.prepared import NotPreparable, Prepared


def _joined(*, after_id: int, before: object, staff: bool | None = None):
    users = User.objects.filter(pk__gt=after_id, date_joined__lt=before)
    if staff is not None:
        users = users.filter(is_staff=staff)
    return users.order_by("pk").values_list("username")


@pytest.mark.django_db
def test_each_call_gets_its_own_values_and_each_shape_its_own_statement():
    now = timezone.now()
    users = [
        User.objects.create(
            username=f"u{i}", is_staff=i % 2 == 0, date_joined=now - timedelta(days=i)
        )
        for i in range(6)
    ]
    prepared = Prepared(_joined)
    for after in (0, users[1].pk, users[4].pk):
        for before in (now + timedelta(seconds=1), now - timedelta(days=2, hours=1), now):
            for staff in (None, True, False):
                expected = list(_joined(after_id=after, before=before, staff=staff))
                assert prepared.rows(after_id=after, before=before, staff=staff) == expected
    # Compiled once per shape (staff None, True, False), not per call.
    assert len(prepared._compiled) == 3


def _first(*, after_id: int, limit: int):
    return User.objects.filter(pk__gt=after_id).order_by("pk").values_list("pk")[:limit]


@pytest.mark.django_db
def test_a_value_written_into_the_sql_is_refused_unless_it_is_shape():
    ids = [User.objects.create(username=f"v{i}").pk for i in range(4)]
    prepared = Prepared(_first)
    # A LIMIT is SQL text, not a parameter: as a value it would be kept from the first call.
    with pytest.raises(NotPreparable, match="depends on the values"):
        prepared.rows(after_id=0, limit=2)
    assert prepared.rows(after_id=ids[0], shape={"limit": 2}) == [(ids[1],), (ids[2],)]
    assert prepared.rows(after_id=ids[0], shape={"limit": 1}) == [(ids[1],)]


def _unused(*, after_id: int, since: object):
    # `since` does not reach the statement: nothing to substitute, nothing wrong.
    return User.objects.filter(Q(pk__gt=after_id)).order_by("pk").values_list("username")


@pytest.mark.django_db
def test_a_value_the_statement_does_not_use_is_fine():
    User.objects.create(username="w")
    assert Prepared(_unused).rows(after_id=0, since=timezone.now()) == [("w",)]
