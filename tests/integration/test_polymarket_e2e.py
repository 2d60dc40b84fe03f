"""The live source as a new user runs it, with local fakes standing in for the internet:
``flask --app wsgi refresher --once``, and the production shape (a refresher process and
gunicorn on Redis) serving the fake market, then turning stale when the price goes silent.
Both run on PostgreSQL, the accounts store production uses (the session's migrated database;
neither creates accounts, so sharing it is harmless).

These run on the real clock: the fakes list every window (``auto_markets``), stream real-time
prices and keep the books busy, so a window boundary during a test is harmless.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from app.refresher.sources.polymarket.points import MAX_NORMAL_LAG_MS
from app.schemas import check
from app.schemas.board import PublishedBoardSchema
from harness.fake_polymarket import SPOT_TOPIC, FakePolymarket, running
from harness.processes import BIN, ROOT, RedisServer, Service, service_env
from harness.spans import window_start
from tests.support.contract import validated

LATEST = "/api/probboard/latest"
DEADLINE_S = 45.0  # generous: another process may be loading the machine


@pytest.fixture
def live_world() -> Iterator[FakePolymarket]:
    """Every window listed, prices streaming in real time, busy books."""
    # Own fakes: one test silences RTDS; the other counts lookups from zero.
    with running(auto_markets=True) as world:
        world.rtds.live(period_s=0.2)
        world.clob_ws.keep_alive(0.1)
        yield world


def assert_is_the_fake_market(item: dict[str, Any], world: FakePolymarket) -> None:
    market = world.market(item["windowStart"])
    assert market is not None
    assert item["up_token_id"] == market.up_token
    assert item["down_token_id"] == market.down_token
    assert (item["up_bid"], item["up_ask"]) == world.best(market.up_token)
    assert (item["down_bid"], item["down_ask"]) == world.best(market.down_token)
    assert (item["up_bid"], item["up_ask"], item["down_bid"], item["down_ask"]) == (
        0.53,
        0.55,
        0.45,
        0.47,
    )


def test_refresher_once_prints_the_fake_markets_board(
    live_world: FakePolymarket, postgres_database: str
) -> None:
    env = service_env(
        **live_world.env(),
        REDIS_URL="memory://",
        SECRET_KEY="test-secret-of-the-suite",
        DATABASE_URL=postgres_database,
    )
    result = subprocess.run(
        [str(BIN / "flask"), "--app", "wsgi", "refresher", "--once"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )

    assert result.returncode == 0, result.stderr
    board = json.loads(result.stdout)
    check(PublishedBoardSchema(), board, "board")
    assert board["source"] == "polymarket"
    [item] = board["items"]
    assert item["windowStart"] == window_start(board["ts"] / 1000)
    assert_is_the_fake_market(item, live_world)
    assert item["sources"]["upBook"] in ("clob-ws", "clob-rest")
    assert item["sources"]["price"] == f"rtds:{SPOT_TOPIC}"
    assert item["price"] is not None and item["priceToBeat"] is not None
    assert item["p_up_pct"] + item["p_down_pct"] == pytest.approx(100, abs=1e-9)
    assert item["settlement"] == "spot" and item["sources"]["model"] == "digital-option:spot"
    assert item["sigma"] > 0 and item["sigmaScale"] is not None  # from the spot's history
    assert live_world.gamma.lookups()  # it did go to the (fake) upstreams
    assert live_world.rtds.connections >= 1


def _item(service: Service) -> dict[str, Any] | None:
    status, _, body = service.get(LATEST)
    assert status == 200
    items = validated("board", body)["items"]
    return items[0] if items else None


def _wait_item(
    service: Service, predicate: Callable[[dict[str, Any]], bool], what: str
) -> dict[str, Any]:
    deadline = time.monotonic() + DEADLINE_S
    last = None
    while time.monotonic() < deadline:
        last = _item(service)
        if last is not None and predicate(last):
            return last
        assert service.refresher is not None and service.refresher.alive(), (
            service.refresher.output() if service.refresher else ""
        )
        time.sleep(0.05)
    pytest.fail(f"timed out waiting for {what}; last item: {last}")


def test_production_shape_serves_the_fake_market_and_turns_stale_when_rtds_goes_silent(
    live_world: FakePolymarket, fresh_redis: RedisServer, service: Service, postgres_database: str
) -> None:
    service.env.update(
        live_world.env(),
        REDIS_URL=fresh_redis.url,
        DATABASE_URL=postgres_database,
        STALE_THRESHOLD_MS="1000",
        SEVERE_STALE_THRESHOLD_MS="2500",
    )
    # Own refresher and gunicorn: on this test's fakes and stale thresholds.
    service.start_refresher()
    service.start_web(workers=1)

    fresh = _wait_item(
        service,
        lambda i: i["latencyLevel"] == "ok" and i["sources"]["upBook"] == "clob-ws",
        "a fresh item from the fake market",
    )
    assert_is_the_fake_market(fresh, live_world)
    assert fresh["isStale"] is False
    assert fresh["sources"]["price"] == f"rtds:{SPOT_TOPIC}"
    assert fresh["p_up_pct"] + fresh["p_down_pct"] == pytest.approx(100, abs=1e-9)

    live_world.rtds.silent = True

    warn = _wait_item(service, lambda i: i["latencyLevel"] == "warn", "warn")
    danger = _wait_item(service, lambda i: i["latencyLevel"] == "danger", "danger")

    streamed = {float(v) for _, v in live_world.rtds.history[SPOT_TOPIC]}
    for item in (warn, danger):
        assert item["isStale"] is True
        assert item["price"] in streamed  # the last good price, never made up
        assert_is_the_fake_market(item, live_world)  # the books are still live and right
    # No information after the silence: the age never restarts past the last point streamed
    # (its stamp plus at most the feed's forgiven lag). Under load the last points received
    # before the silence may still be taken after the first stale board (CI, 2026-11-29: the
    # same price a second later, 947 ms younger): the newer is as true, never made up.
    last_ms = max(int(t) for t, _ in live_world.rtds.history[SPOT_TOPIC])
    assert danger["price"] == warn["price"]
    assert warn["ts"] <= danger["ts"] <= last_ms + MAX_NORMAL_LAG_MS
    assert danger["dataAgeMs"] > 2500 and danger["inputAgesMs"]["price"] > 1000
    assert service.refresher is not None and service.refresher.alive()
