"""Settings for `bench/serve.py` only: the app's settings plus the floor view's URL."""

from annotate.settings import *  # noqa: F403

ROOT_URLCONF = "bench.serve_urls"
