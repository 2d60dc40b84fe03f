"""Failed key attempts across workers: two apps on one Redis stand for two gunicorn workers.

Only failures are counted in Redis; each worker keeps its own table of blocked addresses.
A worker that has not yet seen a failure from a blocked address learns of the block at the
first one, and from then on refuses that address's good keys too.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from flask import Flask
from flask.testing import FlaskClient

from app.extensions import db
from app.web import create_app
from harness.processes import RedisServer
from tests.conftest import BASE_CONFIG, COUNTED_ON_REDIS
from tests.support.contract import validated

VERIFY = "/api/keys/verify"
UNKNOWN_KEY = "pbk_" + "A" * 43


@pytest.fixture
def workers(fresh_redis: RedisServer, database_url: str) -> Iterator[list[Flask]]:
    config = {
        **BASE_CONFIG,
        "DATABASE_URL": database_url,
        "REDIS_URL": fresh_redis.url,
        **COUNTED_ON_REDIS,
        "AUTH_FAILURE_LIMIT": "4 per minute",
    }
    apps = [create_app(config), create_app(config)]
    yield apps
    for app in apps:
        with app.app_context():
            db.session.remove()
            db.engine.dispose()


def key_of(app: Flask) -> str:
    runner = app.test_cli_runner()
    created = runner.invoke(args=["users", "create", "alice", "--plan", "vip_pro"])
    assert created.exit_code == 0, created.output
    made = runner.invoke(args=["keys", "create", "alice"])
    assert made.exit_code == 0, made.output
    return str(made.stdout).splitlines()[-1]


def status(client: FlaskClient, key: str, address: str = "198.51.100.9") -> tuple[int, str]:
    response = client.get(VERIFY, headers={"X-API-Key": key}, environ_base={"REMOTE_ADDR": address})
    if response.status_code == 200:
        body = response.get_json()
        assert body["ok"] is True and body["plan"] == "vip_pro", body
        return 200, "ok"
    return response.status_code, str(validated("error", response.get_data())["code"])


def test_a_block_reaches_the_other_worker_at_its_first_failure(workers: list[Flask]) -> None:
    first, second = (app.test_client() for app in workers)
    key = key_of(workers[0])

    # Four failures on the first worker fill the address's window there.
    assert [status(first, UNKNOWN_KEY) for _ in range(4)] == [(401, "invalid_key")] * 4
    assert status(first, key) == (429, "rate_limited")  # blocked: even the good key
    # The second worker has seen no failure yet: a good key is served there...
    assert status(second, key) == (200, "ok")
    # ...until its first failure from that address, which the shared count refuses.
    assert status(second, UNKNOWN_KEY) == (429, "rate_limited")
    assert status(second, key) == (429, "rate_limited")
    # Other addresses are not affected, on either worker.
    assert status(first, key, address="198.51.100.10") == (200, "ok")
    assert status(second, key, address="198.51.100.10") == (200, "ok")


def test_failed_keys_from_one_ipv6_64_are_counted_together(workers: list[Flask]) -> None:
    """Issue 46: an IPv6 client rotating through its /64 meets the throttle as one address."""
    first, second = (app.test_client() for app in workers)
    key = key_of(workers[0])
    rotating = (f"2001:db8:5:6:{i:x}::1" for i in range(1, 100))

    assert [status(first, UNKNOWN_KEY, next(rotating)) for _ in range(4)] == [
        (401, "invalid_key")
    ] * 4
    # A new address of the same /64, on either worker, is refused, good key or bad.
    assert status(first, key, next(rotating)) == (429, "rate_limited")
    assert status(second, UNKNOWN_KEY, next(rotating)) == (429, "rate_limited")
    # The next /64 is another client.
    assert status(first, key, "2001:db8:5:7::1") == (200, "ok")


@pytest.fixture
def strict_worker(fresh_redis: RedisServer, database_url: str) -> Iterator[Flask]:
    """One worker on Redis whose first failed key from an address fills a day's window."""
    app = create_app(
        {
            **BASE_CONFIG,
            "DATABASE_URL": database_url,
            "REDIS_URL": fresh_redis.url,
            **COUNTED_ON_REDIS,
            **COUNTED_ON_REDIS,
            "AUTH_FAILURE_LIMIT": "1/day",
        }
    )
    yield app
    with app.app_context():
        db.session.remove()
        db.engine.dispose()


def test_a_window_filled_by_its_first_hit_blocks_for_the_window(strict_worker: Flask) -> None:
    """The hit that creates a window and fills it blocks the address until the window ends.

    On Redis that window's counter is new, with two windows to live; the limits library's
    reset time (its time to live modulo the window) is then *now*, which once ended the
    block at once: a limit of one failure a day blocked nobody.
    """
    key = key_of(strict_worker)
    client = strict_worker.test_client(use_cookies=False)
    assert status(client, UNKNOWN_KEY) == (401, "invalid_key")  # fills the window
    response = client.get(
        VERIFY, headers={"X-API-Key": key}, environ_base={"REMOTE_ADDR": "198.51.100.9"}
    )
    assert response.status_code == 429, response.get_data(as_text=True)
    body = validated("error", response.get_data())
    assert 86_000_000 < body["retryAfterMs"] <= 86_400_000  # about a day, not none
    assert status(client, key, "198.51.100.10") == (200, "ok")  # another address is free
