"""Old names the API still takes, each answered with when it goes.

A request that names a field by its old name (`RenamedFieldsSerializer`'s ALIASES) is served
as before, and its response says so in the headers clients and proxies read: `Deprecation`
(RFC 9745: since when) and `Sunset` (RFC 8594: the date the old names stop being taken), with
a `Link` to the list of old names in docs/api.md. The dates are these, one for every old name.
"""

import calendar
from collections.abc import Callable, Iterable
from datetime import date

from django.http import HttpRequest, HttpResponse
from django.utils.http import http_date

DEPRECATED_SINCE = date(2026, 11, 28)
SUNSET = date(2027, 6, 1)
DOCS = "/api/docs/"


def mark(request, names: Iterable[str]) -> None:
    """Note that `request` (Django's, or DRF's around it) used these old names."""
    django_request = getattr(request, "_request", request)
    used = set(getattr(django_request, "deprecated_names", ())) | set(names)
    django_request.deprecated_names = sorted(used)


class DeprecationMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if getattr(request, "deprecated_names", None):
            since = calendar.timegm(DEPRECATED_SINCE.timetuple())
            response["Deprecation"] = f"@{since}"
            response["Sunset"] = http_date(calendar.timegm(SUNSET.timetuple()))
            response["Link"] = f'<{DOCS}>; rel="deprecation"'
        return response
