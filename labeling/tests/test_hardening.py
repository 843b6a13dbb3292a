"""Production hardening: deploy checks, login lockout, security headers."""

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]


def test_check_deploy_passes_with_production_settings(tmp_path):
    env = {
        **os.environ,
        "DEBUG": "false",
        "HTTPS": "true",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": "labels.example.org",
        "STEPWISE_VAR_DIR": str(tmp_path),
    }
    done = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_repeated_failed_logins_lock_the_account_out(client, settings):
    settings.AXES_FAILURE_LIMIT = 3
    User.objects.create_user("victim", password="right-horse-battery")
    for _ in range(3):
        client.post(reverse("login"), {"username": "victim", "password": "wrong"})
    locked = client.post(
        reverse("login"), {"username": "victim", "password": "right-horse-battery"}
    )
    assert locked.status_code == 429
    assert "_auth_user_id" not in client.session


def test_pages_send_security_headers_and_a_strict_csp(client):
    User.objects.create_user("someone", password="right-horse-battery")
    response = client.get(reverse("login"))
    csp = response["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp
    assert "frame-ancestors 'none'" in csp
    assert response["X-Frame-Options"] == "DENY"
    assert response["X-Content-Type-Options"] == "nosniff"


def test_debug_pages_are_off_by_default(client, tmp_path):
    # pytest-django forces DEBUG off in the test process, so the default is read by a fresh
    # process given no DEBUG setting, as a deploy that sets nothing gets it.
    env = {k: v for k, v in os.environ.items() if k != "DEBUG"}
    env["STEPWISE_VAR_DIR"] = str(tmp_path)
    done = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "shell",
            "--no-imports",
            "-c",
            "from django.conf import settings; print(settings.DEBUG)",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.stdout.strip() == "False", done.stdout + done.stderr
    # And in that mode a missing page says nothing about the code behind it.
    response = client.get("/no-such-page/")
    assert response.status_code == 404
    assert b"Traceback" not in response.content and b"URLconf" not in response.content


def test_api_docs_load_their_script_from_our_own_static_files(client):
    client.force_login(User.objects.create_user("reader", password="right-horse-battery"))
    page = client.get(reverse("api-docs")).content.decode()
    assert "cdn" not in page.lower() and "<script>" not in page
