"""``/api/keys/verify`` limited per account for valid keys (``VERIFY_RATE_LIMIT``, issue 46).

Two apps on one real Redis stand for two gunicorn workers: the count is the account's, across
workers, addresses and the account's keys, and it is the key check's own (``/latest`` is
counted apart). A bad key never reaches this limit: it is the failed-key throttle's.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis
from flask import Flask

from app.config import ConfigError, load_settings
from app.schemas import check
from app.schemas.keys import KeyVerificationResponseSchema
from app.services import services_of
from app.web import create_app
from harness.processes import RedisServer
from tests.conftest import BASE_CONFIG, COUNTED_ON_REDIS
from tests.support.contract import validated
from tests.unit.api.test_key_steps import VERIFY, _close, ask
from tests.unit.test_cors import key_of

LIMIT = 3


@pytest.fixture
def workers(fresh_redis: RedisServer, database_url: str) -> Iterator[list[Flask]]:
    """Two apps on one Redis, valid keys verified 3 times a day per account."""
    config = {
        **BASE_CONFIG,
        "DATABASE_URL": database_url,
        "REDIS_URL": fresh_redis.url,
        **COUNTED_ON_REDIS,
        "VERIFY_RATE_LIMIT": f"{LIMIT}/day",
    }
    apps = [create_app(config), create_app(config)]
    yield apps
    for app in apps:
        _close(app)


def test_valid_keys_are_limited_per_account_across_workers_keys_and_addresses(
    workers: list[Flask],
) -> None:
    first, second = (app.test_client() for app in workers)
    alice = key_of(workers[0], "alice", "vip_pro")
    result = workers[0].test_cli_runner().invoke(args=["keys", "create", "alice"])
    alices_other = result.stdout.splitlines()[-1]
    bob = key_of(workers[0], "bob", "user")

    for i in range(LIMIT):
        client = (first, second)[i % 2]
        answer = ask(client, VERIFY, alice, f"203.0.113.{i + 1}")
        assert answer.status_code == 200, answer.data
        body = answer.get_json()
        check(KeyVerificationResponseSchema(), body, "key verification")
        assert body["userId"] == "alice"
        assert answer.headers["X-RateLimit-Remaining"] == str(LIMIT - 1 - i)

    refused = ask(first, VERIFY, alices_other, "203.0.113.50")  # her other key, a new address
    assert refused.status_code == 429
    body = validated("error", refused.data)
    assert body["code"] == "rate_limited" and body["retryAfterMs"] >= 1
    assert int(refused.headers["Retry-After"]) >= 1
    # The 429 says which window is full, as every answer of this limit does (as the guests').
    assert refused.headers["X-RateLimit-Limit"] == str(LIMIT)
    assert refused.headers["X-RateLimit-Remaining"] == "0"
    assert int(refused.headers["X-RateLimit-Reset"]) >= time.time()
    assert ask(second, VERIFY, alice, "203.0.113.51").status_code == 429  # the other worker too

    assert ask(second, VERIFY, bob, "203.0.113.50").status_code == 200  # another account
    # A bad key is the failed-key throttle's 401, not this limit's 429.
    assert ask(first, VERIFY, "pbk_" + "Q" * 43, "203.0.113.52").status_code == 401
    # Her board reads are counted by her plan's limit, not this one.
    assert ask(first, "/api/probboard/latest", alice, "203.0.113.50").status_code == 200


def test_the_limit_is_a_setting_parsed_strictly(database_url: str) -> None:
    assert load_settings({}).verify_rate_limit == "30 per minute"
    assert load_settings({"VERIFY_RATE_LIMIT": " 5/second "}).verify_rate_limit == "5/second"
    for bad in ("thirty", "30 per fortnight", "-1/minute"):
        with pytest.raises(ConfigError) as caught:
            load_settings({"VERIFY_RATE_LIMIT": bad})
        assert caught.value.variable == "VERIFY_RATE_LIMIT"
    app = create_app({**BASE_CONFIG, "DATABASE_URL": database_url})
    assert services_of(app).settings.verify_rate_limit == "30 per minute"
    _close(app)


def test_a_check_is_one_round_trip_per_limit_a_refusal_included(
    fresh_redis: RedisServer, database_url: str
) -> None:
    """What ``app/limits/verify.py`` says it costs: on Redis, one script call per limit per
    check, admitted or refused (the headers' window is the one the hit reported)."""
    config = {**BASE_CONFIG, "DATABASE_URL": database_url, "REDIS_URL": fresh_redis.url,
              "VERIFY_RATE_LIMIT": "2/day;50/hour"}  # fmt: skip
    app = create_app(config)
    client = app.test_client()
    alice = key_of(app, "alice", "vip_pro")
    server = redis.Redis.from_url(fresh_redis.url)
    try:
        assert ask(client, VERIFY, alice, "203.0.113.1").status_code == 200  # scripts loaded
        for expected in (200, 429):
            server.config_resetstat()
            assert ask(client, VERIFY, alice, "203.0.113.1").status_code == expected
            calls = {name: stats["calls"] for name, stats in server.info("commandstats").items()}
            scripts = calls.get("cmdstat_evalsha", 0) + calls.get("cmdstat_eval", 0)
            # Admitted: each limit once; refused: up to the full one (in the limits' order).
            assert scripts == 2 if expected == 200 else 1 <= scripts <= 2, calls
    finally:
        server.close()
        _close(app)
