"""The web process never imports torch: a page or an API answer must not cost a second and a
gigabyte of memory, and the 44 function-level imports that keep torch out are only kept honest
by a test that loads the whole web stack and looks."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

LOAD_THE_WEB_STACK = """
import sys
import django
django.setup()
from django.urls import get_resolver

def walk(patterns):
    for pattern in patterns:
        if hasattr(pattern, "url_patterns"):
            walk(pattern.url_patterns)
        else:
            pattern.callback  # imports the view's module

walk(get_resolver().url_patterns)
# The WSGI application loads every middleware, as the server does.
import annotate.wsgi, annotate.api_urls, labeling.api, trainer.api, labeling.admin, trainer.admin
print("torch" in sys.modules, "transformers" in sys.modules)
"""


def test_loading_every_url_view_and_api_module_leaves_torch_unimported(tmp_path):
    result = subprocess.run(
        [sys.executable, "-c", LOAD_THE_WEB_STACK],
        cwd=ROOT,
        env={
            "DJANGO_SETTINGS_MODULE": "annotate.settings",
            "STEPWISE_VAR_DIR": str(tmp_path),
            "PATH": "/usr/bin:/bin",
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["False", "False"], "torch or transformers was imported"
