"""Throttling of ``/api/probboard/latest`` in process: limits per plan, the 429 contract, proxies.

The limiter counts in memory here, on a fake clock (``time.time`` is replaced), so windows,
``retryAfterMs`` and a client polling for minutes are exact and take no real time. The same
rules against real Redis and gunicorn workers are in ``test_throttling_gunicorn.py``.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import redis
from flask import Flask
from flask.testing import FlaskClient
from flask_limiter import Limiter
from limits import parse_many
from werkzeug.test import TestResponse

import app as app_package
from app.config import ConfigError, load_settings
from app.extensions import db
from app.markets import parse_symbols
from app.refresher.loop import Refresher
from app.refresher.sources.simulated import SimulatedSource
from app.services import services_of
from app.web import create_app
from harness.processes import RedisServer
from tests.conftest import BASE_CONFIG, COUNTED_ON_REDIS
from tests.support.contract import validated

LATEST = "/api/probboard/latest"
HEALTH = "/api/health"
SESSION_COOKIE = "probboard_session"
# A whole minute (and hour) of the epoch plus a quarter second: windows are predictable.
START = 1_800_000_000.25
LIMITS = {
    "GUEST_RATE_LIMIT": "5 per minute",
    "USER_RATE_LIMIT": "8 per minute",
    "VIP_PRO_RATE_LIMIT": "20 per minute",
}


class Clock:
    """The fake ``time.time``: stands still until advanced."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """``time.time`` under the test's control (the limiter's memory storage reads it)."""
    fake = Clock(START)
    monkeypatch.setattr(time, "time", fake)
    return fake


def make_app(tmp_path: Path, **config: str) -> Flask:
    """An app on the memory bus and limiter; its SQLite file has no schema (guests only)."""
    return create_app(
        {**BASE_CONFIG, "DATABASE_URL": f"sqlite:///{tmp_path / 'app.sqlite3'}", **config}
    )


@pytest.fixture
def accounts_db_app(database_url: str) -> Iterator[Flask]:
    """An app with the test limits on the migrated accounts database (SQLite, PostgreSQL)."""
    app = create_app({**BASE_CONFIG, "DATABASE_URL": database_url, **LIMITS})
    publish_board(app)
    yield app
    with app.app_context():
        db.session.remove()
        db.engine.dispose()


def publish_board(app: Flask) -> None:
    with app.app_context():
        assert Refresher(
            SimulatedSource(parse_symbols("BTC"), seed=1), services_of(app).bus, 500
        ).tick()


def cli(app: Flask, *args: str) -> str:
    """An operator command; its last line of output (the secret, for keys and sessions)."""
    result = app.test_cli_runner().invoke(args=list(args))
    assert result.exit_code == 0, (args, result.output, result.exception)
    return str(result.stdout).splitlines()[-1]


def session_header(token: str) -> dict[str, str]:
    return {"Cookie": f"{SESSION_COOKIE}={token}"}


def call(
    client: FlaskClient,
    headers: Mapping[str, str] | None = None,
    method: str = "GET",
    path: str = LATEST,
    remote_addr: str = "127.0.0.1",
) -> TestResponse:
    """One request; whatever it sends, the answer is never a 5xx."""
    response = client.open(
        path, method=method, headers=dict(headers or {}), environ_base={"REMOTE_ADDR": remote_addr}
    )
    assert response.status_code < 500, response.get_data(as_text=True)
    return response


def served(response: TestResponse, plan: str) -> dict[str, Any]:
    """A 200 BoardResponse under ``plan``."""
    assert response.status_code == 200, response.get_data(as_text=True)
    board = validated("board", response.get_data())
    assert board["plan"] == plan, board
    return board


def limited(response: TestResponse, window_ms: int = 60_000) -> int:
    """A 429 as the issue describes it; returns ``retryAfterMs``."""
    assert response.status_code == 429, response.get_data(as_text=True)
    body = validated("error", response.get_data())
    assert body["ok"] is False
    assert body["code"] == "rate_limited", body
    retry_ms = body["retryAfterMs"]
    assert isinstance(retry_ms, int) and not isinstance(retry_ms, bool), body
    assert 1 <= retry_ms <= window_ms, retry_ms
    retry_after = response.headers.get("Retry-After", "")
    assert re.fullmatch(r"[0-9]+", retry_after), dict(response.headers)
    assert int(retry_after) >= 1
    assert int(retry_after) == math.ceil(retry_ms / 1000), (retry_after, retry_ms)
    assert response.headers["Cache-Control"] == "no-store"
    return retry_ms


def served_n_then_limited(
    client: FlaskClient, n: int, plan: str, headers: Mapping[str, str] | None = None
) -> None:
    """``n`` boards under ``plan`` (headers counting down), then a 429."""
    remaining = []
    for _ in range(n):
        response = call(client, headers)
        served(response, plan)
        assert response.headers["X-RateLimit-Limit"] == str(n)
        remaining.append(int(response.headers["X-RateLimit-Remaining"]))
    assert remaining == list(range(n - 1, -1, -1))
    limited(call(client, headers))


# -- the defaults ---------------------------------------------------------------------------


def per_minute(rate: str) -> float:
    """The tightest of the rates in ``rate``, in requests per minute."""
    return min(item.amount * 60 / item.get_expiry() for item in parse_many(rate))


@pytest.mark.parametrize(
    "environ",
    [
        {},
        {"REFRESH_MS_GUEST": "700", "REFRESH_MS_USER": "999", "REFRESH_MS_VIP_PRO": "501"},
        {"REFRESH_MS_GUEST": "60000", "REFRESH_MS_USER": "7000", "REFRESH_MS_VIP_PRO": "1300"},
    ],
    ids=["defaults", "fast", "slow"],
)
def test_default_limits_leave_room_for_polling_at_refresh_ms(environ: dict[str, str]) -> None:
    settings = load_settings(environ)
    for rate, refresh_ms in [
        (settings.guest_rate_limit, settings.refresh_ms_guest),
        (settings.user_rate_limit, settings.refresh_ms_user),
        (settings.vip_pro_rate_limit, settings.refresh_ms_vip_pro),
    ]:
        polls_per_minute = 60_000 / refresh_ms
        assert per_minute(rate) >= 1.5 * polls_per_minute, (rate, refresh_ms)
        # ... and room for a short burst on top of one request per refreshMs.
        assert min(item.amount for item in parse_many(rate)) >= 2, rate
    if not environ:
        assert per_minute(settings.guest_rate_limit) <= 60, "the guest default is not a limit"


@pytest.mark.parametrize("variable", ["GUEST_RATE_LIMIT", "USER_RATE_LIMIT", "VIP_PRO_RATE_LIMIT"])
@pytest.mark.parametrize("value", ["lots", "5 per fortnight", "five per minute", "-3 per minute"])
def test_a_bad_rate_stops_start_up_naming_the_variable(variable: str, value: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings({variable: value})
    assert caught.value.variable == variable
    assert variable in str(caught.value)


def test_polling_at_refresh_ms_is_never_limited_with_the_defaults(
    accounts_app: Flask, clock: Clock
) -> None:
    """Guest, user and vip_pro poll at their refreshMs for two minutes: never a 429. (Every
    default limit is per minute: two minutes hold whole windows and their rolls; five, as
    before, added nothing but requests.)"""
    publish_board(accounts_app)
    cli(accounts_app, "users", "create", "ursula", "--plan", "user")
    cli(accounts_app, "users", "create", "vic", "--plan", "vip_pro")
    pollers = {
        "guest": (5000, {}),
        "user": (2000, session_header(cli(accounts_app, "sessions", "create", "ursula"))),
        "vip_pro": (500, {"X-API-Key": cli(accounts_app, "keys", "create", "vic")}),
    }
    client = accounts_app.test_client(use_cookies=False)
    polls = dict.fromkeys(pollers, 0)
    for tick in range(2 * 60 * 2):  # every 500 ms for two minutes
        for plan, (refresh_ms, headers) in pollers.items():
            if (tick * 500) % refresh_ms == 0:
                served(call(client, headers), plan)
                polls[plan] += 1
        clock.advance(0.5)
    assert polls == {"guest": 24, "user": 60, "vip_pro": 240}
    # The limits were in force all along: a burst is held at each plan's limit.
    settings = load_settings({})
    for plan, rate in [
        ("guest", settings.guest_rate_limit),
        ("user", settings.user_rate_limit),
        ("vip_pro", settings.vip_pro_rate_limit),
    ]:
        headers = pollers[plan][1]
        statuses = [call(client, headers).status_code for _ in range(int(per_minute(rate)) + 1)]
        assert 429 in statuses, (plan, statuses)
        limited(call(client, headers))


# -- the 429 contract -----------------------------------------------------------------------


def test_sixth_guest_call_is_429_and_retry_after_is_honest(tmp_path: Path, clock: Clock) -> None:
    app = make_app(tmp_path, GUEST_RATE_LIMIT="5 per minute")
    client = app.test_client()
    for remaining in (4, 3, 2, 1, 0):
        response = call(client)
        served(response, "guest")
        assert response.headers["X-RateLimit-Limit"] == "5"
        assert response.headers["X-RateLimit-Remaining"] == str(remaining)
        # The window began a quarter second into the minute: it ends with that minute.
        assert 1_800_000_060 <= int(response.headers["X-RateLimit-Reset"]) <= 1_800_000_061
    retry_ms = limited(call(client))
    assert abs(retry_ms - 59_750) <= 1, retry_ms
    # Not a second too early ...
    clock.advance(retry_ms / 1000 - 1)
    assert limited(call(client)) <= 1001
    # ... and waiting retryAfterMs is enough.
    clock.advance(1.001)
    served(call(client), "guest")
    # The sliding window remembers the previous minute: the next one has to wait again,
    # a fifth of a minute (the previous window's weight drops by one every 12 s).
    retry_ms = limited(call(client))
    assert 11_000 < retry_ms <= 12_000, retry_ms
    clock.advance(retry_ms / 1000 - 0.5)
    limited(call(client))
    clock.advance(0.501)
    served(call(client), "guest")


def test_health_and_options_are_never_limited_but_head_is(tmp_path: Path, clock: Clock) -> None:
    client = make_app(tmp_path, GUEST_RATE_LIMIT="2 per minute").test_client()
    served(call(client), "guest")
    served(call(client), "guest")
    limited(call(client))
    for _ in range(50):
        health = call(client, path=HEALTH)
        assert health.status_code == 200
        validated("health", health.get_data())
        options = call(client, method="OPTIONS")
        assert 200 <= options.status_code < 300
        assert "GET" in options.headers["Allow"]
    # HEAD is a GET without the body: no way around the limit.
    head = call(client, method="HEAD")
    assert head.status_code == 429
    assert int(head.headers["Retry-After"]) >= 1
    limited(call(client))


# -- plans ----------------------------------------------------------------------------------


def test_keys_and_sessions_are_held_to_their_plans_limit_per_account(
    accounts_db_app: Flask, clock: Clock
) -> None:
    app = accounts_db_app
    for name, plan in [("vic", "vip_pro"), ("vera", "vip_pro"), ("ursula", "user"),
                       ("root", "admin")]:  # fmt: skip
        cli(app, "users", "create", name, "--plan", plan)
    vic_key, vic_other_key = cli(app, "keys", "create", "vic"), cli(app, "keys", "create", "vic")
    vic_session = session_header(cli(app, "sessions", "create", "vic"))
    vera_key = cli(app, "keys", "create", "vera")
    ursula = session_header(cli(app, "sessions", "create", "ursula"))
    root_key = cli(app, "keys", "create", "root")
    root_session = session_header(cli(app, "sessions", "create", "root"))
    client = app.test_client(use_cookies=False)

    # vip_pro gets its own 20, not the guest's 5; guests from the same address are apart.
    served_n_then_limited(client, 20, "vip_pro", {"X-API-Key": vic_key})
    served_n_then_limited(client, 5, "guest")
    # The count is the account's: its other key, either scheme, and its session share it.
    limited(call(client, {"X-API-Key": vic_other_key}))
    limited(call(client, {"Authorization": f"Bearer {vic_other_key}"}))
    limited(call(client, vic_session))
    # Another vip_pro account has its own count.
    served_n_then_limited(client, 20, "vip_pro", {"Authorization": f"Bearer {vera_key}"})
    # user: 8 with a session cookie.
    served_n_then_limited(client, 8, "user", ursula)
    # admin is never limited, by key or session.
    for _ in range(60):
        served(call(client, {"X-API-Key": root_key}), "admin")
        served(call(client, root_session), "admin")
    # A cookie of no session is a guest: the guest's count, not a fresh one.
    limited(call(client, session_header("pbs_" + "Q" * 43)))
    # A minute later everybody is served again.
    clock.advance(120)
    served(call(client, {"X-API-Key": vic_other_key}), "vip_pro")
    served(call(client, ursula), "user")
    served(call(client), "guest")


# -- client address -------------------------------------------------------------------------


def test_forwarded_for_is_ignored_without_trusted_proxies(tmp_path: Path, clock: Clock) -> None:
    client = make_app(tmp_path, GUEST_RATE_LIMIT="5 per minute").test_client()
    forged = iter(f"203.0.113.{i}" for i in range(100))
    for _ in range(5):
        served(call(client, {"X-Forwarded-For": next(forged), "X-Real-IP": next(forged)}), "guest")
    for _ in range(10):
        limited(call(client, {"X-Forwarded-For": next(forged), "Forwarded": "for=198.51.100.9"}))
        limited(call(client, {"X-Forwarded-For": f"{next(forged)}, {next(forged)}"}))
    # Another socket peer is another client.
    served(call(client, remote_addr="192.0.2.50"), "guest")


def test_one_trusted_proxy_takes_the_right_most_hop(tmp_path: Path, clock: Clock) -> None:
    client = make_app(
        tmp_path, GUEST_RATE_LIMIT="5 per minute", TRUSTED_PROXIES="10.0.0.0/24"
    ).test_client()
    proxy = "10.0.0.2"
    for address in ("198.51.100.1", "198.51.100.2"):
        for _ in range(5):
            served(call(client, {"X-Forwarded-For": address}, remote_addr=proxy), "guest")
        limited(call(client, {"X-Forwarded-For": address}, remote_addr=proxy))
    # "spoofed, real": only the hop the proxy added counts.
    for i in range(5):
        chain = {"X-Forwarded-For": f"203.0.113.{i}, 198.51.100.3"}
        served(call(client, chain, remote_addr=proxy), "guest")
    for i in range(5, 10):
        chain = {"X-Forwarded-For": f"203.0.113.{i}, 198.51.100.3"}
        limited(call(client, chain, remote_addr=proxy))
    limited(call(client, {"X-Forwarded-For": "198.51.100.3"}, remote_addr=proxy))
    # The proxy itself, without the header, is one more client.
    served(call(client, remote_addr=proxy), "guest")


def test_two_trusted_proxies_take_the_second_hop_from_the_right(
    tmp_path: Path, clock: Clock
) -> None:
    client = make_app(
        tmp_path,
        GUEST_RATE_LIMIT="3 per minute",
        TRUSTED_PROXIES="127.0.0.1/32,10.0.0.0/8",
        TRUSTED_PROXY_HOPS="2",
    ).test_client()
    for i in range(3):
        chain = {"X-Forwarded-For": f"203.0.113.{i}, 198.51.100.7, 10.0.0.{i}"}
        served(call(client, chain, remote_addr="10.0.0.1"), "guest")
    limited(call(client, {"X-Forwarded-For": "6.6.6.6, 198.51.100.7, 10.9.9.9"}))
    served(call(client, {"X-Forwarded-For": "198.51.100.8, 10.0.0.1"}), "guest")


def test_a_peer_outside_trusted_proxies_is_its_own_address(tmp_path: Path, clock: Clock) -> None:
    """Issue 46: loopback is not in TRUSTED_PROXIES, so its X-Forwarded-For is not believed."""
    client = make_app(
        tmp_path, GUEST_RATE_LIMIT="10 per minute", TRUSTED_PROXIES="10.0.0.0/24"
    ).test_client()
    statuses = [call(client, {"X-Forwarded-For": f"203.0.113.{i}"}).status_code for i in range(12)]
    assert statuses == [200] * 10 + [429] * 2, statuses
    # A proxy of the list still forwards its clients, each counted apart.
    served(call(client, {"X-Forwarded-For": "203.0.113.1"}, remote_addr="10.0.0.7"), "guest")


def test_the_old_hop_count_trusts_loopback_only(
    tmp_path: Path, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    """TRUSTED_PROXIES=1, kept in env files from before issue 46: nginx on loopback, no more."""
    with caplog.at_level("WARNING", logger="app.web"):
        client = make_app(
            tmp_path, GUEST_RATE_LIMIT="5 per minute", TRUSTED_PROXIES="1"
        ).test_client()
    assert "TRUSTED_PROXIES=1 is the old hop count" in caplog.text
    # From loopback (the nginx on the VM) each forwarded client is counted apart.
    for i in range(6):
        served(call(client, {"X-Forwarded-For": f"203.0.113.{i}"}), "guest")
    # From the private network the header is not believed: the peer is counted.
    private = [
        call(client, {"X-Forwarded-For": f"198.51.100.{i}"}, remote_addr="10.0.0.2").status_code
        for i in range(7)
    ]
    assert private == [200] * 5 + [429] * 2, private


def test_ipv6_guests_are_counted_per_64(tmp_path: Path, clock: Clock) -> None:
    """Issue 46: a client with a /64 cannot rotate addresses to dodge the guest limit."""
    client = make_app(tmp_path, GUEST_RATE_LIMIT="5 per minute").test_client()
    for i in range(5):
        served(call(client, remote_addr=f"2001:db8:1:2::{i + 1:x}"), "guest")
    limited(call(client, remote_addr="2001:db8:1:2:ffff:ffff:ffff:ffff"))
    limited(call(client, remote_addr="2001:db8:1:2:a:b:c:d"))
    # The next /64 is another client; an IPv4 address is counted as itself.
    served(call(client, remote_addr="2001:db8:1:3::1"), "guest")
    served(call(client, remote_addr="192.0.2.1"), "guest")
    # Forwarded by a trusted proxy, the client's /64 is what counts too.
    behind = make_app(
        tmp_path, GUEST_RATE_LIMIT="5 per minute", TRUSTED_PROXIES="127.0.0.1/32"
    ).test_client()
    for i in range(5):
        served(call(behind, {"X-Forwarded-For": f"2001:db8:9:9::{i + 1:x}"}), "guest")
    limited(call(behind, {"X-Forwarded-For": "2001:db8:9:9:1234::1"}))


ODD_FORWARDED_FOR = {
    "empty": "",
    "blank": "   ",
    "garbage": "garbage",
    "empty-hops": "1.2.3.4, , ",
    "commas": "," * 500,
    "ipv6": "2001:db8::1",
    "ipv6-loopback": "::1",
    "ipv6-bracketed-port": "[2001:db8::1]:8443",
    "port": "198.51.100.1:5678",
    "latin-1": "\xe9\xff\xfe.1.2.3",
    "controls": "\x01\x7f 1.2.3.4",
    "unknown": "unknown",
    "long": "9" * 6000,
    "slashes-braces": "a/b}{c",
    "many-hops": ", ".join(f"10.0.{i // 256}.{i % 256}" for i in range(400)),
}


@pytest.mark.parametrize("hops", ["1", "2"])
@pytest.mark.parametrize("value", ODD_FORWARDED_FOR.values(), ids=ODD_FORWARDED_FOR.keys())
def test_odd_forwarded_for_values_are_still_limited_never_5xx(
    tmp_path: Path, clock: Clock, value: str, hops: str
) -> None:
    client = make_app(
        tmp_path,
        GUEST_RATE_LIMIT="5 per minute",
        TRUSTED_PROXIES="127.0.0.1/32",
        TRUSTED_PROXY_HOPS=hops,
    ).test_client()
    statuses = [call(client, {"X-Forwarded-For": value}).status_code for _ in range(7)]
    # Some key is always found for the caller (never none, never an exception): the limit holds.
    assert statuses == [200] * 5 + [429] * 2, statuses
    limited(call(client, {"X-Forwarded-For": value}))


# -- one app, one storage ---------------------------------------------------------------------


def test_each_app_counts_in_its_own_storage(tmp_path: Path, fresh_redis: RedisServer) -> None:
    """create_app is a factory: building a second app must not re-point the first's limiter."""
    on_redis = make_app(
        tmp_path, REDIS_URL=fresh_redis.url, GUEST_RATE_LIMIT="5 per minute", **COUNTED_ON_REDIS
    )
    make_app(tmp_path, GUEST_RATE_LIMIT="3 per minute")  # another app in the same process
    try:
        client = on_redis.test_client()
        statuses = [call(client).status_code for _ in range(4)]
        assert statuses == [200] * 4, statuses
        stored = redis.Redis.from_url(fresh_redis.url).keys("*LIMITER*")
        # Today the module-level Limiter of app/limits.py takes the storage of the app built
        # last, so these requests were counted in the other app's memory.
        assert stored, "the Redis app's requests were not counted in its Redis"
    finally:
        services_of(on_redis).bus.close()


# -- the guest step: flask-limiter's check, nowhere else ---------------------------------------


def test_the_guest_step_counts_per_address_with_the_sliding_window(
    tmp_path: Path, clock: Clock
) -> None:
    """The guests' counters are the ones flask-limiter's strategy reads, under its keys."""
    app = make_app(tmp_path, GUEST_RATE_LIMIT="3 per minute")
    publish_board(app)
    client = app.test_client()
    served(call(client), "guest")
    served(call(client), "guest")
    (limiter,) = app.extensions["limiter"]
    assert isinstance(limiter, Limiter)
    (item,) = parse_many("3 per minute")
    # The keys flask-limiter gives a route limit: prefix, key function, endpoint.
    key = ("probboard", "address:127.0.0.1", "latest.latest")
    window = limiter.limiter.get_window_stats(item, *key)
    assert window.remaining == 1
    assert limiter.limiter.hit(item, *key)  # the third
    limited(call(client))
    served(call(client, remote_addr="10.0.0.9"), "guest")  # another address, its own count


def test_flask_limiter_counts_guests_alone(database_url: str, fresh_redis: RedisServer) -> None:
    """flask-limiter's hooks run on every request, but only a guest read of /latest is
    counted by it: health, keyed reads, refused keys, OPTIONS and unknown paths leave no
    address counter in Redis."""
    app = create_app(
        {
            **BASE_CONFIG,
            "DATABASE_URL": database_url,
            "REDIS_URL": fresh_redis.url,
            **LIMITS,
            **COUNTED_ON_REDIS,
        }
    )
    try:
        publish_board(app)
        cli(app, "users", "create", "apart", "--plan", "vip_pro")
        key = cli(app, "keys", "create", "apart")
        client = app.test_client()
        stored = redis.Redis.from_url(fresh_redis.url)
        for _ in range(3):
            assert call(client, path=HEALTH).status_code == 200
            served(call(client, {"X-API-Key": key}), "vip_pro")
            assert call(client, {"X-API-Key": "pbk_not-a-key"}).status_code == 401
            assert call(client, method="OPTIONS").status_code in (200, 204)
            assert call(client, path="/api/nothing-here").status_code == 404
        assert not [k for k in stored.keys("*") if b"address:" in k and b"LIMITER" in k]
        served(call(client), "guest")
        guests = [k.decode() for k in stored.keys("*LIMITER*address:*") if isinstance(k, bytes)]
        assert guests and all("/probboard/address:127.0.0.1/latest.latest/" in k for k in guests)
    finally:
        services_of(app).bus.close()


def test_only_flask_limiters_public_api_is_used() -> None:
    """flask-limiter is driven through its documented API: no private module or helper."""
    private = re.compile(r"flask_limiter\._|decorated_limits|limit_manager|_check_request_limit")
    sources = list(Path(app_package.__file__).parent.rglob("*.py"))
    assert len(sources) > 50, sources  # the package itself, wherever the tests run from
    found = [
        f"{path}:{number}"
        for path in sources
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if private.search(line)
    ]
    assert not found, found


def test_several_guest_limits_show_the_tightest_and_refuse_on_any(
    tmp_path: Path, clock: Clock
) -> None:
    app = make_app(tmp_path, GUEST_RATE_LIMIT="2 per second;3 per minute")
    publish_board(app)
    client = app.test_client()
    first = call(client)
    served(first, "guest")
    assert (first.headers["X-RateLimit-Limit"], first.headers["X-RateLimit-Remaining"]) == (
        "2",
        "1",
    )
    served(call(client), "guest")
    assert limited(call(client), window_ms=1000) <= 1000  # the second's limit
    clock.advance(2.0)  # the second's sliding window is empty again
    served(call(client), "guest")  # the minute's third
    refused = call(client)
    retry_ms = limited(refused)
    assert retry_ms > 1000, retry_ms  # refused by the minute, which says when it has room
    assert refused.headers["X-RateLimit-Limit"] == "3"
    assert refused.headers["X-RateLimit-Remaining"] == "0"
