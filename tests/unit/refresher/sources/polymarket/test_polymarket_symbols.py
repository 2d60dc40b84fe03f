"""The live source with several markets (issue 28): BTC, ETH, SOL and XRP on one board.

Against the fakes of all four markets: one CLOB socket and one RTDS socket serve them all;
each row has its own market's tokens, books, spot, price to beat and probability; one
market's silent Chainlink stream makes its row stale while the others stay fresh.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest

from app.markets import parse_symbols
from app.refresher.sources.polymarket.rtds import SPOT_KEY, TOPICS
from app.refresher.sources.polymarket.source import PolymarketSource
from harness.fake_polymarket import FakeMarket, FakePolymarket, running
from harness.spans import WINDOW_S
from tests.support.live_source import Clock, sources_on, wait_for

T0 = 1_800_000_000  # a window start
SPOT_TOPIC = TOPICS[SPOT_KEY]
STALE_AFTER_MS = 3000
MARKETS = parse_symbols("BTC,ETH,SOL,XRP")

Row = dict[str, Any]


@pytest.fixture
def world() -> Iterator[FakePolymarket]:
    # Own fakes: the test silences one symbol's stream in them.
    with running() as fake:
        yield fake


def _seed(world: FakePolymarket, until_s: int) -> dict[str, float]:
    """Fifteen minutes of each market's spot (a small random walk around its start price),
    up to ``T0 + until_s``; returns each market's last value."""
    last = {}
    for i, coin in enumerate(MARKETS):
        rng = random.Random(i)
        value = coin.start_price
        points: list[tuple[int, Decimal | str | float]] = []
        for t in range(T0 - 900, T0 + until_s + 1):
            value *= math.exp(rng.gauss(0.0, 1e-4))
            points.append(((t * 1000), Decimal(f"{value:.6g}")))
        world.rtds.seed(SPOT_TOPIC, points, coin.chainlink)
        last[coin.symbol] = float(Decimal(str(points[-1][1])))
    return last


def _fresh(row: Row, clock: Clock) -> bool:
    return clock.ms - int(row["ts"]) <= STALE_AFTER_MS


def _rows(source: PolymarketSource, clock: Clock) -> list[Row]:
    return [row.as_json() for row in source.rows(clock())]


def _poll(source: PolymarketSource, clock: Clock, predicate: Any, what: str) -> list[Row]:
    """The rows once ``predicate(rows)`` holds (``wait_for``'s bound)."""
    seen: list[list[Row]] = []

    def holds() -> bool:
        seen[:] = [_rows(source, clock)]
        return bool(predicate(seen[0]))

    wait_for(holds, what)
    return seen[0]


def test_four_markets_one_socket_each_row_its_own_and_one_silent_stream_stale_alone(
    world: FakePolymarket,
) -> None:
    listed = {
        coin.symbol: world.list_market(FakeMarket(T0, symbol=coin.symbol)) for coin in MARKETS
    }
    last = _seed(world, 10)
    world.clob_ws.keep_alive(0.1)
    clock = Clock(T0 + 10.5)
    with sources_on(world, markets=MARKETS, stale_after_ms=STALE_AFTER_MS) as make:
        source = make(clock)

        def complete(rows: list[Row]) -> bool:
            return all(_fresh(r, clock) and r["p_up_pct"] is not None for r in rows)

        rows = _poll(source, clock, complete, "four fresh rows with a probability")

        assert [r["symbol"] for r in rows] == ["BTC", "ETH", "SOL", "XRP"]
        for row in rows:
            market = listed[row["symbol"]]
            assert row["slot"] == row["windowStart"] == T0 and row["windowEnd"] == T0 + WINDOW_S
            assert row["slug"] == market.slug
            assert (row["up_token_id"], row["down_token_id"]) == market.tokens
            assert (row["up_bid"], row["up_ask"]) == world.best(market.up_token)
            assert (row["down_bid"], row["down_ask"]) == world.best(market.down_token)
            assert row["price"] == last[row["symbol"]]  # its own Chainlink stream
            assert row["p_up_pct"] + row["p_down_pct"] == 100
        assert len({r["up_token_id"] for r in rows}) == 4
        # One RTDS connection, subscribed to the four streams; one CLOB connection.
        assert len(world.rtds.clients) == 1
        assert world.rtds.subscribed_symbols() == {c.chainlink for c in MARKETS}
        assert len(world.clob_ws.clients) == 1

        # ETH's stream goes silent; the others go on. ETH's row alone goes stale.
        world.rtds.paused_symbols = {"eth/usd"}
        clock.t = T0 + 14.5
        for coin in MARKETS:
            world.rtds.push(SPOT_TOPIC, (T0 + 14) * 1000, last[coin.symbol], coin.chainlink)

        def eth_alone_stale(rows: list[Row]) -> bool:
            fresh = {r["symbol"]: _fresh(r, clock) for r in rows}
            return fresh == {"BTC": True, "ETH": False, "SOL": True, "XRP": True}

        rows = _poll(source, clock, eth_alone_stale, "ETH's row stale, the others fresh")
        eth = rows[1]
        assert eth["price"] == last["ETH"] and eth["inputAgesMs"]["price"] > STALE_AFTER_MS

        # Its stream back: fresh again.
        world.rtds.paused_symbols = set()
        clock.t = T0 + 15.5
        for coin in MARKETS:
            world.rtds.push(SPOT_TOPIC, (T0 + 15) * 1000, last[coin.symbol], coin.chainlink)
        _poll(source, clock, lambda rows: all(_fresh(r, clock) for r in rows), "all fresh")
