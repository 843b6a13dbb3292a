"""Fixtures of the trainer's tests; the suite-wide factories are in the root conftest."""

import pytest


@pytest.fixture
def researcher(make_user, client):
    """A researcher, logged in on `client`."""
    user = make_user("rita", "researcher")
    client.force_login(user)
    return user
