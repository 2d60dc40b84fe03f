"""Where an alert may call: https URLs on public addresses only (issue 51, point 4).

A target URL is checked twice: when the alert is created (``check_url``: its form, then its
host resolved) and again at every delivery (``resolve``: the addresses the call then connects
to, so a name that later resolves to a private address is refused, not called). An address is
public when the ``ipaddress`` module calls it global: loopback, private, link-local (the cloud
metadata address 169.254.169.254 among them), shared (100.64/10), multicast, reserved and
unspecified addresses are not, nor an IPv4 address mapped into IPv6 that is not.

``ALERTS_ALLOWED_HOSTS`` (hosts or networks, empty by default) admits targets the rule would
refuse, over http too: a host named there (``receiver.internal``), or addresses inside a
network named there (``127.0.0.1``, ``10.0.0.0/8``), for tests and private deployments.
"""

from __future__ import annotations

import concurrent.futures
import ipaddress
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from app.errors import ApiError

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
# (host, port) -> the addresses it resolves to; socket.getaddrinfo's by default.
Resolver = Callable[[str, int], list[str]]
RESOLVE_TIMEOUT_S = 2.0  # a name that takes longer to resolve is refused, not waited for
MAX_URL_LENGTH = 2048
_RESOLVERS = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="resolve")


class TargetRefusedError(Exception):
    """A target the rules refuse, and why (said to the alert's owner, never a secret)."""


@dataclass(frozen=True)
class Target:
    """A checked URL: its scheme, host, port, the path with its query, and the addresses the
    call may connect to (the first one is used)."""

    scheme: str
    host: str
    port: int
    path: str
    addresses: tuple[str, ...]


@dataclass(frozen=True)
class AllowList:
    """``ALERTS_ALLOWED_HOSTS``: names, and networks."""

    names: frozenset[str]
    networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]

    @classmethod
    def parse(cls, entries: Sequence[str]) -> AllowList:
        """Entries as the setting lists them: a network (``10.0.0.0/8``), an address, or a
        host name (compared case-insensitively)."""
        names, networks = set(), []
        for entry in entries:
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                names.add(entry.lower().rstrip("."))
        return cls(frozenset(names), tuple(networks))

    def admits_name(self, host: str) -> bool:
        """Whether ``host`` is named in the list."""
        return host.lower().rstrip(".") in self.names

    def admits(self, address: Address) -> bool:
        """Whether ``address`` is inside a network of the list."""
        return any(address in network for network in self.networks)


def public(address: Address) -> bool:
    """Whether an address is on the public internet (an IPv4 one mapped into IPv6 judged as
    the IPv4 address it is)."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_global and not address.is_multicast


def parse_url(url: str) -> tuple[str, str, int, str]:
    """(scheme, host, port, path with query) of an http(s) URL; ``TargetRefusedError`` for
    anything else (credentials in it, a fragment, no host, a bad port)."""
    if not isinstance(url, str) or not url or len(url) > MAX_URL_LENGTH or not url.isascii():
        raise TargetRefusedError(
            f"must be an ASCII http(s) URL of at most {MAX_URL_LENGTH} characters"
        )
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise TargetRefusedError(f"is not a URL ({exc})") from None
    scheme = parts.scheme.lower()
    if scheme not in ("https", "http"):
        raise TargetRefusedError("must be an https URL")
    if parts.username is not None or parts.password is not None:
        raise TargetRefusedError("must not carry credentials (user:password@)")
    if parts.fragment:
        raise TargetRefusedError("must not have a fragment")
    host = (parts.hostname or "").rstrip(".")
    if not host or any(c.isspace() for c in url):
        raise TargetRefusedError("must name a host")
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return scheme, host, port or (443 if scheme == "https" else 80), path


def system_resolver(host: str, port: int) -> list[str]:
    """The addresses ``host`` resolves to (TCP), through the system's resolver."""
    found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in found))


def _addresses(host: str, port: int, resolver: Resolver) -> list[Address]:
    """``host`` as an address, or resolved within ``RESOLVE_TIMEOUT_S``."""
    try:
        return [ipaddress.ip_address(host.strip("[]"))]
    except ValueError:
        pass
    future = _RESOLVERS.submit(resolver, host, port)
    try:
        names = future.result(timeout=RESOLVE_TIMEOUT_S)
    except concurrent.futures.TimeoutError:
        raise TargetRefusedError(
            f"host {host} did not resolve within {RESOLVE_TIMEOUT_S:g} s"
        ) from None
    except (OSError, UnicodeError):
        raise TargetRefusedError(f"host {host} does not resolve") from None
    found = []
    for name in names:
        try:
            found.append(ipaddress.ip_address(name.split("%")[0]))
        except ValueError:
            continue
    if not found:
        raise TargetRefusedError(f"host {host} does not resolve")
    return found


def resolve(url: str, allowed: AllowList, resolver: Resolver = system_resolver) -> Target:
    """The checked target of ``url``: ``TargetRefusedError`` for a URL that is not https (http only
    for an allowed host), or a host that resolves to any address that is neither public nor
    allowed. Called at creation and again before every call."""
    scheme, host, port, path = parse_url(url)
    by_name = allowed.admits_name(host)
    addresses = _addresses(host, port, resolver)
    for address in addresses:
        if not (by_name or public(address) or allowed.admits(address)):
            raise TargetRefusedError(
                f"host {host} is at {address}, not a public address (private, loopback, "
                "link-local and metadata addresses are refused; ALERTS_ALLOWED_HOSTS admits them)"
            )
    if scheme == "http" and not (by_name or all(allowed.admits(a) for a in addresses)):
        raise TargetRefusedError("must be an https URL (http only for ALERTS_ALLOWED_HOSTS)")
    return Target(scheme, host, port, path, tuple(str(a) for a in addresses))


def check_url(url: str, allowed: AllowList, resolver: Resolver = system_resolver) -> Target:
    """``resolve`` for the API: a 400 ``invalid_url`` saying why."""
    try:
        return resolve(url, allowed, resolver)
    except TargetRefusedError as refused:
        raise ApiError(400, "invalid_url", f"url {refused}.") from None
