"""Old names the API still takes, each answered with when it goes.

A request that names a field by its old name (`RenamedFieldsSerializer`'s ALIASES) is served
as before, and its response says so in the headers clients and proxies read: `Deprecation`
(RFC 9745: since when) and `Sunset` (RFC 8594: the date the old names stop being taken), with
a `Link` to the list of old names in docs/api.md. A page moved to a new address (`moved`)
answers its old address, and everything under it, with a permanent redirect carrying the same
headers. The dates are these, one for every old name.
"""

import calendar
from collections.abc import Callable, Iterable
from datetime import date

from django.http import HttpRequest, HttpResponse, HttpResponsePermanentRedirect
from django.urls import URLPattern, path
from django.utils.http import http_date

DEPRECATED_SINCE = date(2026, 11, 28)
SUNSET = date(2027, 6, 1)
DOCS = "/api/docs/"
# Every (old, new) address prefix given to `moved`: docs/api.md lists each (a test checks).
MOVED: list[tuple[str, str]] = []


def mark(request, names: Iterable[str]) -> None:
    """Note that `request` (Django's, or DRF's around it) used these old names."""
    django_request = getattr(request, "_request", request)
    used = set(getattr(django_request, "deprecated_names", ())) | set(names)
    django_request.deprecated_names = sorted(used)


def _headers(response: HttpResponse) -> HttpResponse:
    since = calendar.timegm(DEPRECATED_SINCE.timetuple())
    response["Deprecation"] = f"@{since}"
    response["Sunset"] = http_date(calendar.timegm(SUNSET.timetuple()))
    response["Link"] = f'<{DOCS}>; rel="deprecation"'
    return response


class _Moved(HttpResponsePermanentRedirect):
    # 308, not 301: a form or API client posting to the old address posts again to the new
    # one instead of turning into a GET that would lose its body.
    status_code = 308


def moved(old: str, new: str) -> list[URLPattern]:
    """URL patterns answering the prefix `old` (e.g. "runs/") and every address under it with a
    redirect to the same address under `new`, query string kept."""

    def view(request: HttpRequest, rest: str = "") -> HttpResponse:
        query = request.META.get("QUERY_STRING", "")
        return _headers(_Moved(f"/{new}{rest}" + (f"?{query}" if query else "")))

    MOVED.append((old, new))
    return [path(old, view), path(f"{old}<path:rest>", view)]


class DeprecationMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if getattr(request, "deprecated_names", None):
            _headers(response)
        return response
