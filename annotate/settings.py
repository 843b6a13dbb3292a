"""Settings, read from the environment.

With nothing set, the app runs embedded: a SQLite file and a filesystem Celery broker under
``var/``, so ``make run`` needs no services. Point ``DATABASE_URL`` at PostgreSQL and
``CELERY_BROKER_URL`` at Redis for a real deployment.
"""

import ipaddress
import os
import secrets
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("STEPWISE_VAR_DIR", BASE_DIR / "var"))
VAR_DIR.mkdir(parents=True, exist_ok=True)


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


def _secret_key() -> str:
    # No secret is committed: without SECRET_KEY a random one is generated once and kept in
    # var/, so sessions survive restarts of a single-machine install.
    if key := os.environ.get("SECRET_KEY"):
        return key
    path = VAR_DIR / "secret_key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    key = path.read_text().strip()
    if not key:
        raise ImproperlyConfigured(f"{path} is empty; set SECRET_KEY or delete the file.")
    return key


SECRET_KEY = _secret_key()
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django_htmx",
    "rest_framework",
    "knox",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "axes",
    "csp",
    "django_celery_beat",
    "generators",
    "labeling",
    "trainer",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Cache-Control: no-store on secrets and exports (core/nostore.py).
    "core.nostore.NoStoreMiddleware",
    # Deprecation and Sunset headers on a request that used an old field name (core/deprecation.py).
    "core.deprecation.DeprecationMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # After htmx's: a refusal answers an htmx request with plain text, a page with error.html.
    "core.errors.DomainErrorMiddleware",
    "csp.middleware.CSPMiddleware",
    # Last, as django-axes requires: it turns a locked-out login into a 429 page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "annotate.urls"
WSGI_APPLICATION = "annotate.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "labeling.context_processors.roles",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.config(
        default=f"sqlite:///{VAR_DIR / 'stepwise.sqlite3'}",
        # Persistent connections with a health check: a restarted PostgreSQL costs one failed
        # request, not a restart of the app.
        conn_max_age=int(os.environ.get("CONN_MAX_AGE", "60")),
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Tests that start a Celery worker process need a database file both processes can open.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test_stepwise.sqlite3")}
    DATABASES["default"]["OPTIONS"] = {"timeout": 20, "transaction_mode": "IMMEDIATE"}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# The cache holds the API throttles' counts, so it is one store for every web process (a
# per-process cache let two server processes pass twice the rate). Redis when CACHE_URL names
# one: give it a database of its own, not the broker's, since clearing the cache flushes the
# whole database. Else the database's cache table, which `manage.py migrate` creates
# (trainer/apps.py) as the test runner does.
CACHE_URL = os.environ.get("CACHE_URL", "")
if CACHE_URL.startswith(("redis://", "rediss://", "unix://")):
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": CACHE_URL,
            # A Redis that stops answering must not hold every API request.
            "OPTIONS": {"socket_timeout": 2, "socket_connect_timeout": 2},
        }
    }
elif CACHE_URL:
    raise ImproperlyConfigured(f"CACHE_URL must be a redis:// URL, not {CACHE_URL!r}.")
else:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.db.DatabaseCache",
            "LOCATION": "stepwise_cache",
        }
    }

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
AUTHENTICATION_BACKENDS = [
    # django-axes first: it refuses a login while the username/IP pair is locked out.
    "axes.backends.AxesStandaloneBackend",
    # ModelBackend with the user's labeler and roles read in the same statement.
    "labeling.auth.UserWithRolesBackend",
    # Still listed: sessions logged in through it before stay valid.
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = int(os.environ.get("LOGIN_FAILURE_LIMIT", "5"))
AXES_COOLOFF_TIME = float(os.environ.get("LOGIN_COOLOFF_MINUTES", "15")) / 60  # hours
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_VERBOSE = False
# Password reset mails a link, so its pages are routed only when a mail server is set
# (annotate/urls.py); without one they would accept addresses and send nothing.
EMAIL_HOST = os.environ.get("EMAIL_HOST", "")
EMAIL_PORT = int(os.environ.get("EMAIL_PORT", "587"))
EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", True)
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "stepwise@localhost")
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", VAR_DIR / "staticfiles"))
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
STATICFILES_DIRS = [BASE_DIR / "static"]

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "labeling.tokens.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "core.errors.api_exception_handler",
    # Strict JSON (core/strictjson.py): no NaN, Infinity, duplicate keys, deep nesting.
    "DEFAULT_PARSER_CLASSES": [
        "core.strictjson.StrictJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    # They count in the shared cache (CACHES); refused authentication counts too
    # (core.errors.api_exception_handler), against the client's address.
    "DEFAULT_THROTTLE_CLASSES": [
        "rest_framework.throttling.AnonRateThrottle",
        "rest_framework.throttling.UserRateThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {
        "anon": os.environ.get("API_ANON_RATE", "60/min"),
        "user": os.environ.get("API_USER_RATE", "6000/min"),
    },
}
# API tokens are created by their owner on the settings page; each has its own expiry (or
# none), so knox's global time-to-live is off.
REST_KNOX = {"TOKEN_TTL": None, "AUTO_REFRESH": False}
SPECTACULAR_SETTINGS = {
    "TITLE": "stepwise API",
    "DESCRIPTION": "Problems, solutions, step labels (PRM800K), imports, training runs.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # Every job (training and sampling runs, imports) has the same statuses: one enum, one name.
    "ENUM_NAME_OVERRIDES": {
        "JobStatusEnum": "core.jobs.JobStatus",
        "EvaluationSetKindEnum": "trainer.evaluation.models.EvaluationSet.Kind",
        "ImportJobKindEnum": "labeling.models.ImportJob.Kind",
        "JudgeDisplayEnum": "labeling.models.JudgeDisplay",
    },
}

# --- What a client is, and what an outsider may read (issue 27) -----------------------------
# Proxies in front of the app that each append the address they saw to X-Forwarded-For. 0 (no
# proxy): throttles and the login lockout key on the socket's address alone, since anyone can
# send that header; N: on the address the outermost of the N trusted proxies appended
# (core/clientip.py). Set it to the real number: one too many lets clients pick their
# address again, one too few counts everyone behind the proxy as one client.
TRUSTED_PROXY_COUNT = int(os.environ.get("TRUSTED_PROXY_COUNT", "0"))
if TRUSTED_PROXY_COUNT < 0:
    raise ImproperlyConfigured(f"TRUSTED_PROXY_COUNT must be 0 or more, not {TRUSTED_PROXY_COUNT}.")
REST_FRAMEWORK["NUM_PROXIES"] = TRUSTED_PROXY_COUNT
AXES_CLIENT_IP_CALLABLE = "core.clientip.client_address"
# /api/schema/ and /api/docs/ need a login (session or token) as the rest of the API does;
# true serves them to anyone (annotate/apidocs.py).
API_SCHEMA_PUBLIC = env_bool("API_SCHEMA_PUBLIC", False)
# --- end of issue 27's block -------------------------------------------------------------------

# --- Serving speed (issue 27, the workbench under load) ---------------------------------------
# The API throttles keep DRF's keys and rates but count in one atomic statement of the shared
# cache above (core/throttling.py): one round trip a request instead of six (a read, then a
# transaction with a COUNT(*) of the cache table), and a burst spread over server processes
# cannot pass more than the rate in a window. core/errors.py counts refused logins with the
# same anonymous throttle.
REST_FRAMEWORK["DEFAULT_THROTTLE_CLASSES"] = [
    "core.throttling.AnonRateThrottle",
    "core.throttling.UserRateThrottle",
]
# --- end of the serving-speed block -----------------------------------------------------------

# Uploads: a PRM800K file is large but finite; anything bigger is refused before it is read.
IMPORT_MAX_UPLOAD_BYTES = int(os.environ.get("IMPORT_MAX_UPLOAD_BYTES", str(1024**3)))
# A Parquet upload is compressed: its footer's rows and uncompressed bytes are checked against
# these before its pages are read, and counted again while they are. The defaults hold the
# largest public sets with room to spare: a 100k-line PRM800K import, Math-Shepherd's about 445k
# rows. Arrow's form of a row is smaller than its JSON line (no keys, quotes or escapes), so
# twice the upload limit holds anything that would have been accepted as a JSONL upload.
IMPORT_MAX_ROWS = int(os.environ.get("IMPORT_MAX_ROWS") or 1_000_000)
IMPORT_MAX_EXPANDED_BYTES = int(
    os.environ.get("IMPORT_MAX_EXPANDED_BYTES") or 2 * IMPORT_MAX_UPLOAD_BYTES
)
# Processes that grade final answers during an import (LaTeX parsing is pure Python).
IMPORT_GRADING_PROCESSES = int(
    os.environ.get("IMPORT_GRADING_PROCESSES") or len(os.sched_getaffinity(0))
)
# Seconds one final-answer verdict may take, whoever asks; longer is "unsure" (ungraded).
GRADING_TIME_LIMIT_SECONDS = float(os.environ.get("GRADING_TIME_LIMIT_SECONDS") or 2)

# Queued or running jobs one person may have of each kind (judge runs, sampling runs, imports);
# a further request is refused with a 429 until one ends. 0: no limit.
LIVE_JOBS_PER_PERSON = int(os.environ.get("LIVE_JOBS_PER_PERSON") or 4)
# Live (unexpired) API tokens one person may hold; one more is refused with a 409 until one is
# revoked or expires. The token page and GET /api/tokens/ list at most this many.
API_TOKENS_PER_USER = int(os.environ.get("API_TOKENS_PER_USER") or 20)
# Search input (the data filters' `q`: every word is one more substring match over every
# problem's text): at most this many words and characters, refused with a 400 past them.
SEARCH_MAX_WORDS = int(os.environ.get("SEARCH_MAX_WORDS") or 12)
SEARCH_MAX_CHARS = int(os.environ.get("SEARCH_MAX_CHARS") or 300)
DATA_UPLOAD_MAX_MEMORY_SIZE = int(os.environ.get("DATA_UPLOAD_MAX_MEMORY_SIZE", str(20 * 1024**2)))
# Items of one JSON array in a request body or an uploaded line (core/strictjson.py), refused
# with a 400 while parsing; also the most ids one list field of the API takes (core/idlists.py).
# The largest honest array is a run's ids (judge and sampling runs take 10,000) or a bulk POST of
# problems or solutions; more than that is an upload (POST /api/imports/).
MAX_JSON_ARRAY_ITEMS = int(os.environ.get("MAX_JSON_ARRAY_ITEMS") or 10_000)
# Bytes of one line of an uploaded file (core/strictjson.py `bounded_lines`): a longer line is
# refused with FILE:LINE once this many are read. 128 steps of 20,000 characters, the most a
# scored solution holds, are about 2.5 MB.
MAX_UPLOAD_LINE_BYTES = int(os.environ.get("MAX_UPLOAD_LINE_BYTES") or 4 * 1024**2)
FILE_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024**2
# The limit is checked against Content-Length before the body is read, then while it streams.
FILE_UPLOAD_HANDLERS = [
    "core.strictjson.UploadLimitHandler",
    "django.core.files.uploadhandler.MemoryFileUploadHandler",
    "django.core.files.uploadhandler.TemporaryFileUploadHandler",
]

# Security headers. HTTPS=true (behind a TLS proxy) turns on the cookie/redirect/HSTS settings
# that `manage.py check --deploy` asks for.
HTTPS = env_bool("HTTPS", False)
SECURE_SSL_REDIRECT = HTTPS
SESSION_COOKIE_SECURE = HTTPS
CSRF_COOKIE_SECURE = HTTPS
SECURE_HSTS_SECONDS = int(os.environ.get("SECURE_HSTS_SECONDS", "31536000" if HTTPS else "0"))
SECURE_HSTS_INCLUDE_SUBDOMAINS = HTTPS
SECURE_HSTS_PRELOAD = HTTPS
if HTTPS:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True
# Only our own static assets: no CDN, no inline script.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}

# Celery. The filesystem transport lets a worker and the web process share a folder when no
# broker is installed; in production set CELERY_BROKER_URL to Redis or RabbitMQ.
BROKER_DIR = VAR_DIR / "broker"
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "filesystem://")
if CELERY_BROKER_URL.startswith("filesystem://"):
    for sub in ("queue", "processed", "control"):
        (BROKER_DIR / sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(BROKER_DIR / "queue"),
        "data_folder_out": str(BROKER_DIR / "queue"),
        "processed_folder": str(BROKER_DIR / "processed"),
        "store_processed": False,
        # Exchange bindings; kombu's default is a `control/` folder in the working directory.
        "control_folder": str(BROKER_DIR / "control"),
    }
elif CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    # Without socket timeouts a Redis that stops answering (hung, failed over, a dropped
    # network path) holds a request that queues a task until gunicorn kills its worker, and
    # the run stays queued, refusing every later one. Publishing takes milliseconds, so two
    # seconds per wait is generous; with one retry the request fails within about six.
    CELERY_BROKER_TRANSPORT_OPTIONS = {"socket_timeout": 2, "socket_connect_timeout": 2}
# One retry is enough to replace a pooled connection a restarted broker has closed; more only
# lengthen the wait for a broker that is down.
CELERY_TASK_PUBLISH_RETRY_POLICY = {
    "max_retries": 1,
    "interval_start": 0,
    "interval_step": 0.5,
    "interval_max": 0.5,
}
CELERY_TASK_DEFAULT_QUEUE = "default"
# Training and scoring hold a GPU; the periodic check that decides whether to retrain does not.
CELERY_TASK_ROUTES = {
    "trainer.tasks.periodic_retrain_task": {"queue": "default"},
    "trainer.tasks.*": {"queue": "gpu"},
}
# A worker reserves one task at a time: a second training run waits in the broker, where any
# free GPU worker can take it, instead of behind a long run on this one.
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True

# --- The artifact store (core/store.py) ----------------------------------------------------
# Every file more than one process reads (checkpoints, exported models, local generator models,
# import uploads) is kept here by key; records hold `<key>@<digest>`, never a host's path.
# A directory (the embedded default; on many hosts, a mount they all share), file://…, or
# s3://bucket/prefix (AWS S3, MinIO, Ceph RGW, GCS's S3 API; keys from the usual AWS variables
# or instance role, the endpoint from STORE_S3_ENDPOINT_URL or AWS_ENDPOINT_URL).
STORE_URL = os.environ.get("STORE_URL") or str(VAR_DIR / "store")
if "://" in STORE_URL and not STORE_URL.startswith(("file://", "s3://")):
    raise ImproperlyConfigured(
        f"STORE_URL: {STORE_URL!r} is neither a directory, a file:// URL nor an s3:// URL."
    )
STORE_S3_ENDPOINT_URL = (
    os.environ.get("STORE_S3_ENDPOINT_URL")
    or os.environ.get("AWS_ENDPOINT_URL_S3")
    or os.environ.get("AWS_ENDPOINT_URL")
    or None
)
STORE_TIMEOUT_SECONDS = float(os.environ.get("STORE_TIMEOUT_SECONDS", "10"))
# This host's own: the cache of what it read from the store (by content digest) and the scratch
# space where uploads are received and checkpoints written before they are published.
STORE_CACHE_DIR = Path(os.environ.get("STORE_CACHE_DIR", VAR_DIR / "cache"))
STORE_SCRATCH_DIR = Path(os.environ.get("STORE_SCRATCH_DIR", VAR_DIR / "scratch"))
# Past this size the cache drops what was used least recently (and not in the last
# STORE_CACHE_MIN_AGE_SECONDS); 0 keeps everything. A checkpoint of a 7B backbone is ~15 GB.
STORE_CACHE_MAX_GB = float(os.environ.get("STORE_CACHE_MAX_GB", "100"))
STORE_CACHE_MIN_AGE_SECONDS = float(os.environ.get("STORE_CACHE_MIN_AGE_SECONDS", "600"))

# The PRM (trainer/). A training run writes its checkpoint under PRM_MODEL_DIR/run-<id>.
PRM_BASE_MODEL = os.environ.get("PRM_BASE_MODEL") or None
PRM_MODEL_DIR = Path(os.environ.get("PRM_MODEL_DIR", VAR_DIR / "models"))
PRM_AUTO_PROMOTE = env_bool("PRM_AUTO_PROMOTE", True)
PRM_PROMOTE_METRIC = os.environ.get("PRM_PROMOTE_METRIC", "step_auroc")
PRM_RETRAIN_MIN_NEW_LABELS = int(os.environ.get("PRM_RETRAIN_MIN_NEW_LABELS", "100"))
PRM_TRAIN_SOFT_TIME_LIMIT = int(os.environ.get("PRM_TRAIN_SOFT_TIME_LIMIT", str(12 * 3600)))
PRM_TRAIN_TIME_LIMIT = int(os.environ.get("PRM_TRAIN_TIME_LIMIT", str(12 * 3600 + 600)))
PRM_SCORE_SOFT_TIME_LIMIT = int(os.environ.get("PRM_SCORE_SOFT_TIME_LIMIT", str(3 * 3600)))
PRM_SCORE_TIME_LIMIT = int(os.environ.get("PRM_SCORE_TIME_LIMIT", str(3 * 3600 + 600)))
# Scoring writes its scores back one chunk of solutions per transaction: a worker killed
# mid-scoring loses at most one chunk, and the rescoring that follows skips what was written.
PRM_SCORE_CHUNK = int(os.environ.get("PRM_SCORE_CHUNK", "2000"))
# Processes one training run starts (torch.distributed, one per device): "auto" is one per
# CUDA device of the worker, 1 without CUDA; a number starts that many (gloo on the CPU).
PRM_TRAIN_PROCESSES = os.environ.get("PRM_TRAIN_PROCESSES", "auto")
# Memory (GB) a training run may use on the worker: a run whose estimated peak is above it is
# refused before it starts (trainer.training.ml.memory). Unset: what is available at the start.
PRM_TRAIN_MEMORY_GB = float(os.environ.get("PRM_TRAIN_MEMORY_GB") or 0) or None
# A running run's worker writes a heartbeat this often; a run silent for PRM_RUN_STALE_SECONDS
# is taken as dead (its worker was killed) and marked failed.
PRM_HEARTBEAT_SECONDS = float(os.environ.get("PRM_HEARTBEAT_SECONDS", "15"))
PRM_RUN_STALE_SECONDS = float(os.environ.get("PRM_RUN_STALE_SECONDS", "300"))

# Generators (generators/): what samples solutions, proposes live steps and rolls out
# step prefixes. With GENERATOR_BASE_URL set, an OpenAI-compatible server (vLLM, SGLang,
# llama.cpp's server, `transformers serve`, a hosted API; the URL ends in /v1) serving
# GENERATOR_MODEL; without it, the local model of that name (generators.LocalModel) on the worker.
# The key is read here only and never stored with what a generator made.
GENERATOR_BASE_URL = os.environ.get("GENERATOR_BASE_URL", "")
GENERATOR_MODEL = os.environ.get("GENERATOR_MODEL", "")
GENERATOR_API_KEY = os.environ.get("GENERATOR_API_KEY", "")
GENERATOR_TIMEOUT_SECONDS = float(os.environ.get("GENERATOR_TIMEOUT_SECONDS", "300"))
# Requests a sampling run keeps in flight at once against a server (a local model runs one).
GENERATOR_CONCURRENCY = int(os.environ.get("GENERATOR_CONCURRENCY", "8"))

# --- Where generator requests may go (issue 27, generators/outbound.py) -----------------------
# Generator URLs the operator vouches for besides GENERATOR_BASE_URL, comma-separated: offered
# on the forms, reached wherever they are (loopback and private addresses included), and sent
# GENERATOR_API_KEY. Any other URL a researcher names is sent only the key they give with it,
# and only to public addresses or to the networks below.
GENERATOR_ALLOWED_BASE_URLS = env_list("GENERATOR_ALLOWED_BASE_URLS", "")
for _url in GENERATOR_ALLOWED_BASE_URLS:
    if not _url.lower().startswith(("http://", "https://")):
        raise ImproperlyConfigured(
            f"GENERATOR_ALLOWED_BASE_URLS: {_url!r} is not an http(s) URL such as "
            "http://10.0.0.7:8000/v1."
        )
# CIDRs a researcher's own URL may reach besides public addresses (e.g. 10.20.0.0/16 for an
# inference cluster); loopback, link-local, private, multicast, reserved and unspecified
# addresses are refused unless listed here.
GENERATOR_ALLOWED_NETWORKS = env_list("GENERATOR_ALLOWED_NETWORKS", "")
for _network in GENERATOR_ALLOWED_NETWORKS:
    try:
        ipaddress.ip_network(_network, strict=False)
    except ValueError:
        raise ImproperlyConfigured(
            f"GENERATOR_ALLOWED_NETWORKS: {_network!r} is not a CIDR such as 10.0.0.0/8."
        ) from None
# --- end of the outbound block ------------------------------------------------------------------

# Active learning (trainer/selection/services.py, queued by trainer/pipeline.py): how the next
# generation of solutions is chosen.
# Strategy: convincing_wrong_answer (the paper's), uniform (random baseline) or uncertainty.
SELECTION_STRATEGY = os.environ.get("SELECTION_STRATEGY", "convincing_wrong_answer")
# Solutions each labeled once per generation, at most SELECTION_PER_PROBLEM_CAP per problem;
# SELECTION_WRONG_SHARE of them are convincing wrong answers (convincing_wrong_answer only).
SELECTION_BATCH_SIZE = int(os.environ.get("SELECTION_BATCH_SIZE", "500"))
SELECTION_PER_PROBLEM_CAP = int(os.environ.get("SELECTION_PER_PROBLEM_CAP", "4"))
SELECTION_WRONG_SHARE = float(os.environ.get("SELECTION_WRONG_SHARE", "0.8"))
# Quality-control solutions reserved for each generation (on top of the batch), served to
# every labeler.
SELECTION_QUALITY_CONTROL_COUNT = int(os.environ.get("SELECTION_QUALITY_CONTROL_COUNT", "10"))
# Overlap: this share of each generation's batch goes to SELECTION_OVERLAP_LABELERS labelers
# each (the rest to one), for agreement between labelers; changeable per generation later.
SELECTION_OVERLAP_SHARE = float(os.environ.get("SELECTION_OVERLAP_SHARE", "0"))
SELECTION_OVERLAP_LABELERS = int(os.environ.get("SELECTION_OVERLAP_LABELERS", "2"))
# What a generation's labelers see of the judge labels (labeling/judge_display.py): "hidden"
# (nothing), "revealed" (after they rate a step) or "confirm" (a suggestion before).
SELECTION_JUDGE_DISPLAY = os.environ.get("SELECTION_JUDGE_DISPLAY", "hidden")
# After a retrain whose model became active: select the next generation for "scheduled"
# (periodic) runs only, "always" (any run), or "never".
SELECTION_AFTER_RETRAIN = os.environ.get("SELECTION_AFTER_RETRAIN", "scheduled")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    # math-verify warns once per process that its signal timeouts are off; they are off on
    # purpose (signals fail outside the main thread), see labeling/grading/symbolic.py.
    # The OpenAI client's HTTP library logs every request at INFO: a sampling run's thousands.
    "loggers": {"math_verify": {"level": "ERROR"}, "httpx": {"level": "WARNING"}},
}
