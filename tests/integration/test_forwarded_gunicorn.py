"""Issue 46, for real: no caller picks its own address, and ``/metrics`` judges the socket peer.

gunicorn with two gevent workers on a redis-server and a PostgreSQL accounts database of
this module's own, as in production. The test client is on 127.0.0.1, so the socket peer
is real: one service is started with ``TRUSTED_PROXIES`` excluding loopback (the several-host
layout seen from a host that is not a proxy: Prometheus, or anyone on the private network),
the other with loopback as its one trusted proxy (nginx on the same VM). Both are started
once for the module: every test counts under addresses of its own.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from harness.accounts import TEST_PEPPER
from harness.processes import RedisServer, Service, service_env
from tests.support.accounts import scratch_accounts
from tests.support.contract import validated

LATEST = "/api/probboard/latest"
VERIFY = "/api/keys/verify"
METRICS = "/metrics"
UNKNOWN_KEY = "pbk_" + "A" * 43
LIMITS = {"GUEST_RATE_LIMIT": "10 per minute", "AUTH_FAILURE_LIMIT": "5 per minute"}


@dataclass(frozen=True)
class Backing:
    """The module's redis-server and migrated accounts database."""

    redis: RedisServer
    database_url: str
    workdir: Path


@pytest.fixture(scope="module")
def backing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backing]:
    workdir = tmp_path_factory.mktemp("forwarded")
    server = RedisServer(workdir)
    server.start()
    try:
        with scratch_accounts() as accounts:
            yield Backing(server, accounts.database_url, workdir)
    finally:
        server.stop()


def started(backing: Backing, name: str, database: int, **settings: str) -> Service:
    """gunicorn (two workers) with ``settings``, counting in Redis database ``database``."""
    folder = backing.workdir / name
    folder.mkdir()
    env = service_env(
        REDIS_URL=re.sub(r"/0$", f"/{database}", backing.redis.url),
        DATABASE_URL=backing.database_url,
        API_KEY_PEPPER=TEST_PEPPER,
        TRACK_RECORD="false",
        **LIMITS,
        **settings,
    )
    service = Service(folder, env)
    service.start_web(workers=2)
    return service


@pytest.fixture(scope="module")
def untrusted(backing: Backing) -> Iterator[Service]:
    """Loopback, where the test client is, is not a trusted proxy here."""
    service = started(backing, "untrusted", 0, TRUSTED_PROXIES="10.0.0.0/24")
    try:
        yield service
    finally:
        service.stop()


@pytest.fixture(scope="module")
def behind_nginx(backing: Backing) -> Iterator[Service]:
    """Loopback is the one trusted proxy (nginx on the VM); metrics only for 192.0.2.0/24."""
    service = started(
        backing,
        "behind-nginx",
        1,
        TRUSTED_PROXIES="127.0.0.1/32",
        METRICS_ALLOW="192.0.2.0/24",
    )
    try:
        yield service
    finally:
        service.stop()


def status_of(service: Service, path: str, headers: dict[str, str]) -> int:
    """The status of one GET; never a 5xx; error bodies are ErrorResponses."""
    status, _, body = service.get(path, headers)
    assert status < 500, (status, body)
    if status >= 400:
        validated("error", body)
    return status


def address_keys(service: Service) -> list[str]:
    """The addresses the guest limit counts under, in this service's Redis database."""
    client = redis.Redis.from_url(service.env["REDIS_URL"])
    keys = [k.decode() if isinstance(k, bytes) else k for k in client.keys("*LIMITER*address:*")]
    return sorted({re.sub(r"^.*/address:(.*)/latest\.latest/.*$", r"\1", k) for k in keys})


# -- an untrusted peer is its own address -----------------------------------------------------


def test_a_new_forwarded_for_per_guest_read_from_an_untrusted_peer_changes_nothing(
    untrusted: Service,
) -> None:
    """12 guest reads, each with a new X-Forwarded-For: 429 after the limit of 10."""
    statuses = [
        status_of(untrusted, LATEST, {"X-Forwarded-For": f"203.0.113.{i}"}) for i in range(12)
    ]

    assert statuses == [200] * 10 + [429] * 2, statuses
    assert address_keys(untrusted) == ["127.0.0.1"]  # no header ever became a key


def test_bad_keys_with_a_new_forwarded_for_each_meet_the_failed_key_throttle(
    untrusted: Service,
) -> None:
    """7 bad keys, each with a new X-Forwarded-For: 429 after the limit of 5."""
    statuses = [
        status_of(
            untrusted, VERIFY, {"X-API-Key": UNKNOWN_KEY, "X-Forwarded-For": f"198.51.100.{i}"}
        )
        for i in range(7)
    ]

    assert statuses == [401] * 5 + [429] * 2, statuses


def test_metrics_from_loopback_is_judged_on_the_peer_not_the_header(untrusted: Service) -> None:
    """/metrics from loopback with X-Forwarded-For: 8.8.8.8 is served: the peer is loopback."""
    status, headers, body = untrusted.get(METRICS, {"X-Forwarded-For": "8.8.8.8"})

    assert status == 200, body
    assert headers["Content-Type"].startswith("text/plain; version=")


# -- behind a trusted proxy -------------------------------------------------------------------


def test_a_trusted_proxy_cannot_unlock_the_metrics_with_the_header(behind_nginx: Service) -> None:
    """The proxy on loopback forwards "a client in METRICS_ALLOW": the peer is judged, 403."""
    for forwarded in ("192.0.2.5", "8.8.8.8, 192.0.2.5", "192.0.2.5, 127.0.0.1"):
        status, _, body = behind_nginx.get(METRICS, {"X-Forwarded-For": forwarded})
        assert status == 403, (forwarded, status, body)
        assert validated("error", body)["code"] == "metrics_forbidden"


def test_ipv6_clients_behind_the_proxy_are_limited_per_64(behind_nginx: Service) -> None:
    """Guests and bad keys from new addresses of one /64 each time meet the limits."""
    reads = [
        status_of(behind_nginx, LATEST, {"X-Forwarded-For": f"2001:db8:46:1::{i + 1:x}"})
        for i in range(12)
    ]
    assert reads == [200] * 10 + [429] * 2, reads
    # The next /64 is another client, and what is counted is the /64, not an address.
    assert status_of(behind_nginx, LATEST, {"X-Forwarded-For": "2001:db8:46:2::1"}) == 200
    assert address_keys(behind_nginx) == ["2001:db8:46:1::/64", "2001:db8:46:2::/64"]

    keys = [
        status_of(
            behind_nginx,
            VERIFY,
            {"X-API-Key": UNKNOWN_KEY, "X-Forwarded-For": f"2001:db8:46:3:{i + 1:x}::9"},
        )
        for i in range(7)
    ]
    assert keys == [401] * 5 + [429] * 2, keys
