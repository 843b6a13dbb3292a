"""The HTTP client a generator server is asked through: redirects never followed, and for a
researcher's own URL every connection checked where it is made.

The openai client speaks through httpx2. For a researcher's URL its transport resolves the
host for each request, checks every address (`outbound.permitted_addresses`) and sends the
request to the address it checked: the URL's host is replaced by that address, while the Host
header and the TLS server name stay the host's. A name whose answer changes between the check
and the connection (DNS rebinding) is therefore checked on the answer actually used. Proxies
from the environment are not used for such URLs: a proxy would connect where it likes.
"""

import httpx2

from generators import outbound


class GuardedTransport(httpx2.BaseTransport):
    def __init__(self) -> None:
        self._inner = httpx2.HTTPTransport(trust_env=False)

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        host = request.url.host
        port = request.url.port or (443 if request.url.scheme == "https" else 80)
        address = str(outbound.permitted_addresses(host, port)[0])
        if address != host:
            request.extensions = {**request.extensions, "sni_hostname": host}
            request.url = request.url.copy_with(host=address)
        return self._inner.handle_request(request)

    def close(self) -> None:
        self._inner.close()


def http_client(*, guarded: bool, timeout: float) -> httpx2.Client:
    """The client for one generator: `guarded` for a researcher's URL, plain (environment
    proxies honoured) for the operator's. Neither follows a redirect: an answer of 3xx is an
    error that names its status, and the key is never sent on to where it points."""
    if guarded:
        return httpx2.Client(
            transport=GuardedTransport(), follow_redirects=False, timeout=timeout, trust_env=False
        )
    return httpx2.Client(follow_redirects=False, timeout=timeout)
