"""Fixtures of the fault suite: real accounts databases, a pausable proxy, own Redis servers.

Accounts are made with the documented CLI as their own processes (``flask --app wsgi db
upgrade``, ``users create``, ``keys create``). PostgreSQL is a scratch database of the
module's own on the local server, dropped at the end; the proxy (``harness/proxy.py``)
sits between gunicorn and it. Every process a fixture starts is stopped by pid, even when
the test fails.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis

from harness.processes import RedisServer, Service, service_env, wait_until
from harness.proxy import TcpProxy
from tests.conftest import TEST_PEPPER
from tests.support.accounts import scratch_accounts
from tests.support.contract import validated

USER = "alice"
LEASES = "probboard:streams:"  # app/stream/slots.py: one sorted set of leases per key


@dataclass(frozen=True)
class Accounts:
    """A migrated accounts database with one vip_pro user and one key of theirs."""

    database_url: str  # the database itself (the CLI's), not through any proxy
    key: str
    key_id: int


@pytest.fixture(scope="module")
def pg_accounts() -> Iterator[Accounts]:
    """A scratch PostgreSQL database of this module's own, migrated, with alice's key."""
    with scratch_accounts() as cli:
        cli.create_user(USER, "vip_pro")
        key = cli.issue_key(USER)
        yield Accounts(database_url=cli.database_url, key=key, key_id=cli.key_id(key))


def through(database_url: str, proxy: TcpProxy) -> str:
    """``database_url`` with its host and port replaced by the proxy's."""
    parts = urlsplit(database_url)
    credentials = parts.netloc.rpartition("@")[0]
    netloc = (
        f"{credentials}@{proxy.host}:{proxy.port}" if credentials else f"{proxy.host}:{proxy.port}"
    )
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


@pytest.fixture
def pg_proxy(pg_accounts: Accounts) -> Iterator[TcpProxy]:
    """A pausable proxy in front of the PostgreSQL server of ``pg_accounts``."""
    parts = urlsplit(pg_accounts.database_url)
    # Own proxy: each test pauses or refuses it (the database's fault).
    proxy = TcpProxy(parts.port or 5432, parts.hostname or "127.0.0.1")
    try:
        yield proxy
    finally:
        proxy.stop()


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A redis-server of this test's own (it may be stopped, killed or restarted)."""
    # Own redis-server: the test stops, hangs (SIGSTOP) or kills it.
    server = RedisServer(tmp_path)
    server.start()
    try:
        yield server
    finally:
        if server.process is not None:
            # A SIGSTOPped server would sit out SIGTERM until the SIGKILL: let it run first.
            with contextlib.suppress(ProcessLookupError):
                os.kill(server.process.pid, signal.SIGCONT)
        server.stop()


ServiceFactory = Callable[..., Service]


@pytest.fixture
def make_service(tmp_path: Path) -> Iterator[ServiceFactory]:
    """Build ``Service`` handles with extra settings (not started); all stopped at the end."""
    made: list[Service] = []

    def build(**settings: str) -> Service:
        """A Service with ``settings`` on top of the suite's environment."""
        workdir = tmp_path / f"service-{len(made)}"
        workdir.mkdir()
        # Own gunicorn per test: each is started with its test's settings and faults.
        service = Service(workdir, service_env(API_KEY_PEPPER=TEST_PEPPER, **settings))
        made.append(service)
        return service

    try:
        yield build
    finally:
        for service in made:
            service.stop()


def leases(redis_url: str, key_id: int) -> dict[str, float]:
    """The stream leases of ``key_id`` in Redis: connection id -> lease end (unix seconds)."""
    client = redis.Redis.from_url(redis_url, socket_timeout=5)
    try:
        found = cast(
            "list[tuple[bytes, float]]",
            client.zrange(f"{LEASES}{key_id}", 0, -1, withscores=True),
        )
    finally:
        client.close()
    return {member.decode(): float(score) for member, score in found}


def start_service(
    make_service: ServiceFactory,
    redis_server: RedisServer,
    database_url: str,
    refresher: bool = False,
    **settings: str,
) -> Service:
    """gunicorn (2 gevent workers) on ``redis_server``; with the refresher, a first board."""
    service = make_service(REDIS_URL=redis_server.url, DATABASE_URL=database_url, **settings)
    service.start_web(workers=2)
    if refresher:
        service.start_refresher()
        assert wait_until(lambda: guest_board(service)["updatedAt"] is not None, timeout=30), (
            service.refresher.output() if service.refresher else ""
        )
    return service


def guest_board(service: Service) -> dict[str, Any]:
    """The guest board (must be a 200 BoardResponse)."""
    status, _, body = service.get("/api/probboard/latest")
    assert status == 200, body
    return validated("board", body)
