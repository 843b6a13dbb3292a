"""The client's address, as every throttle and the login lockout count it.

Behind no proxy it is the socket's peer (REMOTE_ADDR), whatever headers say: anyone can send
an X-Forwarded-For. Behind TRUSTED_PROXY_COUNT proxies that each append the address they saw
(settings.py sets DRF's NUM_PROXIES from it), it is the entry the outermost trusted proxy
appended, counted from the right; what the client wrote further left is ignored. One rule
for DRF's throttles (the 401 counter in core/errors.py included) and django-axes.
"""

from django.http import HttpRequest
from rest_framework.throttling import BaseThrottle


def client_address(request: HttpRequest) -> str | None:
    """DRF's own reading of the address under NUM_PROXIES; axes calls it by name
    (AXES_CLIENT_IP_CALLABLE)."""
    return BaseThrottle().get_ident(request)
