"""Suite-wide fixtures.

Tests that need a real external part (Redis, Chromium) skip with a visible reason on a bare
laptop, but under CI=true a missing part fails the run instead of skipping.
"""

import os
import shutil
import socket
from urllib.parse import urlparse

import pytest

IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def require(condition: bool, reason: str) -> None:
    if condition:
        return
    if IN_CI:
        pytest.fail(f"CI=true but {reason}", pytrace=False)
    pytest.skip(reason)


def _reachable(url: str) -> bool:
    parts = urlparse(url)
    try:
        with socket.create_connection((parts.hostname, parts.port or 6379), timeout=1):
            return True
    except OSError:
        return False


@pytest.fixture
def redis_url() -> str:
    url = os.environ.get("CELERY_BROKER_URL", "")
    if not url.startswith("redis://"):
        url = os.environ.get("STEPWISE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
    require(_reachable(url), f"Redis is not reachable at {url}")
    return url


@pytest.fixture
def chromium_path() -> str:
    path = shutil.which("chromium")
    require(path is not None, "Chromium is not installed (apt-get install chromium)")
    return path


def pytest_report_header(config):
    from django.conf import settings

    engine = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
    return f"stepwise: database={engine} broker={settings.CELERY_BROKER_URL.split(':')[0]}"


def pytest_sessionstart(session):
    # CI must exercise PostgreSQL: a silently defaulted SQLite run would prove nothing.
    if IN_CI:
        from django.conf import settings

        engine = settings.DATABASES["default"]["ENGINE"]
        if "postgresql" not in engine:
            raise pytest.UsageError(f"CI=true but the database engine is {engine}")


@pytest.fixture
def browser(chromium_path):
    """Headless Debian Chromium driven by Playwright (which cannot download its own here)."""
    sync_api = pytest.importorskip("playwright.sync_api")
    # Playwright's sync API keeps an event loop on this thread; the ORM calls the tests make
    # are still plain synchronous ones.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium_path,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        yield browser
        browser.close()


@pytest.fixture(autouse=True)
def _fresh_cache():
    # API throttles count requests in the cache; each test starts with a clean count.
    from django.core.cache import cache

    cache.clear()
    yield
