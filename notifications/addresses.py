"""Where a webhook may go: https only and public addresses only in production (the settings say so).

Where private addresses are refused (production), the host must resolve to public addresses only and the port
be 443, 80 or 1024 and up. A URL is checked when it is registered and again before every delivery, after
resolving its host: a name that resolved to a public address yesterday may resolve to 127.0.0.1 today. Delivery
then connects to the address that was checked, never resolving the name a second time.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

from django.conf import settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# Python's is_global still counts these as public: 6to4 carries any IPv4 address inside (192.168.1.1 in
# 2002:c0a8:101::), and site-local is private space that was only deprecated.
NOT_PUBLIC_V6 = (ipaddress.IPv6Network("2002::/16"), ipaddress.IPv6Network("fec0::/10"))
# Below 1024 only the web's ports: a privileged port on a public host is a mail, SSH or admin service.
WEB_PORTS = frozenset({80, 443})


class UnsafeUrl(ValueError):
    """The URL may not receive webhooks; the message says why in words a customer understands."""


@dataclass(frozen=True)
class Target:
    """A checked URL and, when private addresses are refused, the public address to connect to."""

    url: str
    host: str
    address: str | None


def _is_public(address: IPAddress) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if isinstance(address, ipaddress.IPv6Address) and any(address in network for network in NOT_PUBLIC_V6):
        return False
    return address.is_global and not (address.is_multicast or address.is_reserved or address.is_unspecified)


def url_syntax_check(url: str) -> SplitResult:
    """Refuse a URL that is not an absolute http(s) URL with a host (https only where required)."""
    if not isinstance(url, str) or not url or len(url) > 2000 or any(ch.isspace() or ord(ch) < 32 for ch in url):
        raise UnsafeUrl("Give an absolute URL of at most 2000 characters, without spaces.")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise UnsafeUrl("This is not a valid URL.") from exc
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UnsafeUrl("The URL must start with https:// and name a host.")
    if settings.WEBHOOK_REQUIRE_HTTPS and parts.scheme != "https":
        raise UnsafeUrl("The URL must use https://.")
    if parts.username is not None or parts.password is not None:
        raise UnsafeUrl("Put no user name or password in the URL; verify the signature instead.")
    if port == 0:
        raise UnsafeUrl("Port 0 is not a valid port.")
    try:
        parts.hostname.encode("idna")  # what resolvers and the HTTP client do with it; fails on bad labels
    except UnicodeError as exc:
        raise UnsafeUrl("This is not a valid host name: each part between dots is 1 to 63 characters.") from exc
    return parts


def _resolve(host: str, port: int) -> list[IPAddress]:
    with contextlib.suppress(ValueError):  # not an address: a name to resolve
        return [ipaddress.ip_address(host.strip("[]"))]
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise UnsafeUrl(f"The host {host} cannot be resolved.") from exc
    # Strip an IPv6 zone ("fe80::1%eth0"): link-local either way, refused below.
    return [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]


def url_check(url: str) -> Target:
    """Return where to deliver `url`; raise UnsafeUrl when it may not receive webhooks now."""
    parts = url_syntax_check(url)
    host = parts.hostname or ""
    if settings.WEBHOOK_ALLOW_PRIVATE_ADDRESSES:
        return Target(url=url, host=host, address=None)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    if port < 1024 and port not in WEB_PORTS:
        raise UnsafeUrl(f"Webhooks go to port 443, 80 or a port from 1024 up; port {port} is refused.")
    addresses = _resolve(host, port)
    if not addresses:
        raise UnsafeUrl(f"The host {host} cannot be resolved.")
    refused = [address for address in addresses if not _is_public(address)]
    if refused:
        raise UnsafeUrl(
            f"The host {host} points to a private, loopback, link-local or reserved address ({refused[0]}); "
            "webhooks go to public addresses only."
        )
    return Target(url=url, host=host, address=str(addresses[0]))
