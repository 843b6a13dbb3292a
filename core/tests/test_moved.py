"""Pages moved to a new address still answer the old one (issue 42): every page under a moved
prefix, found in the URL tree, is reached from its old address by a permanent redirect that
keeps the method and the query and says when the old address goes."""

from pathlib import Path

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from core import deprecation

pytestmark = pytest.mark.django_db


def _routes(patterns, prefix=""):
    for p in patterns:
        if isinstance(p, URLResolver):
            yield from _routes(p.url_patterns, prefix + str(p.pattern))
        elif isinstance(p, URLPattern) and p.name:
            yield prefix + str(p.pattern)


def _example(route: str) -> str:
    """The route as an address, each argument 7: the redirect never looks an object up."""
    head, *parts = route.split("<")
    return "/" + head + "".join("7" + part.split(">", 1)[1] for part in parts)


def test_every_page_under_a_moved_prefix_answers_its_old_address():
    routes = list(_routes(get_resolver().url_patterns))  # loads the URL tree, and so MOVED
    assert deprecation.MOVED, "no moved prefix is registered"
    client = Client()
    for old, new in deprecation.MOVED:
        under = [r for r in routes if r.startswith(new)]
        assert under, f"nothing lives under {new!r} any more"
        for route in under:
            address = _example(route)
            old_address = "/" + old + address[len(new) + 1 :]
            for method in (client.get, client.post):
                answer = method(old_address + "?page=2&q=x")
                assert answer.status_code == 308, (old_address, answer.status_code)
                assert answer["Location"] == address + "?page=2&q=x"
                assert answer["Sunset"] == "Tue, 01 Jun 2027 00:00:00 GMT"
                assert answer["Deprecation"].startswith("@")


def test_docs_list_every_moved_address():
    assert get_resolver().url_patterns  # loads the URL tree, and so MOVED
    api = (Path(__file__).resolve().parents[2] / "docs" / "api.md").read_text()
    for old, new in deprecation.MOVED:
        assert f"| `/{old}…` | `/{new}…`" in api, f"docs/api.md does not list /{old}"
