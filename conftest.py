"""Suite-wide fixtures: real services, a real browser, real Celery workers, and factories.

Tests that need a real external part (Redis, Chromium, Playwright) skip with a visible reason
on a bare laptop, but under CI=true a missing part fails the run instead of skipping.
"""

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlparse

import pytest

ROOT = Path(__file__).resolve().parent

# The real generator (SmolLM2 through `transformers serve` and the local backend).
pytest_plugins = ["generators.tests.generator_fixtures"]

IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}

# Scoring in fp32 (the default), whatever the environment says: the suite checks fp32's
# equalities (one item scored alone as in a batch, packed as separate, transformers alone as
# the app). bf16 scoring is checked against them in trainer/tests/test_cpu_bfloat16.py.
os.environ["PRM_CPU_BFLOAT16"] = "off"


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


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """A real S3-API server process on loopback (moto's server), for the whole session.

    Yields its endpoint URL. Its credentials are any: the test sets the usual AWS variables.
    """
    moto = shutil.which("moto_server", path=str(Path(sys.executable).parent)) or shutil.which(
        "moto_server"
    )
    require(moto is not None, "moto's S3 server is not installed (pip install 'moto[s3]' flask)")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = (tmp_path_factory.mktemp("s3") / "server.log").open("w")
    process = subprocess.Popen(
        [moto, "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=subprocess.STDOUT
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while not _reachable(url):
        if process.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"the S3 server did not start (see {log.name})")
        time.sleep(0.2)
    yield url
    process.terminate()
    process.wait(timeout=30)
    log.close()


@pytest.fixture
def s3_store(s3_server, settings, monkeypatch, tmp_path):
    """STORE_URL pointed at a fresh bucket of the S3 server, here and in processes started."""
    import uuid

    import boto3

    bucket = f"stepwise-{uuid.uuid4().hex[:12]}"
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "STORE_S3_ENDPOINT_URL": s3_server,
    }.items():
        monkeypatch.setenv(name, value)
    boto3.client("s3", endpoint_url=s3_server).create_bucket(Bucket=bucket)
    url = f"s3://{bucket}/stepwise"
    settings.STORE_URL = url
    settings.STORE_S3_ENDPOINT_URL = s3_server
    monkeypatch.setenv("STORE_URL", url)
    yield url


# --- the fast lane: `make test-fast` runs what needs no real server, browser or model -------

# A test that asks for one of these starts a real part: Redis, Chromium, a live server, a
# Celery worker, the SmolLM2 model or a `transformers serve` process.
SLOW_FIXTURES = {
    "redis_url",
    "s3_server",
    "s3_store",
    "chromium_path",
    "browser",
    "live_server",
    "broker",
    "start_worker",
    "smollm2_gguf",
    "converted",
    "smollm2_checkpoint",
    "openai_server",
    "allowed_openai_server",
    "generator_spec",
}
# Whole files that train models, start process groups or fuzz every operation.
SLOW_MODULES = {
    "test_api_fuzz.py",
    "test_distributed.py",
    "test_gpu_benchmarks.py",
    "test_simulation.py",
    "test_simulation_rollouts.py",
    "test_simulation_seeds.py",
    "test_smollm2_backbone.py",
    "test_local_models.py",
    "test_races.py",
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if (
            item.get_closest_marker("services")
            or SLOW_FIXTURES & set(getattr(item, "fixturenames", ()))
            or item.path.name in SLOW_MODULES
        ):
            item.add_marker(pytest.mark.slow)


def pytest_report_header(config):
    from django.conf import settings

    engine = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
    return f"stepwise: database={engine} broker={settings.CELERY_BROKER_URL.split(':')[0]}"


def pytest_configure(config):
    # Every test makes users and logs them in: at Django's default PBKDF2 cost (a million
    # rounds) that was a third of a second each, minutes over the suite. A cheap hasher comes
    # first; the real ones stay listed, so stored hashes of theirs still verify and upgrade.
    from django.conf import settings

    settings.PASSWORD_HASHERS = [
        "django.contrib.auth.hashers.MD5PasswordHasher",
        *settings.PASSWORD_HASHERS,
    ]


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
    try:
        from playwright import sync_api
    except ImportError:
        sync_api = None
    require(sync_api is not None, "Playwright is not installed (pip install playwright)")
    # Playwright's sync API keeps an event loop on this thread; the ORM calls the tests make
    # are still plain synchronous ones.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    # A page that waits on the server (a redirect after a submit, a swap) gets 15 s, not
    # Playwright's 5: the suite's own worker and model runs share CI's two cores with it.
    sync_api.expect.set_options(timeout=15_000)
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium_path,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        yield browser
        browser.close()
        # While Playwright's loop runs, the ORM calls of the test get connections of their own
        # context, which pytest-django never closes: left open, the test database cannot be
        # dropped at the end of the run ("being accessed by other users").
        from django.db import connections

        for connection in connections.all(initialized_only=True):
            if not connection.in_atomic_block:
                connection.close()


DB_FIXTURES = {"db", "transactional_db", "live_server", "django_db_reset_sequences"}


@pytest.fixture(autouse=True)
def _fresh_cache(request):
    # API throttles count requests in the cache, the database's cache table (or Redis): each
    # test that may reach the database starts with a clean count.
    if request.node.get_closest_marker("django_db") or DB_FIXTURES & set(request.fixturenames):
        from django.core.cache import cache

        request.getfixturevalue("_django_db_helper")
        cache.clear()
    yield


@pytest.fixture(autouse=True)
def _artifact_store(tmp_path_factory, settings, monkeypatch):
    # Each test has its own artifact store; processes it starts (workers, servers) share it
    # through the environment, while each keeps its own cache and scratch under its var dir.
    # Beside the test's tmp_path, not in it: a test may count what its own folder holds.
    root = tmp_path_factory.mktemp("artifacts")
    store = root / "store"
    settings.STORE_URL = str(store)
    monkeypatch.setenv("STORE_URL", str(store))
    settings.STORE_CACHE_DIR = root / "cache"
    settings.STORE_SCRATCH_DIR = root / "scratch"
    yield store


# --- factories ---------------------------------------------------------------------------------


def create_user(name: str, role: str | None = "annotator", **fields):
    """A user with a password and one role (the body of `make_user`, for helper modules)."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    user = get_user_model().objects.create_user(name, password=f"{name}-pass-123", **fields)
    if role:
        user.groups.add(Group.objects.get_or_create(name=role)[0])
    return user


@pytest.fixture
def make_user():
    """`make_user(name, role="annotator", **fields)`: a user with a password and one role."""
    return create_user


@pytest.fixture
def make_labeler(make_user):
    """`make_labeler(name="labeler", role="annotator")`: a labeler and its user."""
    from labeling.models import Labeler

    def make(name: str = "labeler", role: str | None = "annotator"):
        return Labeler.objects.get_or_create(user=make_user(name, role))[0]

    return make


@pytest.fixture
def make_solution():
    """`make_solution(problem, n=0, steps=None, **fields)`: a right solution of `problem`.

    Without `steps`, three plain steps and a final answer of the problem's answer, made
    distinct by `n`.
    """
    from labeling.models import Solution

    def make(problem, n: int = 0, *, steps: list[str] | None = None, **fields):
        if steps is None:
            steps = [f"Step {i} of solution {n}." for i in range(3)]
            steps.append(f"# Answer\n\n{problem.answer}")
        fields.setdefault("answer", problem.answer)
        fields.setdefault("is_correct", True)
        return Solution.objects.create(problem=problem, steps=steps, **fields)

    return make


# --- real Celery workers -----------------------------------------------------------------------


def database_url() -> str:
    """The test database, for a worker subprocess to use the rows this test wrote."""
    from django.db import connection

    settings_dict = connection.settings_dict
    if settings_dict["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{settings_dict['NAME']}"
    return (
        f"postgres://{settings_dict['USER']}@{settings_dict['HOST']}:{settings_dict['PORT']}"
        f"/{settings_dict['NAME']}"
    )


@pytest.fixture
def broker(redis_url):
    """Publish from this process to Redis too, whatever the suite's own broker is."""
    from kombu import Connection

    from annotate.celery import app

    previous = (app.conf.broker_url, app.conf.broker_transport_options)
    app.conf.broker_url, app.conf.broker_transport_options = redis_url, {}
    app._after_fork()  # Celery's own reset of its pooled broker connections
    with Connection(redis_url) as conn:
        for queue in ("gpu", "default"):
            # Messages left by an interrupted earlier run name rows that no longer exist.
            conn.SimpleQueue(queue).clear()
        # So do messages a killed worker took but never acknowledged, which Redis would hand
        # to this test's worker once their visibility timeout passed.
        conn.default_channel.client.delete("unacked", "unacked_index")
    yield redis_url
    app.conf.broker_url, app.conf.broker_transport_options = previous
    app._after_fork()


@pytest.fixture
def start_worker(broker, transactional_db, tmp_path):
    """Start a worker subprocess: `start(name, queues="gpu,default", **extra_env)`.

    The process returned carries `log_path`, the file its output goes to.
    """
    processes = []

    def start(name: str, *, queues: str = "gpu,default", **extra_env: str) -> subprocess.Popen:
        env = dict(
            os.environ,
            DATABASE_URL=database_url(),
            CELERY_BROKER_URL=broker,
            STEPWISE_VAR_DIR=str(tmp_path / "var"),
            PRM_MODEL_DIR=str(tmp_path / "models"),
            PRM_HEARTBEAT_SECONDS="1",
            **extra_env,
        )
        log_path = tmp_path / f"worker-{len(processes)}.log"
        log = log_path.open("w")
        process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "annotate", "worker", "-n", name]
            + ["--queues", queues, "--concurrency", "1", "--pool", "solo"]
            + ["--loglevel", "INFO"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        process.log_path = log_path
        processes.append((process, log))
        return process

    yield start
    for process, log in processes:
        if process.poll() is None:
            process.terminate()
            process.wait(timeout=60)
        log.close()
    for path in sorted(tmp_path.glob("worker-*.log")):
        print(path.name, path.read_text()[-3000:])


def wait_for(predicate, *, timeout: float, what: str, interval: float = 0.5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
