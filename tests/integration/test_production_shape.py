"""The production shape for real: gunicorn gevent workers and a refresher process on Redis,
with the accounts store on PostgreSQL (the session's migrated database), as in production."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest

from harness.processes import RedisServer, Service, wait_until
from tests.support.contract import validated


@pytest.fixture
def service(service: Service, postgres_database: str) -> Iterator[Service]:
    """The conftest ``service`` handle, its processes pointed at the PostgreSQL database."""
    service.env["DATABASE_URL"] = postgres_database
    yield service


def _board(service: Service) -> dict[str, object]:
    status, headers, body = service.get("/api/probboard/latest")
    assert status == 200
    assert headers["Cache-Control"] == "no-store"
    return validated("board", body)


def _has_rows(service: Service) -> bool:
    return bool(_board(service)["items"])


def test_gunicorn_and_refresher_serve_a_live_board(
    fresh_redis: RedisServer, service: Service
) -> None:
    """gunicorn's two workers and a refresher process serve a live, moving board through Redis."""
    service.env["REDIS_URL"] = fresh_redis.url
    # Own gunicorn: the test reads its empty board before any refresher runs.
    service.start_web(workers=2)
    status, _, body = service.get("/api/health")
    health = validated("health", body)
    assert status == 200
    assert health["redisReady"] is True, health
    assert health["refreshMs"] == {"guest": 5000, "user": 2000, "vip_pro": 500}

    empty = _board(service)
    assert empty["items"] == [] and empty["latencyLevel"] == "danger"

    service.start_refresher()
    assert wait_until(lambda: _has_rows(service), timeout=20)
    first = _board(service)
    assert first["plan"] == "guest" and first["latencyLevel"] == "ok"
    item = first["items"][0]  # type: ignore[index]
    assert item["symbol"] == "BTC"
    # The board moves: a later response carries newer data.
    assert wait_until(lambda: _board(service)["updatedAt"] != first["updatedAt"], timeout=5)
    # Both workers hold the board: many requests, none empty (connections are spread).
    assert all(_board(service)["items"] for _ in range(20))


def test_stopping_the_refresher_turns_the_board_stale_then_danger(
    fresh_redis: RedisServer, service: Service
) -> None:
    """When the refresher stops, the served board turns warn and then danger, its rows kept."""
    service.env.update(
        REDIS_URL=fresh_redis.url, STALE_THRESHOLD_MS="1000", SEVERE_STALE_THRESHOLD_MS="2500"
    )
    # Own gunicorn and refresher: the test stops the refresher.
    service.start_web(workers=1)
    service.start_refresher()
    assert wait_until(lambda: _board(service)["latencyLevel"] == "ok", timeout=20)
    assert service.refresher is not None
    service.refresher.signal(signal.SIGTERM)
    assert service.refresher.popen.wait(10) == 0
    assert wait_until(lambda: _board(service)["latencyLevel"] == "warn", timeout=10)
    warn = _board(service)
    assert warn["isStale"] is True and warn["items"]
    assert wait_until(lambda: _board(service)["latencyLevel"] == "danger", timeout=10)
    danger = _board(service)
    assert danger["items"] and danger["items"][0]["latencyLevel"] == "danger"  # type: ignore[index]


def test_worker_recovers_after_a_redis_restart(
    restartable_redis: RedisServer, service: Service
) -> None:
    """A worker keeps serving through a Redis restart and fresh boards flow again after it."""
    service.env["REDIS_URL"] = restartable_redis.url
    # Own gunicorn and refresher: they live through this test's Redis restart.
    service.start_web(workers=1)
    service.start_refresher()
    assert wait_until(lambda: _has_rows(service), timeout=20)

    restartable_redis.stop()
    # Still served (from the worker's memory), and health says Redis is away.
    assert _has_rows(service)
    assert wait_until(
        lambda: validated("health", service.get("/api/health")[2])["redisReady"] is False
    )
    restartable_redis.start()
    assert wait_until(
        lambda: validated("health", service.get("/api/health")[2])["redisReady"] is True,
        timeout=15,
    )
    # Fresh boards flow again through the same worker and refresher processes.
    assert wait_until(lambda: _board(service)["latencyLevel"] == "ok", timeout=15)
    assert service.web is not None and service.web.alive()
    assert service.refresher is not None and service.refresher.alive()


def test_refresher_refuses_the_memory_bus(service: Service) -> None:
    """The refresher process exits 2 on the memory bus, naming REDIS_URL."""
    service.env["REDIS_URL"] = "memory://"
    # Own refresher: on the memory bus it must exit (2) at once.
    service.start_refresher()
    assert service.refresher is not None
    assert service.refresher.popen.wait(15) == 2
    assert "REDIS_URL" in service.refresher.output()


def test_gunicorn_on_the_memory_bus_runs_its_own_refresher(service: Service) -> None:
    """gunicorn on the memory bus runs its embedded refresher and serves rows."""
    service.env["REDIS_URL"] = "memory://"
    # Own gunicorn: on the memory bus, with its embedded refresher.
    service.start_web(workers=2)
    assert wait_until(lambda: _has_rows(service), timeout=10)
    health = validated("health", service.get("/api/health")[2])
    assert health["redisReady"] is True and "embedded" in str(health["redisStatus"])
