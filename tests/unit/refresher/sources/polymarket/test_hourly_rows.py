"""The live source's hourly rows (issue 49): the hourly market found by its Eastern hour in
words, its books, the exchange price RTDS relays as its price, Binance's candle open as its
price to beat (through the real klines client, from the fake Binance), the model on the
spot rule; stale with the reason when the candle's open and the first exchange price of the
hour disagree. Real servers on loopback (the fakes), a driven clock.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest

from app.markets import SPANS, parse_symbols
from app.refresher.model import probability_up
from app.refresher.sources.polymarket.rtds import SPOT_KEY, TOPICS
from app.refresher.sources.polymarket.source import PolymarketSource
from harness.fake_polymarket import FakePolymarket, running
from harness.spans import FIVE_MINUTES
from tests.support.live_source import Clock, sources_on, wait_for

T0 = 1_800_000_000  # a multiple of 3600: an hour, and a 5-minute window, start here
HOURLY = SPANS["1h"]
BTC = parse_symbols("BTC")
NOW = T0 + 10.5
STALE_AFTER_MS = 3000
OPEN = Decimal("95012.34")  # the candle's open: the first trade of the hour
# The exchange price at T0 + 10 s, the row's price: 0.6 % over the open, about one standard
# deviation of the hour left, so P(up) is far from a coin's (a sign slip cannot pass).
LAST = 95582.41
Row = dict[str, Any]


@pytest.fixture
def world() -> Iterator[tuple[FakePolymarket, Clock]]:
    """The fakes on the test's clock (the fake Binance answers candles opened by it)."""
    clock = Clock(NOW)
    with running(auto_markets=True, clock=clock) as fake:
        rng, value = random.Random(7), float(OPEN)
        points: list[tuple[int, Decimal | str | float]] = []
        for t in range(T0 - 900, T0 + 11):
            value *= math.exp(rng.gauss(0.0, 1e-4))
            points.append((t * 1000, Decimal(f"{value:.2f}")))
        fake.rtds.seed(TOPICS[SPOT_KEY], points, BTC[0].chainlink)
        fake.clob_ws.keep_alive(0.1)
        yield fake, clock


def _hourly_row(source: PolymarketSource, world: FakePolymarket, clock: Clock, ready: str) -> Row:
    """The hourly row once the source is subscribed, the exchange prices of the hour sent,
    and ``ready`` holds: ``priced`` (a probability on the candle's open), else a reason
    containing ``ready``."""
    wait_for(lambda: source.rows(clock())[0].price is not None, "the spot subscribed")
    world.rtds.send_exchange_price(T0 * 1000 + 300, OPEN, BTC[0].chainlink)
    world.rtds.send_exchange_price(T0 * 1000 + 10_000, Decimal(str(LAST)), BTC[0].chainlink)
    seen: list[Row] = []

    def done() -> bool:
        seen[:] = [source.rows(clock())[1].as_json()]
        row = seen[0]
        if ready == "priced":
            priced = row["p_up_pct"] is not None and row["up_bid"] is not None
            # Both exchange prices of the hour arrived (the first checks the open).
            return priced and row["priceToBeat"] == float(OPEN) and row["price"] == LAST
        return any(ready in why for why in row["suspect"] or ())

    wait_for(done, f"the hourly row {ready}")
    return seen[0]


def test_an_hourly_row_prices_the_exchange_price_against_the_candles_open(
    world: tuple[FakePolymarket, Clock],
) -> None:
    fake, clock = world
    fake.binance.set_candle("BTCUSDT", "1h", T0 * 1000, str(OPEN), "95600", "94900", str(LAST))
    with sources_on(fake, spans=(FIVE_MINUTES, HOURLY), stale_after_ms=STALE_AFTER_MS) as make:
        source = make(clock)
        row = _hourly_row(source, fake, clock, "priced")
    market = fake.market_of("BTC", T0, HOURLY)
    assert market is not None
    assert row["window"] == "1h" and row["slug"] == HOURLY.slugs("BTC", T0)[0]
    assert (row["windowStart"], row["windowEnd"]) == (T0, T0 + 3600)
    assert row["rem_secs"] == pytest.approx(3600 - 10.5)
    assert (row["up_token_id"], row["down_token_id"]) == market.tokens
    assert (row["up_bid"], row["up_ask"]) == fake.best(market.up_token)
    assert row["price"] == LAST and row["priceToBeat"] == float(OPEN)
    assert row["sources"]["price"] == "rtds:crypto_prices"
    assert row["sources"]["priceToBeat"] == "binance:klines"
    assert row["sources"]["model"] == "digital-option:spot"
    assert int(NOW * 1000) - row["ts"] <= STALE_AFTER_MS and not row["suspect"]
    # The digital model on the exchange price, 3,589.5 s from the price's own second, at a
    # sigma anywhere from half to twice the spot's 1e-4 per root second, within 2 points.
    tau = T0 + 3600 - (T0 + 10)
    band = [100 * probability_up(LAST, float(OPEN), tau, s) for s in (0.5e-4, 2e-4)]
    assert min(band) - 2 <= row["p_up_pct"] <= max(band) + 2, (row["p_up_pct"], band)


def test_a_candle_open_the_exchange_contradicts_keeps_the_row_stale_with_the_reason(
    world: tuple[FakePolymarket, Clock],
) -> None:
    fake, clock = world
    wrong = "96012.34"  # 1 % over the first exchange price of the hour
    fake.binance.set_candle("BTCUSDT", "1h", T0 * 1000, wrong, "96100", "95900", "96020")
    with sources_on(fake, spans=(FIVE_MINUTES, HOURLY), stale_after_ms=STALE_AFTER_MS) as make:
        source = make(clock)
        row = _hourly_row(source, fake, clock, "the candle's open 96012.34 is")
    assert row["priceToBeat"] is None and row["p_up_pct"] is None  # no opinion on it
    assert int(NOW * 1000) - row["ts"] > STALE_AFTER_MS
    assert any("the candle's open 96012.34 is" in why for why in row["suspect"]), row


def test_binance_refusing_the_region_keeps_the_row_stale_with_its_answer(
    world: tuple[FakePolymarket, Clock],
) -> None:
    """No candle to be had (Binance answers 451 where it refuses the region: the reason to
    point BINANCE_REST_URL at its keyless market-data host): stale, saying so, never a
    price to beat made up."""
    fake, clock = world
    fake.binance.set_candle("BTCUSDT", "1h", T0 * 1000, str(OPEN), "95600", "94900", str(LAST))
    fake.binance.refuse = (451, "Service unavailable from a restricted location")
    with sources_on(fake, spans=(FIVE_MINUTES, HOURLY), stale_after_ms=STALE_AFTER_MS) as make:
        source = make(clock)
        row = _hourly_row(source, fake, clock, "restricted location")
    assert row["priceToBeat"] is None and row["p_up_pct"] is None
    assert int(NOW * 1000) - row["ts"] > STALE_AFTER_MS
    assert any("451" in why and "restricted location" in why for why in row["suspect"]), row


def test_a_relayed_price_nothing_checks_any_more_is_not_believed_alone(
    world: tuple[FakePolymarket, Clock],
) -> None:
    """The spot has never been compared with the exchange price (two prices only: no basis)
    and Binance stops answering: 40 s later Binance's own last price is too old to check the
    relay, and the row says that nothing checks its price."""
    fake, clock = world
    fake.binance.set_candle("BTCUSDT", "1h", T0 * 1000, str(OPEN), "95600", "94900", str(LAST))
    with sources_on(fake, spans=(FIVE_MINUTES, HOURLY), stale_after_ms=STALE_AFTER_MS) as make:
        source = make(clock)
        _hourly_row(source, fake, clock, "priced")
        fake.binance.refuse = (429, "Too many requests")
        clock.t = NOW + 40
        row = _hourly_row(source, fake, clock, "nothing checks the exchange price")
    assert int(clock.ms) - row["ts"] > STALE_AFTER_MS
