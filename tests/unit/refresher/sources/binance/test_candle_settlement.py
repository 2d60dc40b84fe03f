"""The hourly kind's settlement source (issue 49, point 2): Binance's candle through the real
klines client from the loopback stand-in, witnessed by the exchange prices as the RTDS feed
keeps them (``ExchangeWitness``), on a driven clock."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from app.markets import MARKETS
from app.refresher.sources.binance.candle_settlement import (
    FINAL_AFTER_S,
    FIRST_PRICE_WAIT_S,
    RETRY_S,
    VIA,
    BinanceCandleSettlement,
)
from app.refresher.sources.binance.klines import KlinesClient
from app.refresher.sources.polymarket.witness import ExchangeWitness
from app.refresher.sources.settlement import Opening
from harness.fake_polymarket.binance import FakeBinance
from tests.unit.refresher.sources.binance.conftest import T0

BTC = MARKETS["BTC"]


class Stage:
    """The fake Binance, BTC's exchange prices and the settlement source on one clock."""

    def __init__(self, binance: FakeBinance) -> None:
        self.now = T0 - 60.0
        self.binance = binance
        binance.clock = lambda: self.now
        self.exchange = ExchangeWitness("btcusdt", lambda: self.now)
        self.klines = KlinesClient(binance.url)
        self.source = BinanceCandleSettlement(self.klines, {"BTC": self.exchange}, lambda: self.now)

    def asked(self) -> int:
        """How many klines requests the fake has answered."""
        return len(self.binance.requests_to("/api/v3/klines"))

    def at(self, t: float) -> Opening:
        """Move the clock to ``t``, run the upkeep, read the open."""
        self.now = t
        self.source.upkeep(BTC, T0, t)
        return self.source.opening(BTC, T0)


@pytest.fixture
def stage(binance: FakeBinance) -> Iterator[Stage]:
    made = Stage(binance)
    try:
        yield made
    finally:
        made.klines.close()


def test_before_the_hour_nothing_is_asked_and_nothing_is_known(stage: Stage) -> None:
    before = stage.asked()
    assert stage.at(T0 - 1.0) == Opening(None)
    assert stage.asked() == before


def test_the_open_comes_from_binance_and_is_believed_when_the_exchange_agrees(
    stage: Stage,
) -> None:
    stage.exchange.add(T0 * 1000 + 400, 66_125.10)  # the first trade price of the hour
    opening = stage.at(T0 + 2.0)
    assert opening == Opening(66123.45, VIA, None)
    assert opening.believed == 66123.45
    assert stage.source.outcome(BTC, T0) is None  # the hour is not over


def test_an_open_the_exchange_contradicts_is_doubted_with_the_reason(stage: Stage) -> None:
    """ETH's price answered for BTC's pair (or any wrong trade): 1 % apart."""
    stage.exchange.add(T0 * 1000 + 400, 66_123.45 * 1.01)
    opening = stage.at(T0 + 2.0)
    assert opening.value == 66123.45 and opening.believed is None
    assert opening.doubt is not None and "100 bp from the first btcusdt price" in opening.doubt
    stage.at(T0 + 3600 + 30.0)
    assert stage.source.outcome(BTC, T0) is None  # never settled on a doubted open


def test_with_no_exchange_price_around_the_hour_binance_stands_alone_after_a_wait(
    stage: Stage,
) -> None:
    """The first exchange price of the hour may be late: the open waits for it (stale, with
    the reason) up to FIRST_PRICE_WAIT_S, then stands alone."""
    stage.exchange.add((T0 - 30) * 1000, 66_000.0)  # before the hour only
    waiting = stage.at(T0 + 2.0)
    assert waiting.believed is None and waiting.doubt is not None
    assert "waiting for the first exchange price" in waiting.doubt
    assert stage.at(T0 + FIRST_PRICE_WAIT_S).believed == 66123.45


def test_a_refusal_is_the_reason_and_the_candle_is_asked_again_after_the_pause(
    stage: Stage,
) -> None:
    stage.binance.refuse = (429, "Too many requests; current limit is 6000 weight per minute.")
    stage.exchange.add(T0 * 1000 + 400, 66_125.10)
    first = stage.asked()
    opening = stage.at(T0 + 1.0)
    assert opening.value is None and opening.doubt is not None
    assert "429" in opening.doubt and "Too many requests" in opening.doubt
    stage.binance.refuse = None
    stage.at(T0 + 1.0 + RETRY_S / 2)  # too soon: not asked
    assert stage.asked() == first + 1
    assert stage.at(T0 + 1.0 + RETRY_S).believed == 66123.45
    assert stage.asked() == first + 2
    stage.at(T0 + 60.0)  # the running candle again: its close witnesses the relayed price
    assert stage.asked() == first + 3


@pytest.mark.parametrize(
    ("close", "up"), [("66250.01", True), ("66123.45", True), ("66123.44", False)]
)
def test_the_outcome_is_the_final_candles_close_against_its_open_ties_up(
    stage: Stage, close: str, up: bool
) -> None:
    stage.at(T0 + 2.0)
    stage.binance.set_candle("BTCUSDT", "1h", T0 * 1000, "66123.45", "66300.00", "66010.12", close)
    stage.at(T0 + 3599.0)  # the close is not asked for before the hour is over
    assert stage.source.outcome(BTC, T0) is None
    stage.at(T0 + 3599.0 + FINAL_AFTER_S)  # nor just after: Binance settles it first
    assert stage.source.outcome(BTC, T0) is None
    stage.at(T0 + 3600.0 + FINAL_AFTER_S)
    assert stage.source.outcome(BTC, T0) is up


def test_a_failed_request_after_the_close_never_makes_the_running_candle_final(
    stage: Stage,
) -> None:
    """The candle read at the start of the hour said UP; the request after the close is
    refused: no outcome (the review found this settled UP), until an answer comes."""
    stage.at(T0 + 2.0)
    stage.binance.set_candle(
        "BTCUSDT", "1h", T0 * 1000, "66123.45", "66300.00", "66010.12", "66000.00"
    )
    stage.binance.refuse = (429, "Too many requests")
    stage.at(T0 + 3700.0)
    assert stage.source.outcome(BTC, T0) is None
    stage.binance.refuse = None
    stage.at(T0 + 3700.0 + RETRY_S)
    assert stage.source.outcome(BTC, T0) is False


def test_the_doubt_on_the_open_outlives_the_witnesss_two_minutes(stage: Stage) -> None:
    """The first exchange price of the hour disagreed; an hour later the witness keeps only
    its last two minutes: the doubt stands, and the hour is never settled on that open."""
    stage.exchange.add(T0 * 1000 + 400, 66_123.45 * 1.01)
    assert stage.at(T0 + 2.0).doubt is not None
    stage.exchange.add((T0 + 3650) * 1000, 66_200.0)  # the witness forgets the hour's start
    assert stage.exchange.first_from(T0 * 1000, 5_000) is None
    assert stage.at(T0 + 3700.0).doubt is not None
    assert stage.source.outcome(BTC, T0) is None


def test_a_relayed_price_far_from_binances_own_last_price_is_doubted(stage: Stage) -> None:
    """The running candle's close is Binance's own last price: the price RTDS relays must be
    near it (a relay that lies; a de-peg the spot's witness would learn is Binance's own)."""
    stage.exchange.add(T0 * 1000 + 400, 66_125.10)
    stage.at(T0 + 2.0)
    assert stage.source.relay_doubt(BTC, T0) is None
    stage.exchange.add((T0 + 3) * 1000, 66_250.01 * 1.01)  # the close is 66250.01
    stage.at(T0 + 2.0 + RETRY_S)
    why = stage.source.relay_doubt(BTC, T0)
    assert why is not None and "100 bp from Binance's own last price 66250.01" in why
    stage.exchange.add(T0 * 1000 + 7_500, 66_249.00)  # the relay honest again
    stage.at(T0 + 2.0 + 2 * RETRY_S)
    assert stage.source.relay_doubt(BTC, T0) is None
