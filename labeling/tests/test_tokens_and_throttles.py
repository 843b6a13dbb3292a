"""Tokens and throttles under hostile use: a broken token header is a 401, a token cannot
outlive the token that made it, every web process counts the same requests (401s included),
and password reset is not offered without a mail server."""

import os
import socket
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
import requests
from django.urls import reverse
from django.utils import timezone
from knox.models import AuthToken

from conftest import database_url
from labeling import tokens

ROOT = Path(__file__).resolve().parents[2]


def test_a_token_header_that_is_not_utf8_is_a_401_not_a_500(client, db):
    # Latin-1 is how a WSGI server hands raw header bytes on: these are 0xff 0xfe on the wire.
    response = client.get("/api/problems/", HTTP_AUTHORIZATION="Token \xff\xfe\xfd")

    assert response.status_code == 401
    assert response.json() == {"detail": "Invalid token."}


@pytest.mark.django_db
@pytest.mark.parametrize("asked", [None, 30])
def test_a_token_made_with_a_token_expires_no_later_than_it(client, make_user, asked):
    user = make_user("tess")
    parent = tokens.create_api_token(user=user, expires_in_days=1)

    response = client.post(
        reverse("api-tokens"),
        {"expires_in_days": asked},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Token {parent.token}",
    )

    assert response.status_code == 201
    child = AuthToken.objects.get(token_key=response.json()["token_key"])
    assert child.expiry is not None and child.expiry <= parent.expiry


@pytest.mark.django_db
def test_a_token_may_shorten_but_a_session_may_make_a_token_that_never_expires(client, make_user):
    user = make_user("tess")
    parent = tokens.create_api_token(user=user, expires_in_days=30)
    shorter = tokens.create_api_token(
        user=user, expires_in_days=2, created_with=AuthToken.objects.get(token_key=parent.token_key)
    )
    assert shorter.expiry < timezone.now() + timedelta(days=2, minutes=1)

    client.force_login(user)
    response = client.post(reverse("api-tokens"), {}, content_type="application/json")
    assert response.status_code == 201 and response.json()["expiry"] is None


def test_password_reset_is_not_routed_without_a_mail_server(client, db):
    assert client.get("/accounts/password_reset/").status_code == 404
    assert client.get("/accounts/reset/done/").status_code == 404
    assert client.get("/accounts/login/").status_code == 200


# --- throttles over a real server: gunicorn with two worker processes, as the Procfile -----


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# Redis is a real server: its case is left out of the fast lane.
@pytest.fixture(params=["database", pytest.param("redis", marks=pytest.mark.slow)])
def server(request, transactional_db, tmp_path):
    """gunicorn, 2 workers, on the test database; 5 anonymous requests a minute."""
    env = dict(
        os.environ,
        DATABASE_URL=database_url(),
        STEPWISE_VAR_DIR=str(tmp_path / "var"),
        SECRET_KEY="throttle-test-secret-key-0123456789-0123456789",
        API_ANON_RATE="5/min",
    )
    if request.param == "redis":
        redis_url = request.getfixturevalue("redis_url")
        import redis

        client = redis.Redis.from_url(redis_url)
        # Counts left by an earlier run within the minute; only the throttles' own keys.
        for key in client.scan_iter(":1:throttle_*"):
            client.delete(key)
        env["CACHE_URL"] = redis_url
    port = _free_port()
    log = (tmp_path / "gunicorn.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "annotate.wsgi", "--workers", "2"]
        + ["--bind", f"127.0.0.1:{port}"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            requests.get(f"{url}/accounts/login/", timeout=10)
            break
        except (requests.ConnectionError, requests.Timeout):
            assert process.poll() is None, (tmp_path / "gunicorn.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "gunicorn did not start"
            time.sleep(0.3)
    yield url
    process.terminate()
    process.wait(timeout=30)
    log.close()


def test_every_worker_counts_the_same_anonymous_requests_401s_included(server):
    # New connections each time, so both workers answer some of them.
    statuses = [
        requests.get(f"{server}/api/problems/", headers={"Connection": "close"}, timeout=10)
        for _ in range(12)
    ]
    codes = [r.status_code for r in statuses]
    assert codes.count(401) == 5, codes
    assert codes[5:] == [429] * 7, codes
    assert int(statuses[-1].headers["Retry-After"]) > 0


def test_guessing_tokens_is_throttled_by_address(server):
    codes = [
        requests.get(
            f"{server}/api/problems/",
            headers={"Authorization": f"Token {'x' * 64}{i}", "Connection": "close"},
            timeout=10,
        ).status_code
        for i in range(10)
    ]
    assert codes == [401] * 5 + [429] * 5, codes
