"""The Chainlink kinds' settlement source behind the settlement interface (issue 49, point 2):
the price now, a window's open and its outcome as the live source holds them, on the fakes
with a driven clock; the Binance candle's source answers the same interface."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from app.markets import SPANS, parse_symbols
from app.refresher.sources.binance.candle_settlement import BinanceCandleSettlement
from app.refresher.sources.binance.klines import KlinesClient
from app.refresher.sources.polymarket.chainlink_settlement import ChainlinkSettlement
from app.refresher.sources.polymarket.rtds import SPOT_KEY, TOPICS
from app.refresher.sources.settlement import SettlementSource
from harness.fake_polymarket import BrownianPath, FakePolymarket, running
from harness.spans import FIVE_MINUTES
from tests.support.live_source import Clock, sources_on, wait_for

T0 = 1_800_000_000
BTC = parse_symbols("BTC")


PATH = BrownianPath(3, 1e-4, 100_000.0, T0 - 600, 1_000)


@pytest.fixture
def world() -> Iterator[FakePolymarket]:
    # Own fakes: the test seeds the spot's history and plays it on (every window listed,
    # spot rule).
    with running(auto_markets=True) as fake:
        fake.rtds.seed_path(PATH, T0 - 600, T0 + 10)
        fake.clob_ws.keep_alive(0.1)
        yield fake


def test_the_chainlink_kinds_answer_the_settlement_interface(world: FakePolymarket) -> None:
    clock = Clock(T0 + 10.5)
    coin = BTC[0]
    with sources_on(world, BTC, spans=(FIVE_MINUTES, SPANS["15m"])) as make:
        source = make(clock)
        five: SettlementSource = source.chainlink["5m"]
        assert set(source.chainlink) == {"5m", "15m"} and five.name == "chainlink"

        def opened() -> bool:
            source.rows(clock())
            return five.opening(coin, T0).value is not None

        wait_for(opened, "the 5-minute window's open")
        spot_at = world.rtds.value_at
        opening = five.opening(coin, T0)
        assert opening.believed == float(spot_at(T0 * 1000) or 0) and opening.doubt is None
        assert opening.via == f"rtds:{TOPICS[SPOT_KEY]}"
        assert five.outcome(coin, T0) is None  # the window is not over
        newest = five.price_now(coin)
        assert newest is not None and newest[1] == float(spot_at(newest[0]) or 0)
        assert five.opening(coin, T0 - 300).value is None  # a window it never saw

        # Past the roll: the next window's open is this one's final price, so the outcome.
        clock.t = T0 + 305.5
        world.rtds.play(PATH, T0 + 305)

        def settled() -> bool:
            source.rows(clock())
            return five.outcome(coin, T0) is not None

        wait_for(settled, "the 5-minute window's outcome")
        start, end = float(spot_at(T0 * 1000) or 0), float(spot_at((T0 + 300) * 1000) or 0)
        assert five.outcome(coin, T0) is (end >= start)
        assert five.opening(coin, T0 + 300).believed == end
        # The 15-minute window is still running: no outcome yet.
        assert source.chainlink["15m"].outcome(coin, T0) is None


def test_a_chainlink_source_refuses_a_kind_that_settles_elsewhere(world: FakePolymarket) -> None:
    clock = Clock(T0 + 10.5)
    with sources_on(world, BTC) as make:
        source = make(clock)
        with pytest.raises(ValueError, match="the 1h windows do not settle on Chainlink"):
            ChainlinkSettlement(SPANS["1h"], source.windows, source.price_to_beat, source.rtds)
        klines = KlinesClient("http://127.0.0.1:9")
        try:
            # Both kinds' sources are one interface (mypy checks the assignment).
            kinds: list[SettlementSource] = [
                source.chainlink["5m"],
                BinanceCandleSettlement(klines, {}, clock),
            ]
        finally:
            klines.close()
        assert [kind.name for kind in kinds] == ["chainlink", "binance-candle"]
