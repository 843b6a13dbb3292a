"""One base class for every refusal of the domain, and its HTTP mapping for the API and pages.

Services raise a subclass of one of the kinds below and know nothing of HTTP: a labeling
refusal is a `Conflict`, a bad training parameter `Invalid`, a broker that is down
`Unavailable`. The shells map the kind to a status here and nowhere else:
`api_exception_handler` (DRF's EXCEPTION_HANDLER) for /api/, `DomainErrorMiddleware` for pages.
A view may still catch a refusal to show it as a message on the page it redirects to; the
status a refusal gets is decided here.
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from django.http import HttpRequest, HttpResponse
    from rest_framework.response import Response


class DomainError(Exception):
    """A request the domain refuses; str() is a sentence for the person who asked."""


class Invalid(DomainError):
    """The request itself is wrong (a bad parameter, a malformed line)."""


class NotAllowed(DomainError):
    """The caller may not do this (another labeler's session, a deactivated labeler)."""


class NotFound(DomainError):
    """What the request names does not exist."""


class Conflict(DomainError):
    """A valid request that the current state does not allow (a finished session, a live run)."""


class TooLarge(DomainError):
    """The request carries more than the configured limit."""


class TooMany(DomainError):
    """The caller already has as many of these as one person may (live jobs); wait for one."""


class Unavailable(DomainError):
    """A service the request needs (the task broker) cannot be reached; nothing was done."""


# Most specific first: a class may be of two kinds (a labeling refusal that is also NotAllowed).
HTTP_STATUS: tuple[tuple[type[DomainError], int], ...] = (
    (NotAllowed, 403),
    (NotFound, 404),
    (TooLarge, 413),
    (TooMany, 429),
    (Unavailable, 503),
    (Conflict, 409),
    (Invalid, 400),
)


def http_status(exc: DomainError) -> int:
    return next((status for kind, status in HTTP_STATUS if isinstance(exc, kind)), 400)


# The shells' imports stay inside them: services (and the torch side, through
# trainer.training.params) import the kinds above without Django being configured.


def api_exception_handler(exc: Exception, context: dict) -> "Response | None":
    from rest_framework.exceptions import AuthenticationFailed, NotAuthenticated, Throttled
    from rest_framework.response import Response
    from rest_framework.views import exception_handler as drf_exception_handler

    from core.throttling import AnonRateThrottle  # the API's own (settings)

    if isinstance(exc, DomainError):
        return Response({"detail": str(exc)}, status=http_status(exc))
    if isinstance(exc, AuthenticationFailed | NotAuthenticated):
        # DRF checks throttles after authentication and permissions, so a 401 was never
        # counted: guessing tokens cost nothing. Each one counts against the client's address
        # under the anonymous rate, and past it the answer is a 429. The address is the one
        # the trusted proxies report (core/clientip.py), not a header the client writes.
        throttle = AnonRateThrottle()
        if not throttle.allow_request(context["request"], context["view"]):
            exc = Throttled(wait=throttle.wait())
    return drf_exception_handler(exc, context)


class DomainErrorMiddleware:
    """A refusal raised out of a page view: the message with its status, never a 500.

    An htmx request gets the sentence as plain text (the page shows it in place); any other
    gets the error page with the site's navigation.
    """

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: "HttpRequest") -> "HttpResponse":
        return self.get_response(request)

    def process_exception(self, request: "HttpRequest", exc: Exception) -> "HttpResponse | None":
        from django.http import HttpResponse
        from django.shortcuts import render

        if not isinstance(exc, DomainError):
            return None
        status = http_status(exc)
        if getattr(request, "htmx", False):
            return HttpResponse(str(exc), status=status, content_type="text/plain; charset=utf-8")
        return render(request, "error.html", {"message": str(exc), "status": status}, status=status)
