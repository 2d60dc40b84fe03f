"""The current window's path of each market (``app/board/trail.py``) and its endpoint.

What a page opened mid-window draws from the window's start: kept by each worker from the
boards it receives, seeded once from the bus's history (on ``memory://`` and on a real
redis-server), thinned to the caller's plan.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask

from app.board.snapshot import Snapshot, dumps, parse_snapshot
from app.board.trail import STEP_MS, WindowTrail
from app.bus.base import BoardBus
from app.bus.memory import MemoryBoardBus
from app.bus.redis_bus import RedisBoardBus
from app.markets import parse_symbols, parse_windows
from app.refresher.loop import Refresher
from app.refresher.sources.simulated import SimulatedSource
from app.services import services_of
from app.web import create_app
from harness.processes import RedisServer
from harness.spans import WINDOW_S
from tests.conftest import BASE_CONFIG
from tests.support.contract import SCHEMAS, validated

TRAIL = "/api/probboard/trail"
STALE_MS = 3000
WINDOW_START = 1_800_000_000  # a window's start (a multiple of 300 s)


def board(t: float, symbols: str = "BTC,ETH", age_ms: int = 0) -> dict[str, Any]:
    """A simulated board built at ``t`` (seconds), its rows ``age_ms`` older than it."""
    source = SimulatedSource(seed=3, markets=parse_symbols(symbols))
    document = Refresher(source, MemoryBoardBus(), 500, clock=lambda: t).build()
    for item in document["items"]:
        item["ts"] -= age_ms
    return document


def snapshot(t: float, **kwargs: Any) -> Snapshot:
    return parse_snapshot(dumps(board(t, **kwargs)))


def test_one_point_a_second_per_market_from_each_row() -> None:
    trail = WindowTrail(STALE_MS)
    for i in range(21):  # ten seconds of boards every half second
        trail.add(snapshot(WINDOW_START + 30 + i * 0.5))
    document = json.loads(trail.answer(STEP_MS, None))
    assert [m["symbol"] for m in document["markets"]] == ["BTC", "ETH"]
    built = board(WINDOW_START + 30)["items"][0]
    btc = document["markets"][0]
    assert btc["windowStart"] == WINDOW_START
    assert [p[0] for p in btc["points"]] == [30.0 + i for i in range(11)]
    # As the page computes its own points: P(up) 0-1, the UP mid.
    _, p, mid = btc["points"][0]
    assert p == pytest.approx(built["p_up_pct"] / 100)
    assert mid == pytest.approx((built["up_bid"] + built["up_ask"]) / 2)
    assert SCHEMAS["trail"].validate(document) == {}


def test_each_window_kind_has_its_own_chart_at_its_own_step() -> None:
    """Issue 50, point 4: a board of 15- and 5-minute rows (``WINDOWS=15m,5m``: the
    15-minute rows first) charts both windows, each at its own step (a second for the
    5-minute one, 3 s for the 15-minute one), over its own length; the 5-minute chart is the
    same as without the 15-minute rows (issue 39)."""
    both, alone = WindowTrail(STALE_MS), WindowTrail(STALE_MS)
    clock = [0.0]
    refreshers = [
        Refresher(
            SimulatedSource(parse_symbols("BTC"), seed=3, spans=parse_windows(spans)),
            MemoryBoardBus(),
            500,
            clock=lambda: clock[0],
        )
        for spans in ("15m,5m", "5m")
    ]
    for i in range(13):
        clock[0] = WINDOW_START + 400 + i
        document, five = (refresher.build() for refresher in refreshers)
        assert [item.get("window") for item in document["items"]] == ["15m", None]
        both.add(parse_snapshot(dumps(document)))
        alone.add(parse_snapshot(dumps(five)))
    [market] = json.loads(both.answer(STEP_MS, None))["markets"]
    assert market["windowStart"] == WINDOW_START + 300
    assert [p[0] for p in market["points"]] == [100.0 + i for i in range(13)]
    assert both.answer(STEP_MS, None) == alone.answer(STEP_MS, None)
    fifteen = json.loads(both.answer(STEP_MS, None, "15m"))
    assert fifteen["stepMs"] == 3000  # never finer than the kind's own step
    [market] = fifteen["markets"]
    assert market["windowStart"] == WINDOW_START  # the 15-minute window began 400 s ago
    assert [p[0] for p in market["points"]] == [400.0 + 3 * i for i in range(5)]
    assert json.loads(alone.answer(STEP_MS, None, "15m"))["markets"] == []


def test_a_stale_row_is_a_gap_and_a_new_window_starts_afresh() -> None:
    trail = WindowTrail(STALE_MS)
    trail.add(snapshot(WINDOW_START + 10))
    trail.add(snapshot(WINDOW_START + 11, age_ms=STALE_MS + 1))
    points = json.loads(trail.answer(STEP_MS, ("BTC",)))["markets"][0]["points"]
    assert points[1][1:] == [None, None] and points[0][1] is not None
    trail.add(snapshot(WINDOW_START + WINDOW_S + 2))
    market = json.loads(trail.answer(STEP_MS, ("BTC",)))["markets"][0]
    assert market["windowStart"] == WINDOW_START + WINDOW_S
    assert [p[0] for p in market["points"]] == [2.0]
    # A late board of the window before does not bring it back.
    trail.add(snapshot(WINDOW_START + 20))
    assert json.loads(trail.answer(STEP_MS, ("BTC",)))["markets"][0] == market


def test_the_history_goes_before_what_the_worker_saw() -> None:
    trail = WindowTrail(STALE_MS)
    trail.add(snapshot(WINDOW_START + 50))
    trail.seed([snapshot(WINDOW_START + t) for t in (5, 6, 50, 51)])
    points = json.loads(trail.answer(STEP_MS, ("ETH",)))["markets"][0]["points"]
    assert [p[0] for p in points] == [5.0, 6.0, 50.0]
    assert trail.seeded


def test_a_plan_gets_no_finer_a_path_than_its_polls() -> None:
    trail = WindowTrail(STALE_MS)
    for i in range(31):
        trail.add(snapshot(WINDOW_START + i))
    points = json.loads(trail.answer(5000, ("BTC",)))["markets"][0]["points"]
    # Every fifth second, and the newest point (what /latest shows now).
    assert [p[0] for p in points] == [0.0, 5.0, 10.0, 15.0, 20.0, 25.0, 30.0]
    points = json.loads(trail.answer(7000, ("BTC",)))["markets"][0]["points"]
    assert [p[0] for p in points] == [0.0, 7.0, 14.0, 21.0, 28.0, 30.0]


@pytest.fixture(params=["memory", "redis"])
def bus(request: pytest.FixtureRequest) -> Iterator[BoardBus]:
    if request.param == "memory":
        yield MemoryBoardBus()
        return
    server: RedisServer = request.getfixturevalue("fresh_redis")
    found = RedisBoardBus(server.url)
    yield found
    found.close()


def test_the_bus_gives_one_board_per_step_of_its_history(bus: BoardBus) -> None:
    start_ms = WINDOW_START * 1000
    for i in range(40):  # twenty seconds, a board every half second
        bus.publish(dumps(board(WINDOW_START + i * 0.5)))
    sampled = bus.sampled(start_ms + 2000, start_ms + 9000, 2000)
    assert [s.seq for s in sampled] == [start_ms + t for t in (2000, 4000, 6000, 8000)]
    assert bus.sampled(start_ms - 60_000, start_ms - 1, 1000) == []


def app_on(redis_url: str, tmp_path: Path, windows: str = "5m") -> Flask:
    config = {"REDIS_URL": redis_url, "DATABASE_URL": f"sqlite:///{tmp_path / 'a.db'}"}
    return create_app({**BASE_CONFIG, "SYMBOLS": "BTC,ETH", "WINDOWS": windows, **config})


def publish_recent(bus: BoardBus, seconds: int, windows: str = "5m") -> float:
    """Boards every half second over the last ``seconds``, by one simulated source walking
    on (not one warmed up afresh per board, as ``board`` does); the first one's time."""
    first = time.time() - seconds
    at = first
    spans = parse_windows(windows)
    source = SimulatedSource(seed=3, markets=parse_symbols("BTC,ETH"), spans=spans)
    refresher = Refresher(source, MemoryBoardBus(), 500, clock=lambda: at)
    for i in range(seconds * 2):
        at = first + i * 0.5
        bus.publish(dumps(refresher.build()))
    return first


def test_a_worker_started_mid_window_answers_from_the_history(
    fresh_redis: RedisServer, tmp_path: Path
) -> None:
    """Boards published before the worker subscribed are in its first answer, at the
    guest's step (its refresh interval)."""
    publisher = RedisBoardBus(fresh_redis.url)
    try:
        first = publish_recent(publisher, 60)
    finally:
        publisher.close()
    app = app_on(fresh_redis.url, tmp_path)
    try:
        response = app.test_client().get(TRAIL)
        assert response.status_code == 200, response.data
        assert "X-RateLimit-Limit" in response.headers  # a guest read, limited as one
        document = validated("trail", response.data)
        assert document["stepMs"] == 5000
        btc = document["markets"][0]
        # From the first board of the window (or of the history), at the guest's step.
        since = max(first, btc["windowStart"]) - btc["windowStart"]
        seconds = [p[0] for p in btc["points"]]
        assert seconds[0] == pytest.approx(since, abs=1.01), (since, seconds)
        gaps = [b - a for a, b in itertools.pairwise(seconds[:-1])]
        assert all(g >= 4.9 for g in gaps), seconds
    finally:
        services_of(app).bus.close()


def test_the_trail_endpoint_takes_a_symbol_and_a_key_plan(tmp_path: Path) -> None:
    app = app_on("memory://", tmp_path)
    publish_recent(services_of(app).bus, 10)
    client = app.test_client()
    document = validated("trail", client.get(TRAIL + "?symbol=eth").data)
    assert [m["symbol"] for m in document["markets"]] == ["ETH"]
    refused = client.get(TRAIL + "?symbol=doge")
    assert refused.status_code == 400 and refused.json is not None
    assert refused.json["code"] == "invalid_symbol"
    assert client.get(TRAIL, headers={"X-API-Key": "pbk_nope"}).status_code == 401
    unserved = client.get(TRAIL + "?window=15m")  # this app serves the 5-minute kind only
    assert unserved.status_code == 400 and unserved.json is not None
    assert unserved.json["code"] == "invalid_window"


def test_the_trail_of_another_window_kind(tmp_path: Path) -> None:
    """``?window=15m`` on a service of both kinds: the 15-minute windows' paths, at the
    guest's step; the default window's without it."""
    app = app_on("memory://", tmp_path, windows="5m,15m")
    publish_recent(services_of(app).bus, 20, windows="5m,15m")
    client = app.test_client()
    fifteen = validated("trail", client.get(TRAIL + "?window=15m").data)
    five = validated("trail", client.get(TRAIL).data)
    assert [m["symbol"] for m in fifteen["markets"]] == ["BTC", "ETH"]
    assert fifteen["markets"][0]["windowStart"] % 900 == 0
    assert fifteen["markets"][0]["windowStart"] <= five["markets"][0]["windowStart"]
    assert fifteen["markets"][0]["points"] != five["markets"][0]["points"]
