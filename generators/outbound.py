"""Where a generator's requests may go, and which key goes with them.

A generator URL is one of two kinds:

- **the operator's**: GENERATOR_BASE_URL and GENERATOR_ALLOWED_BASE_URLS. Trusted as written (a
  local vLLM or `transformers serve` on 127.0.0.1 is what an operator often runs) and sent
  GENERATOR_API_KEY;
- **a researcher's own**: any other URL. Sent only the key the researcher gave with it (none
  when none was given), and only to public addresses or to GENERATOR_ALLOWED_NETWORKS:
  loopback, link-local, private, multicast, reserved and unspecified addresses are refused,
  as are IP addresses written in hexadecimal, octal or decimal and names that resolve to any
  refused address.

A researcher's URL is checked where it enters (the forms, the API, `manage.py sample`), again
on the worker before a client is made, and at every connection (`transport.GuardedTransport`
resolves the name, checks every address and connects to the address it checked, so a name
that resolves elsewhere after the check, DNS rebinding, reaches nothing new). Redirects are
never followed, and no reply text reaches an error message (`openai_compatible`).
"""

import ipaddress
import socket
from urllib.parse import SplitResult, urlsplit, urlunsplit

from django.conf import settings

from core import patterns
from generators.base import InvalidGenerator

MAX_URL_CHARS = 1024
MAX_KEY_CHARS = 4096
_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"  # 1 to 63, no hyphen at either end
_HOSTNAME = patterns.compile(rf"{_LABEL}(?:\.{_LABEL})*\.?")
_KEY = patterns.compile(r"[\x21-\x7e]+")
# NAT64 (RFC 6052): the address's last 32 bits are the IPv4 address it reaches.
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


class OutboundRefused(InvalidGenerator):
    """A generator URL, or an address it resolves to, that the outbound rule refuses."""


def _parse(url: str) -> SplitResult:
    """The URL split, or OutboundRefused naming what is malformed. Every generator URL, the
    operator's included, must pass this."""
    if not isinstance(url, str) or not url or len(url) > MAX_URL_CHARS:
        raise OutboundRefused(f"base_url must be a URL of at most {MAX_URL_CHARS} characters.")
    if any(c.isspace() or not c.isprintable() for c in url):
        raise OutboundRefused("base_url must not hold spaces or control characters.")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number in range
    except ValueError as exc:
        raise OutboundRefused(f"base_url {url!r} is not a well-formed URL ({exc}).") from None
    if parts.scheme.lower() not in ("http", "https"):
        raise OutboundRefused(
            "base_url must start with http:// or https://, e.g. http://host:8000/v1."
        )
    if not parts.hostname:
        raise OutboundRefused(f"base_url {url!r} names no host.")
    return parts


def check_syntax(url: str) -> None:
    """What every generator URL must be: http(s), a host, well formed."""
    _parse(url)


def normalized(url: str) -> str:
    """The form URLs are compared in: scheme and host in lower case, no trailing slash."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return url.strip().rstrip("/")
    return urlunsplit(
        (
            parts.scheme.lower(),
            parts.netloc.lower(),
            parts.path.rstrip("/"),
            parts.query,
            parts.fragment,
        )
    )


def operator_urls() -> list[str]:
    """The URLs the operator vouches for: GENERATOR_BASE_URL, then the allow-list."""
    urls = [settings.GENERATOR_BASE_URL, *settings.GENERATOR_ALLOWED_BASE_URLS]
    return list(dict.fromkeys(normalized(url) for url in urls if url))


def is_operator_url(url: str) -> bool:
    return bool(url) and normalized(url) in operator_urls()


def at_own_server(generator: dict) -> bool:
    """Whether a job's generator is a researcher's own server: such a job resumes with their
    key given again, never stored."""
    return generator.get("backend") == "openai" and not is_operator_url(
        generator.get("base_url") or ""
    )


def allowed_networks() -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    return [ipaddress.ip_network(n, strict=False) for n in settings.GENERATOR_ALLOWED_NETWORKS]


def _embedded(address: Address) -> list[Address]:
    """The addresses a connection to `address` reaches: an IPv4-mapped IPv6 address is its
    IPv4 address (::ffff:127.0.0.1 is 127.0.0.1); a 6to4, Teredo or NAT64 address is checked
    with the IPv4 addresses it carries, those first."""
    if not isinstance(address, ipaddress.IPv6Address):
        return [address]
    if address.ipv4_mapped is not None:
        return [address.ipv4_mapped]
    found: list[Address] = []
    if address.sixtofour is not None:
        found.append(address.sixtofour)
    if address.teredo is not None:
        found.extend(address.teredo)
    if address in _NAT64:
        found.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return [*found, address]


def _kind(address: Address) -> str:
    """What makes an address no public one ("" for a public address)."""
    if address.is_unspecified:
        return "unspecified"
    if address.is_loopback:
        return "loopback"
    if address.is_link_local:
        return "link-local"
    if address.is_multicast:
        return "multicast"
    if address.is_reserved:
        return "reserved"
    if address.is_private:
        return "private"
    if not address.is_global:
        return "non-public"
    return ""


def refusal(address: Address) -> str:
    """Why a researcher's URL may not reach `address` ("a loopback address", "a private
    address (it reaches 10.0.0.1)"); "" when it may."""
    networks = allowed_networks()
    if any(address in network for network in networks):
        return ""
    for inner in _embedded(address):
        kind = _kind(inner)
        if kind and not any(inner in network for network in networks):
            via = "" if inner == address else f" (it reaches {inner})"
            article = "an" if kind[0] in "aeiou" else "a"
            return f"{article} {kind} address{via}"
    return ""


def _refused(what: str) -> OutboundRefused:
    return OutboundRefused(
        f"base_url is refused: {what}, which a researcher's own URL may not reach (the "
        "operator lists what it may: GENERATOR_ALLOWED_BASE_URLS, GENERATOR_ALLOWED_NETWORKS)."
    )


def _loose_ipv4(host: str) -> bool:
    """Whether the C library reads `host` as an IPv4 address though it is not four decimal
    numbers: 0x7f000001, 2130706433, 0177.0.0.1 and 127.1 all reach 127.0.0.1."""
    try:
        socket.inet_aton(host)
    except (OSError, ValueError):
        return False
    return True


def resolve(host: str, port: int) -> list[Address]:
    """Every address `host` resolves to (the C library's resolver, as a connection uses)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        raise OutboundRefused(f"base_url's host {host} does not resolve.") from None
    addresses = [
        ipaddress.ip_address(info[4][0].split("%", 1)[0])
        for info in infos
        if info[0] in (socket.AF_INET, socket.AF_INET6)
    ]
    if not addresses:
        raise OutboundRefused(f"base_url's host {host} does not resolve.")
    return list(dict.fromkeys(addresses))


def permitted_addresses(host: str, port: int) -> list[Address]:
    """The addresses `host` resolves to, each one checked: OutboundRefused when any is one a
    researcher's URL may not reach (a name with one private address among public ones is
    refused whole)."""
    addresses = resolve(host, port)
    for address in addresses:
        reason = refusal(address)
        if reason:
            if host == str(address):
                raise _refused(f"{host} is {reason}")
            raise _refused(f"{host} resolves to {address}, {reason}")
    return addresses


def _default_port(parts: SplitResult) -> int:
    return parts.port or (443 if parts.scheme.lower() == "https" else 80)


def check_researcher_url(url: str, *, resolve_host: bool = True) -> None:
    """A URL that is not the operator's: OutboundRefused naming what is wrong. With
    `resolve_host`, its name is resolved and every address checked."""
    parts = _parse(url)
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise OutboundRefused(
            "base_url must not hold a user name or password: give the server's key as api_key."
        )
    if parts.query or parts.fragment or url.rstrip().endswith(("?", "#")):
        raise OutboundRefused("base_url must not have a query (?...) or a fragment (#...).")
    if parts.port == 0:
        raise OutboundRefused("base_url's port must be from 1 to 65535.")
    host = parts.hostname
    if "%" in host:
        raise OutboundRefused("base_url must not name an IPv6 zone (%...).")
    literal: Address | None = None
    try:
        literal = ipaddress.ip_address(host)
    except ValueError:
        if _loose_ipv4(host):
            raise OutboundRefused(
                f"base_url is refused: {host} is an IP address written in hexadecimal, octal, "
                "decimal or short form (write an address as four decimal numbers)."
            ) from None
        if not host.isascii() or not _HOSTNAME.fullmatch(host):
            raise OutboundRefused(
                f"base_url's host {host!r} is not a valid host name (an international name "
                "is written in its xn-- form)."
            ) from None
        if host.rstrip(".") == "localhost" or host.rstrip(".").endswith(".localhost"):
            raise _refused(f"{host} names this machine, a loopback address") from None
    if literal is not None:
        reason = refusal(literal)
        if reason:
            raise _refused(f"{host} is {reason}")
    if resolve_host:
        permitted_addresses(host, _default_port(parts))


def check_base_url(url: str) -> None:
    """Any generator URL: the operator's are only parsed, a researcher's checked in full."""
    if is_operator_url(url):
        check_syntax(url)
    else:
        check_researcher_url(url)


def check_api_key(key: str) -> None:
    if not isinstance(key, str) or len(key) > MAX_KEY_CHARS:
        raise InvalidGenerator(f"api_key must be text of at most {MAX_KEY_CHARS} characters.")
    if key and not _KEY.fullmatch(key):
        raise InvalidGenerator("api_key must be printable characters without spaces.")


def key_for(*, base_url: str, api_key: str) -> str:
    """The key a request to `base_url` carries: the one given with it, else the operator's
    (GENERATOR_API_KEY) for the operator's URLs only, else none ("")."""
    if api_key:
        return api_key
    if is_operator_url(base_url):
        return settings.GENERATOR_API_KEY
    return ""
