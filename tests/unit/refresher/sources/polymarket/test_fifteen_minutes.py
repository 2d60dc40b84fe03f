"""The live source over 5 and 15 minutes (issue 39): one socket of each kind serves both; a
15-minute row has its own slug, tokens, books, price to beat and countdown, and keeps its
window while the 5-minute one rolls."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest

from app.markets import SPANS, parse_symbols
from app.refresher.sources.polymarket.rtds import SPOT_KEY, TOPICS
from app.refresher.sources.polymarket.source import PolymarketSource
from harness.fake_polymarket import FakePolymarket, running
from harness.spans import FIVE_MINUTES
from tests.support.live_source import Clock, sources_on, wait_for

T0 = 1_800_000_000  # a multiple of 900: a 5-minute and a 15-minute window start here
FIFTEEN = SPANS["15m"]
BTC = parse_symbols("BTC")

Row = dict[str, Any]


@pytest.fixture
def world() -> Iterator[FakePolymarket]:
    # Own fakes: the test seeds their spot history.
    with running(auto_markets=True) as fake:  # every window of both lengths listed (spot)
        yield fake


def _seed(world: FakePolymarket, until_s: int) -> float:
    """BTC's spot from 15 minutes before T0 to ``T0 + until_s``; its last value."""
    rng, value = random.Random(7), BTC[0].start_price
    points: list[tuple[int, Decimal | str | float]] = []
    for t in range(T0 - 900, T0 + until_s + 1):
        value *= math.exp(rng.gauss(0.0, 1e-4))
        points.append((t * 1000, Decimal(f"{value:.6g}")))
    world.rtds.seed(TOPICS[SPOT_KEY], points, BTC[0].chainlink)
    return float(Decimal(str(points[-1][1])))


def _rows_once(source: PolymarketSource, clock: Clock, what: str) -> list[Row]:
    """The rows once both have a probability and fresh books."""
    seen: list[list[Row]] = []

    def ready() -> bool:
        seen[:] = [[row.as_json() for row in source.rows(clock())]]
        return all(r["p_up_pct"] is not None and r["up_bid"] is not None for r in seen[0])

    wait_for(ready, what)
    return seen[0]


def test_a_fifteen_minute_row_beside_the_five_minute_one(world: FakePolymarket) -> None:
    _seed(world, 310)
    world.clob_ws.keep_alive(0.1)
    clock = Clock(T0 + 10.5)
    with sources_on(world, spans=(FIVE_MINUTES, FIFTEEN)) as make:
        source = make(clock)
        five, fifteen = _rows_once(source, clock, "both rows with a probability")

        five_market = world.market_of("BTC", T0)
        fifteen_market = world.market_of("BTC", T0, FIFTEEN)
        assert five_market is not None and fifteen_market is not None
        assert "window" not in five and fifteen["window"] == "15m"
        assert five["slug"] == f"btc-updown-5m-{T0}" and five["windowEnd"] == T0 + 300
        assert fifteen["slug"] == f"btc-updown-15m-{T0}" and fifteen["windowEnd"] == T0 + 900
        assert fifteen["slot"] == fifteen["windowStart"] == T0
        assert fifteen["rem_secs"] == pytest.approx(900 - 10.5)
        assert (fifteen["up_token_id"], fifteen["down_token_id"]) == fifteen_market.tokens
        assert fifteen_market.tokens != five_market.tokens
        assert (fifteen["up_bid"], fifteen["up_ask"]) == world.best(fifteen_market.up_token)
        # One coin, one price and (both windows start at T0) one price to beat; the longer
        # window leaves more time to move: its probability is nearer an even chance.
        assert fifteen["price"] == five["price"]
        assert fifteen["priceToBeat"] == five["priceToBeat"] is not None
        # (Two decimals: within a few hundredths of 50 both can round to the same figure.)
        five_off, fifteen_off = abs(five["p_up_pct"] - 50), abs(fifteen["p_up_pct"] - 50)
        assert fifteen_off <= five_off, (five, fifteen)
        if five_off >= 0.05:
            assert fifteen_off < five_off, (five, fifteen)
        assert len(world.rtds.clients) == 1 and len(world.clob_ws.clients) == 1

        # The 5-minute window rolls at T0 + 300; the 15-minute one goes on.
        clock.t = T0 + 305.5

        def rolled() -> bool:
            rows = [row.as_json() for row in source.rows(clock())]
            return rows[0]["slot"] == T0 + 300 and rows[0]["up_bid"] is not None

        wait_for(rolled, "the 5-minute row in its next window")
        five, fifteen = (row.as_json() for row in source.rows(clock()))
        assert fifteen["slot"] == T0 and fifteen["rem_secs"] == pytest.approx(900 - 305.5)
        assert fifteen["slug"] == f"btc-updown-15m-{T0}"
