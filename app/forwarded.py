"""Who the client is: the socket peer, or the address a trusted proxy forwarded the request for.

A request's ``X-Forwarded-For`` and ``X-Forwarded-Proto`` are read only when the socket peer
is in ``TRUSTED_PROXIES`` (networks, ``app.config``); every other peer is its own address,
whatever it sends. From a trusted peer, ``X-Forwarded-For`` is walked from the right, at most
``TRUSTED_PROXY_HOPS`` entries, and the walk stops at the first entry that is not itself a
trusted proxy: that entry is the client. An entry that is not an IP address ends the walk
too, and the last good hop is the client, so no string a caller writes ever becomes an
address (a Redis key, a log field). Addresses are normalised (``ipaddress``; IPv4-mapped
IPv6 as IPv4).

``ForwardedHeaders`` (WSGI middleware, installed by the app factory) puts the client's
address in ``REMOTE_ADDR`` and keeps the socket peer in the environ under ``PEER_KEY``:
``/metrics`` judges the peer (``app.api.metrics``), never a header.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

# The socket peer's address, normalised (or as the server gave it when it is not an IP).
PEER_KEY = "probboard.peer"
SCHEMES = ("http", "https")


def parse_address(text: str) -> Address | None:
    """``text`` as an IP address, IPv4-mapped IPv6 as IPv4; None when it is not one.

    Spaces around it are allowed; ports, brackets, zone ids (``%eth0``) and anything else
    are not, so what is returned prints as nothing but an address.
    """
    try:
        address = ipaddress.ip_address(text.strip(" \t"))
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address):
        if address.scope_id is not None:
            return None
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
    return address


def _rightmost(header: str, count: int) -> Iterator[str]:
    """The last ``count`` comma-separated entries of ``header``, right-most first."""
    entries = header.rsplit(",", count)
    if len(entries) > count:
        entries = entries[1:]  # the rest of the chain, never read
    return reversed(entries)


@dataclass(frozen=True)
class TrustedProxies:
    """The proxies whose forwarded headers are believed, and how many hops to walk."""

    networks: tuple[Network, ...]
    hops: int

    @classmethod
    def of(cls, networks: Iterable[str], hops: int) -> TrustedProxies:
        """From the networks as ``app.config`` validated them (``10.0.0.0/24``)."""
        return cls(tuple(ipaddress.ip_network(net, strict=False) for net in networks), hops)

    def trusts(self, address: Address) -> bool:
        """True when ``address`` is one of the proxies."""
        return any(address in network for network in self.networks)

    def walk(self, proxy: Address, forwarded_for: str) -> Address:
        """The client that ``proxy``, already known to be trusted, forwarded for."""
        client = proxy
        for entry in _rightmost(forwarded_for, self.hops):
            address = parse_address(entry)
            if address is None:
                break
            client = address
            if not self.trusts(address):
                break
        return client


def said_scheme(forwarded_proto: str) -> str | None:
    """The right-most value of ``X-Forwarded-Proto`` when it is ``http`` or ``https``."""
    said = forwarded_proto.rsplit(",", 1)[-1].strip().lower()
    return said if said in SCHEMES else None


class ForwardedHeaders:
    """WSGI middleware: ``REMOTE_ADDR`` becomes the client, the peer is kept under ``PEER_KEY``."""

    def __init__(self, app: WSGIApplication, proxies: TrustedProxies) -> None:
        self.app = app
        self.proxies = proxies
        # A socket peer is no string a caller writes, and the same few recur (nginx): what
        # it is and whether it is trusted are worked out once per peer, not per request.
        self._peer = lru_cache(maxsize=4096)(self._judge)

    def _judge(self, given: str) -> tuple[Address | None, str, bool]:
        """The peer as an address (None: not one), as the environ keeps it, and trusted."""
        peer = parse_address(given)
        if peer is None:  # a Unix socket, say: no address, so trusted for nothing
            return None, given, False
        return peer, str(peer), self.proxies.trusts(peer)

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        """Settle the request's client address (and scheme), then call the app."""
        peer, shown, trusted = self._peer(str(environ.get("REMOTE_ADDR") or ""))
        environ[PEER_KEY] = shown
        environ["REMOTE_ADDR"] = shown
        if peer is not None and trusted:
            forwarded_for = environ.get("HTTP_X_FORWARDED_FOR")
            if forwarded_for:
                environ["REMOTE_ADDR"] = str(self.proxies.walk(peer, forwarded_for))
            scheme = said_scheme(environ.get("HTTP_X_FORWARDED_PROTO") or "")
            if scheme is not None:
                environ["wsgi.url_scheme"] = scheme
        return self.app(environ, start_response)


def socket_peer(environ: WSGIEnvironment) -> Address | None:
    """The address of the connection's other end, whatever the forwarded headers say."""
    return parse_address(str(environ.get(PEER_KEY, environ.get("REMOTE_ADDR")) or ""))


def forwarded_by_proxy(environ: WSGIEnvironment) -> bool:
    """True when a trusted proxy forwarded the request for a client other than itself."""
    peer = socket_peer(environ)
    return peer is not None and parse_address(str(environ.get("REMOTE_ADDR") or "")) != peer
