"""The steps around the key check, the same on every endpoint that takes a key.

``/latest``, ``/trail``, ``/stream`` and ``/keys/verify``: an address blocked for failed keys
gets the throttle's 429 before its key is looked up and before ``?symbol=`` is read; a 401
to a presented key counts one failure, and a failure that finds the address's window full
(filled on another worker) is answered with that 429 instead; no other refusal counts. Two
apps on one Redis stand for two gunicorn workers, as in ``test_limits_failures.py``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import pytest
from flask import Flask
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from app.extensions import db
from app.services import services_of
from app.web import create_app
from harness.processes import RedisServer
from tests.conftest import BASE_CONFIG, COUNTED_ON_REDIS
from tests.support.contract import validated
from tests.unit.test_cors import key_of

LATEST = "/api/probboard/latest"
TRAIL = "/api/probboard/trail"
STREAM = "/api/probboard/stream"
VERIFY = "/api/keys/verify"
ENDPOINTS = (LATEST, TRAIL, STREAM, VERIFY)
UNKNOWN_KEY = "pbk_" + "Z" * 43
GUESSER = "198.51.100.21"
BYSTANDER = "198.51.100.22"


def _close(app: Flask) -> None:
    held = services_of(app)
    held.broker.shutdown()
    held.bus.close()
    with app.app_context():
        db.session.remove()
        db.engine.dispose()


@pytest.fixture
def workers(fresh_redis: RedisServer, database_url: str) -> Iterator[list[Flask]]:
    """Two apps on one Redis; two failed keys a day fill an address's window."""
    config = {
        **BASE_CONFIG,
        "DATABASE_URL": database_url,
        "REDIS_URL": fresh_redis.url,
        **COUNTED_ON_REDIS,
        # A day: no window boundary falls inside the test. Two, not one: on Redis the
        # limits library reports a window of one as ending now, which blocks for no time.
        "AUTH_FAILURE_LIMIT": "2/day",
    }
    apps = [create_app(config), create_app(config)]
    yield apps
    for app in apps:
        _close(app)


@pytest.fixture
def one(database_url: str) -> Iterator[Flask]:
    """One app counting in memory; one failed key a day fills an address's window."""
    app = create_app({**BASE_CONFIG, "DATABASE_URL": database_url, "AUTH_FAILURE_LIMIT": "1/day"})
    yield app
    _close(app)


def ask(
    client: FlaskClient, path: str, key: str | None, address: str, query: str = ""
) -> TestResponse:
    """``GET path?query`` from ``address``, with ``key`` in ``X-API-Key`` when given."""
    headers = {} if key is None else {"X-API-Key": key}
    return client.get(
        f"{path}?{query}" if query else path,
        headers=headers,
        environ_base={"REMOTE_ADDR": address},
    )


def answer(response: TestResponse) -> tuple[int, str]:
    """The status and the ErrorResponse code (``ok`` for a success)."""
    if response.status_code == 200:
        return 200, "ok"
    return response.status_code, str(validated("error", response.get_data())["code"])


def throttled(response: TestResponse) -> tuple[str, str, str]:
    """A throttle's 429, checked: its code, message and content type (the same everywhere)."""
    assert response.status_code == 429, response.get_data(as_text=True)
    body = validated("error", response.get_data())
    assert body["code"] == "rate_limited"
    assert 1000 < body["retryAfterMs"] <= 86_400_000
    assert int(response.headers["Retry-After"]) >= 1
    return str(body["code"]), str(body["error"]), str(response.headers["Content-Type"])


@pytest.mark.parametrize("path", ENDPOINTS)
def test_a_blocked_address_gets_the_same_429_everywhere_before_its_key_and_symbol(
    workers: list[Flask], path: str
) -> None:
    """A failed key on any of the endpoints blocks the address on all of them."""
    first, second = (app.test_client(use_cookies=False) for app in workers)
    key = key_of(workers[0], "alice", "vip_pro")

    # Two failures on ``path`` fill the window: answered as they were (401), counted.
    for _ in range(2):
        assert answer(ask(first, path, UNKNOWN_KEY, GUESSER)) == (401, "invalid_key")
    # Now every endpoint refuses the address's keys, good ones too, before reading the key
    # or ``?symbol=`` (a bad symbol would be a 400): one and the same 429.
    refusals = {throttled(ask(first, other, key, GUESSER, "symbol=doge")) for other in ENDPOINTS}
    assert len(refusals) == 1, refusals
    # Without a key nothing is throttled: each endpoint answers as to anyone.
    assert [answer(ask(first, other, None, GUESSER)) for other in ENDPOINTS] == [
        (200, "ok"),
        (200, "ok"),
        (401, "missing_credentials"),
        (401, "missing_credentials"),
    ]

    # The other worker has seen no failure: its first one, on ``path``, finds the window
    # full and is answered with the throttle's 429 rather than a 401...
    assert throttled(ask(second, path, UNKNOWN_KEY, GUESSER)) in refusals
    # ...and from then on it refuses the address's good keys too, on every endpoint.
    assert {throttled(ask(second, other, key, GUESSER, "symbol=doge")) for other in ENDPOINTS} == (
        refusals
    )
    # Another address is not affected: ``?symbol=`` is read (verify takes no symbol).
    assert [answer(ask(second, other, key, BYSTANDER, "symbol=doge")) for other in ENDPOINTS] == [
        (400, "invalid_symbol"),
        (400, "invalid_symbol"),
        (400, "invalid_symbol"),
        (200, "ok"),
    ]


def test_only_a_401_to_a_presented_key_counts_a_failure(one: Flask) -> None:
    """No key, a 403 for the plan, a 400 for the symbol: none counts; a stream's 401 does."""
    client = one.test_client(use_cookies=False)
    key, user_key = key_of(one, "alice", "vip_pro"), key_of(one, "ursula", "user")
    for _ in range(3):
        assert answer(ask(client, STREAM, None, GUESSER)) == (401, "missing_credentials")
        assert answer(ask(client, VERIFY, None, GUESSER)) == (401, "missing_credentials")
        assert answer(ask(client, STREAM, user_key, GUESSER)) == (403, "vip_pro_required")
        for path in (LATEST, TRAIL, STREAM):
            assert answer(ask(client, path, key, GUESSER, "symbol=doge")) == (400, "invalid_symbol")
    assert answer(ask(client, VERIFY, key, GUESSER)) == (200, "ok")  # not blocked

    # A 401 to a key on the stream counts: the window (one a day) is full, the address blocked.
    assert answer(ask(client, STREAM, UNKNOWN_KEY, GUESSER)) == (401, "invalid_key")
    throttled(ask(client, VERIFY, key, GUESSER))
    throttled(ask(client, STREAM, key, GUESSER))


def test_no_blueprint_runs_request_hooks(app: Flask) -> None:
    """One wiring style: every step of an endpoint is called by its view, in the order the
    view states; no blueprint registers hooks (the app's own are flask-limiter's, CORS's)."""
    assert len(app.blueprints) > 5, "the blueprints were not registered"
    registries: dict[str, Mapping[str | None, Sequence[object]]] = {
        "before_request": app.before_request_funcs,
        "after_request": app.after_request_funcs,
        "teardown_request": app.teardown_request_funcs,
        "url_value_preprocessor": app.url_value_preprocessors,
    }
    hooked = {
        (kind, name): len(funcs)
        for kind, registry in registries.items()
        for name, funcs in registry.items()
        if name is not None and funcs
    }
    assert not hooked, hooked
