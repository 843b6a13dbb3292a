"""One base class for every refusal of the domain, and its HTTP mapping for the API and pages.

Services raise a subclass of one of the kinds below and know nothing of HTTP: a labeling
refusal is a `Conflict`, a bad training parameter `Invalid`, a broker that is down
`Unavailable`. The shells map the kind to a status here and nowhere else:
`api_exception_handler` (DRF's EXCEPTION_HANDLER) for /api/, `DomainErrorMiddleware` for pages.
A view may still catch a refusal to show it as a message on the page it redirects to; the
status a refusal gets is decided here. A constraint the database refuses (IntegrityError:
a race past the service's check) is a refusal too, a 409 (`refusal`).
"""

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from django.http import HttpRequest, HttpResponse
    from rest_framework.response import Response

logger = logging.getLogger(__name__)


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


# A unique or check constraint the database refused: two requests raced past the service's
# own check (or there was none), and the loser must hear "try again", never see a 500. The
# constraint's name and row stay in the log: they describe the schema, not the request.
CONSTRAINT_CONFLICT = (
    "This conflicts with a record saved at the same moment (another request won the race). "
    "Reload and try again."
)


def refusal(exc: Exception) -> tuple[int, str] | None:
    """The status and sentence both shells answer `exc` with; None: not a refusal (a 500).

    The one mapping of the app: the API's handler and the pages' middleware both ask here.
    """
    from django.db import IntegrityError

    if isinstance(exc, DomainError):
        return http_status(exc), str(exc)
    if isinstance(exc, IntegrityError):
        logger.warning("a constraint refused a write, answered 409: %s", exc)
        return 409, CONSTRAINT_CONFLICT
    return None


# The shells' imports stay inside them: services (and the torch side, through
# trainer.training.params) import the kinds above without Django being configured.


def api_exception_handler(exc: Exception, context: dict) -> "Response | None":
    from rest_framework.exceptions import AuthenticationFailed, NotAuthenticated, Throttled
    from rest_framework.response import Response
    from rest_framework.views import exception_handler as drf_exception_handler
    from rest_framework.views import set_rollback

    from core.throttling import AnonRateThrottle  # the API's own (settings)

    refused = refusal(exc)
    if refused is not None:
        # A refused statement leaves an atomic request's transaction unusable: roll it back
        # as DRF does for its own exceptions.
        set_rollback()
        return Response({"detail": refused[1]}, status=refused[0])
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
    """A refusal raised out of a page view (a domain error or a constraint the database
    refused, `refusal`): the message with its status, never a 500.

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

        refused = refusal(exc)
        if refused is None:
            return None
        status, message = refused
        if getattr(request, "htmx", False):
            return HttpResponse(message, status=status, content_type="text/plain; charset=utf-8")
        return render(request, "error.html", {"message": message, "status": status}, status=status)
