"""``app.forwarded``: forwarded headers believed only from trusted proxies, and never as strings.

The middleware runs in front of a WSGI app that answers with the environ it was given, so
what the app would see is read directly; the app's own use of it (limits, ``/metrics``) is
tested in ``tests/unit/limits`` and ``tests/unit/metrics``, and through gunicorn in
``tests/integration/test_forwarded_gunicorn.py``.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterable
from typing import TYPE_CHECKING

import pytest
from werkzeug.test import Client

from app.forwarded import (
    PEER_KEY,
    ForwardedHeaders,
    TrustedProxies,
    forwarded_by_proxy,
    parse_address,
    socket_peer,
)

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment

LOOPBACK = ("127.0.0.1/32", "::1/128")
PRIVATE = ("127.0.0.1/32", "10.0.0.0/24")


def echo(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
    """A WSGI app answering with what it was told about the caller."""
    start_response("200 OK", [("Content-Type", "application/json")])
    seen = {
        "client": environ["REMOTE_ADDR"],
        "peer": environ.get(PEER_KEY),
        "scheme": environ["wsgi.url_scheme"],
        "forwarded": forwarded_by_proxy(environ),
    }
    return [json.dumps(seen).encode()]


def seen(networks: tuple[str, ...], peer: str, hops: int = 1, **headers: str) -> dict[str, object]:
    """What the app sees of a request from ``peer`` with ``headers`` (``X_Forwarded_For``)."""
    client = Client(ForwardedHeaders(echo, TrustedProxies.of(networks, hops)))
    sent = {name.replace("_", "-"): value for name, value in headers.items()}
    response = client.get("/", headers=sent, environ_base={"REMOTE_ADDR": peer})
    answer: dict[str, object] = json.loads(response.get_data())
    return answer


def client_of(networks: tuple[str, ...], peer: str, forwarded_for: str, hops: int = 1) -> str:
    """The client address a request from ``peer`` with ``forwarded_for`` is given."""
    return str(seen(networks, peer, hops, X_Forwarded_For=forwarded_for)["client"])


# -- parse_address ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("198.51.100.7", "198.51.100.7"),
        (" 198.51.100.7\t", "198.51.100.7"),
        ("2001:DB8:0:0::1", "2001:db8::1"),
        ("::ffff:198.51.100.7", "198.51.100.7"),  # IPv4-mapped: the IPv4 address
        ("::1", "::1"),
    ],
)
def test_an_address_is_normalised(text: str, expected: str) -> None:
    assert str(parse_address(text)) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "unknown",
        "198.51.100.7:5678",
        "[2001:db8::1]:8443",
        "[2001:db8::1]",
        "fe80::1%eth0",
        "010.1.2.3",
        "1.2.3.4\x00",
        "1.2.3",
        "9" * 6000,
        "a/b}{c",
        "_hidden",
    ],
)
def test_anything_but_an_address_is_none(text: str) -> None:
    assert parse_address(text) is None


# -- who is trusted ---------------------------------------------------------------------------


def test_an_untrusted_peer_is_its_own_address_whatever_it_sends() -> None:
    answer = seen(PRIVATE, "192.0.2.50", X_Forwarded_For="203.0.113.9", X_Forwarded_Proto="https")

    assert answer == {
        "client": "192.0.2.50",
        "peer": "192.0.2.50",
        "scheme": "http",
        "forwarded": False,
    }


def test_with_no_trusted_proxies_loopback_is_its_own_address_too() -> None:
    assert client_of((), "127.0.0.1", "203.0.113.9") == "127.0.0.1"


def test_a_trusted_peer_forwards_its_client_and_scheme() -> None:
    answer = seen(PRIVATE, "10.0.0.11", X_Forwarded_For="203.0.113.9", X_Forwarded_Proto="https")

    assert answer == {
        "client": "203.0.113.9",
        "peer": "10.0.0.11",
        "scheme": "https",
        "forwarded": True,
    }


@pytest.mark.parametrize("proto", ["gopher", "https, ", "", "javascript:alert(1)"])
def test_only_http_or_https_is_taken_as_the_scheme(proto: str) -> None:
    assert seen(PRIVATE, "10.0.0.11", X_Forwarded_Proto=proto)["scheme"] == "http"


def test_the_socket_peer_is_normalised_and_kept() -> None:
    # A dual-stack listener reports IPv4 peers as IPv4-mapped IPv6.
    answer = seen(LOOPBACK, "::ffff:127.0.0.1", X_Forwarded_For="203.0.113.9")

    assert answer["peer"] == "127.0.0.1"
    assert answer["client"] == "203.0.113.9"


def test_a_peer_that_is_no_address_is_trusted_for_nothing() -> None:
    """A Unix socket's peer has no address: it is left as given and never trusted."""
    answer = seen(PRIVATE, "", X_Forwarded_For="203.0.113.9")

    assert answer["client"] == "" and answer["peer"] == ""


# -- walking X-Forwarded-For from the right ---------------------------------------------------


def test_one_hop_takes_the_right_most_entry_whatever_is_left_of_it() -> None:
    assert client_of(PRIVATE, "127.0.0.1", "6.6.6.6, 198.51.100.3") == "198.51.100.3"
    # A trusted proxy's address in the right-most entry: one hop, so it is the client.
    assert client_of(PRIVATE, "127.0.0.1", "6.6.6.6, 10.0.0.9") == "10.0.0.9"


def test_the_walk_goes_past_trusted_proxies_up_to_the_hop_count() -> None:
    chain = "6.6.6.6, 198.51.100.7, 10.0.0.12"  # client, then an nginx of the private network
    assert client_of(PRIVATE, "127.0.0.1", chain, hops=2) == "198.51.100.7"
    assert client_of(PRIVATE, "127.0.0.1", chain, hops=3) == "198.51.100.7"
    # More trusted hops than the count allows: the walk ends at the count.
    assert client_of(PRIVATE, "127.0.0.1", "198.51.100.7, 10.0.0.2, 10.0.0.3", hops=2) == (
        "10.0.0.2"
    )


def test_the_walk_stops_at_the_first_entry_that_is_not_a_trusted_proxy() -> None:
    # 198.51.100.7 is no proxy of ours: what it claims (6.6.6.6) is not believed.
    assert client_of(PRIVATE, "127.0.0.1", "6.6.6.6, 198.51.100.7", hops=5) == "198.51.100.7"


@pytest.mark.parametrize(
    ("chain", "hops", "expected"),
    [
        ("garbage", 1, "127.0.0.1"),  # junk right-most: the proxy itself
        ("", 1, "127.0.0.1"),
        ("   ", 1, "127.0.0.1"),
        ("1.2.3.4, , ", 1, "127.0.0.1"),
        ("," * 500, 3, "127.0.0.1"),
        ("198.51.100.1:5678", 1, "127.0.0.1"),
        ("[2001:db8::1]:8443", 1, "127.0.0.1"),
        ("unknown", 1, "127.0.0.1"),
        ("9" * 6000, 1, "127.0.0.1"),
        ("a/b}{c, 10.0.0.4", 2, "10.0.0.4"),  # junk past a trusted hop: the last good hop
        ("198.51.100.1, garbage, 10.0.0.4", 3, "10.0.0.4"),
        ("garbage, 198.51.100.1", 2, "198.51.100.1"),  # not trusted: the walk stops first
        ("\t198.51.100.1 ", 1, "198.51.100.1"),
        ("2001:DB8::1", 1, "2001:db8::1"),
        ("::ffff:198.51.100.1", 1, "198.51.100.1"),
        (", ".join(f"10.0.{i // 256}.{i % 256}" for i in range(400)), 10, "10.0.1.143"),
    ],
)
def test_an_entry_that_is_not_an_address_is_never_used(
    chain: str, hops: int, expected: str
) -> None:
    assert client_of(PRIVATE, "127.0.0.1", chain, hops=hops) == expected


def test_every_client_address_prints_as_an_address() -> None:
    odd = ["garbage", "x" * 300, "}{", "1.2.3.4.5", "%00", "::1%lo", "1.2.3.4:80"]
    for entry in odd:
        for hops in (1, 2, 10):
            client = client_of(PRIVATE, "127.0.0.1", f"10.0.0.1, {entry}, 10.0.0.2", hops=hops)
            assert str(ipaddress.ip_address(client)) == client


# -- the helpers /metrics uses ----------------------------------------------------------------


def test_socket_peer_and_forwarded_by_proxy_read_the_kept_peer() -> None:
    environ: WSGIEnvironment = {PEER_KEY: "127.0.0.1", "REMOTE_ADDR": "203.0.113.9"}
    assert str(socket_peer(environ)) == "127.0.0.1"
    assert forwarded_by_proxy(environ) is True
    alone: WSGIEnvironment = {"REMOTE_ADDR": "::ffff:127.0.0.1"}  # no middleware
    assert str(socket_peer(alone)) == "127.0.0.1"
    assert forwarded_by_proxy(alone) is False
    assert socket_peer({"REMOTE_ADDR": "garbage"}) is None
