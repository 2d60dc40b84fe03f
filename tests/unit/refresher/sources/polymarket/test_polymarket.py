"""The live source (``BOARD_SOURCE=polymarket``): parsing units, then the source in process
against local fakes of Gamma, the CLOB (REST and market WebSocket), RTDS and the site.

The source runs on a test clock in a made-up window ``T0``; the fakes stamp their prices
with times around ``T0``. Book ages are real (the sockets are real), so polling deadlines
are generous and nothing asserts on elapsed time.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
from flask import Flask

import app.api.latest as latest_view
from app.bus import BoardBus
from app.bus.memory import MemoryBoardBus
from app.markets import shown_price
from app.refresher import clocks
from app.refresher.loop import Refresher
from app.refresher.model import SPOT, TWAP
from app.refresher.sources.polymarket import feed as feed_module
from app.refresher.sources.polymarket import gamma
from app.refresher.sources.polymarket.book import Books
from app.refresher.sources.polymarket.clob import ClobFeed
from app.refresher.sources.polymarket.discovery import DISCOVERY_RETRY_S
from app.refresher.sources.polymarket.price_series import PriceSeries
from app.refresher.sources.polymarket.price_to_beat import T0_REPORT_WAIT_S
from app.refresher.sources.polymarket.rtds import TWAP_KEYS, RtdsFeed
from app.refresher.sources.polymarket.source import PolymarketSource
from app.refresher.volatility import SCALE_BOUNDS, SIGMA_WINDOW_S
from app.services import services_of
from app.web import create_app
from harness.fake_polymarket import (
    SPOT_HISTORY_TOPIC,
    SPOT_TOPIC,
    TWAP30_TOPIC,
    TWAP_TOPIC,
    FakeBook,
    FakeMarket,
    FakePolymarket,
    FakeRtds,
    exact,
    iso,
    running,
    scaled,
)
from harness.processes import wait_until
from harness.spans import FIVE_MINUTES
from tests.conftest import BASE_CONFIG
from tests.support.contract import validated
from tests.support.live_source import (
    BTC_ONLY,
    Clock,
    MakeSource,
    Skipping,
    first_row,
    latest_ms,
    poll,
    skipping,
    sources_on,
    wait_for,
)

TWAP60 = TWAP_KEYS[60]

# A window start: 1_800_000_000 is a multiple of 300.
T0 = 1_800_000_000
NEXT = T0 + 300
K = Decimal("100000.00")  # the price in force at T0 in most tests
WIGGLE = Decimal("5")  # the seeded spot history: +-5 around its level, 1-second returns ~1e-4
MIN_RETURNS = 60  # the README: no probability until 60 one-second spot returns exist
STALE_AFTER_MS = 3000  # the source's default: a row lacking an input is older than this
POLL_S = 30.0  # generous: another process may be loading the machine

Row = dict[str, Any]


# -- helpers ------------------------------------------------------------------------------


def from_socket(row: Row) -> bool:
    """Both books are there and came over the CLOB WebSocket."""
    sources = row["sources"]
    return bool(sources["upBook"] == "clob-ws" and sources["downBook"] == "clob-ws")


def seed_history(world: FakePolymarket, end_s: int, level: Decimal) -> None:
    """``SIGMA_WINDOW_S`` (15 minutes) of 1-second spot points up to second ``end_s``
    (excluded): a steady zigzag of +-``WIGGLE`` around ``level``, no trend. Without at least
    ``MIN_RETURNS`` one-second spot returns the source shows no probability."""
    start = end_s - SIGMA_WINDOW_S
    world.rtds.seed(
        SPOT_TOPIC,
        [
            ((start + i) * 1000, level + (WIGGLE if i % 2 else -WIGGLE))
            for i in range(end_s - start)
        ],
    )


def seed_around(
    world: FakePolymarket,
    topic: str,
    t0: int,
    at_t0: Decimal,
    seconds: range = range(-3, 3),
    history: bool = True,
) -> None:
    """1-second points around ``t0`` whose value at ``t0`` is ``at_t0`` (one more per second);
    on the spot topic preceded by 15 minutes of history (``seed_history``) unless ``history``
    is False (a feed that has nothing before ``seconds``)."""
    if history and topic == SPOT_TOPIC:
        seed_history(world, t0 + seconds.start, at_t0 + seconds.start)
    world.rtds.seed(topic, [((t0 + k) * 1000, at_t0 + k) for k in seconds])


def operation_sent(world: FakePolymarket, operation: str, tokens: tuple[str, str]) -> bool:
    """Whether the documented ``operation`` frame for exactly ``tokens`` reached the CLOB."""
    return any(
        isinstance(frame, dict)
        and set(frame) == {"assets_ids", "operation", "custom_feature_enabled"}
        and frame["operation"] == operation
        and frame["custom_feature_enabled"] is True
        and sorted(frame["assets_ids"]) == sorted(tokens)
        for frame in world.clob_ws.operations
    )


def assert_books_are_the_fakes(row: Row, world: FakePolymarket, market: FakeMarket) -> None:
    assert row["up_token_id"] == market.up_token
    assert row["down_token_id"] == market.down_token
    assert (row["up_bid"], row["up_ask"]) == world.best(market.up_token)
    assert (row["down_bid"], row["down_ask"]) == world.best(market.down_token)


def assert_adds_up(row: Row) -> None:
    assert row["p_up_pct"] is not None and row["p_down_pct"] is not None
    assert row["p_up_pct"] + row["p_down_pct"] == pytest.approx(100, abs=1e-9)


def assert_spot_volatility(row: Row) -> None:
    """The model's sigma and its measured horizon scale are there (they come from the spot)."""
    assert math.isfinite(row["sigma"]) and row["sigma"] > 0
    assert SCALE_BOUNDS[0] <= row["sigmaScale"] <= SCALE_BOUNDS[1]


@pytest.fixture
def world() -> Iterator[FakePolymarket]:
    # Own fakes: each test lists its markets and switches its faults on.
    with running() as fake:
        yield fake


@pytest.fixture
def make_source(
    world: FakePolymarket,
) -> Iterator[Callable[[Callable[[], float]], PolymarketSource]]:
    """Sources on the fakes, closed (threads stopped) before the fakes stop."""
    with sources_on(world) as make:
        yield make


@pytest.fixture
def monotonic() -> Iterator[Skipping]:
    """The live source's monotonic clock, skippable; asked for before ``make_source`` so
    the sources stop before the real clock is back."""
    with skipping() as clock:
        yield clock


@pytest.fixture
def fast_reconnect(monkeypatch: pytest.MonkeyPatch) -> None:
    """Cap the reconnect backoff at 1 s so outage tests stay short."""
    monkeypatch.setattr(feed_module, "BACKOFF_MAX_S", 1.0)


# -- gamma: discovery and parsing --------------------------------------------------------


@pytest.mark.parametrize("outcomes", [("Up", "Down"), ("Down", "Up")])
def test_parse_event_pairs_token_ids_by_label(outcomes: tuple[str, str]) -> None:
    fake = FakeMarket(T0, outcomes=outcomes)
    event = fake.event()
    raw = event["markets"][0]
    assert isinstance(raw["outcomes"], str) and isinstance(raw["clobTokenIds"], str)
    first = fake.up_token if outcomes[0] == "Up" else fake.down_token
    assert json.loads(raw["clobTokenIds"])[0] == first  # the fake keeps the pairing

    market = gamma.parse_event(event, T0, BTC_ONLY[0], FIVE_MINUTES)

    assert (market.up_token_id, market.down_token_id) == fake.tokens
    assert market.window_start == T0
    assert market.slug == f"btc-updown-5m-{T0}"
    assert market.condition_id == fake.condition
    assert market.price_to_beat is None


def _with_market(**changes: Any) -> dict[str, Any]:
    event = FakeMarket(T0).event()
    event["markets"][0].update(changes)
    return event


@pytest.mark.parametrize(
    "event",
    [
        pytest.param(_with_market(outcomes='["Up", "Down"'), id="outcomes-not-json"),
        pytest.param(_with_market(outcomes='"Up"'), id="outcomes-not-a-list"),
        pytest.param(_with_market(outcomes='["Yes", "No"]'), id="no-up"),
        pytest.param(_with_market(outcomes='["Up", "Up"]'), id="no-down"),
        pytest.param(_with_market(clobTokenIds='["0xabc", "12"]'), id="token-id-not-decimal"),
        pytest.param(_with_market(clobTokenIds='["1.5e76", "12"]'), id="token-id-float"),
        pytest.param(_with_market(clobTokenIds="[12, "), id="token-ids-not-json"),
        pytest.param(_with_market(clobTokenIds='["12"]'), id="one-token-id"),
        pytest.param({"slug": "x"}, id="markets-missing"),
        pytest.param({"slug": "x", "markets": []}, id="markets-empty"),
        pytest.param({"slug": "x", "markets": ["oops"]}, id="market-not-an-object"),
        pytest.param([FakeMarket(T0).event()], id="event-is-a-list"),
    ],
)
def test_parse_event_rejects_garbage(event: Any) -> None:
    with pytest.raises(gamma.UpstreamError):
        gamma.parse_event(event, T0, BTC_ONLY[0], FIVE_MINUTES)


@pytest.mark.parametrize(
    ("rule", "with_config", "expected"),
    [
        (TWAP, True, TWAP),  # cryptoMarketConfig.twapEnabled
        (TWAP, False, TWAP),  # resolutionSource ...-twap-60s-streams only
        (SPOT, True, SPOT),  # twapEnabled false
        (SPOT, False, SPOT),  # an older market: a spot stream, no config
    ],
)
def test_settlement_rule_is_read_from_the_market(
    rule: str, with_config: bool, expected: str
) -> None:
    event = FakeMarket(T0, rule=rule, with_config=with_config).event()
    assert ("cryptoMarketConfig" in event["markets"][0]) is with_config

    assert gamma.settlement_rule(event["markets"][0]) == expected
    assert gamma.parse_event(event, T0, BTC_ONLY[0], FIVE_MINUTES).rule == expected


def test_gamma_client_404_is_none_500_is_an_error(world: FakePolymarket) -> None:
    listed = world.list_market(FakeMarket(T0, outcomes=("Down", "Up")))
    with httpx.Client(timeout=3.0) as http:
        client = gamma.GammaClient(world.gamma.url, http, BTC_ONLY[0], FIVE_MINUTES)
        found = client.window(T0)
        assert found is not None and (found.up_token_id, found.down_token_id) == listed.tokens
        assert client.window(NEXT) is None
        world.gamma.mode = "error"
        with pytest.raises(gamma.UpstreamError):
            client.window(T0)
    assert world.gamma.lookups() == [T0, NEXT, T0]


# -- books: best levels ------------------------------------------------------------------


def _levels(*prices: str) -> list[dict[str, str]]:
    return [{"price": p, "size": "10"} for p in prices]


@pytest.mark.parametrize(
    ("bids", "asks"),
    [
        (("0.48", "0.50", "0.52"), ("0.60", "0.57", "0.55")),  # as the CLOB sends them
        (("0.52", "0.50", "0.48"), ("0.55", "0.57", "0.60")),  # as some docs say
        (("0.50", "0.52", "0.48"), ("0.57", "0.55", "0.60")),  # no order at all
    ],
    ids=["bids-asc-asks-desc", "bids-desc-asks-asc", "shuffled"],
)
def test_best_bid_is_the_max_and_best_ask_the_min(
    bids: tuple[str, ...], asks: tuple[str, ...]
) -> None:
    books = Books()
    books.snapshot("7", _levels(*bids), _levels(*asks), "test")
    quote = books.quote("7")
    assert quote is not None
    assert (quote.bid, quote.ask, quote.via) == (0.52, 0.55, "test")


def test_an_empty_side_is_none() -> None:
    books = Books()
    books.snapshot("1", [], _levels("0.6"), "test")
    books.snapshot("2", _levels("0.4"), [], "test")
    books.snapshot("3", None, None, "test")
    assert [(q.bid, q.ask) for q in map(books.quote, "123") if q] == [
        (None, 0.6),
        (0.4, None),
        (None, None),
    ]


def test_size_zero_removes_a_level() -> None:
    books = Books()
    books.snapshot("7", _levels("0.50", "0.52"), _levels("0.57", "0.55"), "rest")
    books.change("7", "BUY", "0.52", "0", "ws")
    books.change("7", "SELL", "0.55", "0", "ws")
    quote = books.quote("7")
    assert quote is not None and (quote.bid, quote.ask, quote.via) == (0.50, 0.57, "ws")

    books.change("7", "BUY", "0.53", "4", "ws")  # a new, better bid
    books.change("7", "BUY", "0.50", "0", "ws")
    books.change("7", "SELL", "0.57", "0", "ws")  # the last ask goes
    quote = books.quote("7")
    assert quote is not None and (quote.bid, quote.ask) == (0.53, None)


def test_garbage_levels_are_ignored() -> None:
    garbage: list[Any] = [
        {"price": "abc", "size": "1"},
        {"price": "NaN", "size": "1"},
        {"price": "Infinity", "size": "1"},
        {"price": "-0.2", "size": "1"},
        {"price": "1.5", "size": "1"},
        {"price": "0.93", "size": "NaN"},
        {"price": "0.94", "size": "-3"},
        {"price": "0.95"},
        {"size": "3"},
        "0.96",
        None,
        ["0.97", "1"],
    ]
    books = Books()
    books.snapshot("7", [*garbage, *_levels("0.40")], [*garbage, *_levels("0.60")], "test")
    quote = books.quote("7")
    assert quote is not None and (quote.bid, quote.ask) == (0.40, 0.60)

    for price, size in [("NaN", "5"), ("1.01", "5"), ("-1", "5"), ("0.45", "abc"), (None, "1")]:
        books.change("7", "BUY", price, size, "test")
        books.change("7", "SELL", price, size, "test")
    quote = books.quote("7")
    assert quote is not None and (quote.bid, quote.ask) == (0.40, 0.60)


def test_a_change_before_any_snapshot_is_ignored() -> None:
    books = Books()
    books.change("7", "BUY", "0.5", "10", "ws")
    assert books.quote("7") is None


def test_a_change_with_an_unknown_side_is_ignored() -> None:
    """Only BUY (bids) and SELL (asks) exist; anything else must not invent an ask."""
    books = Books()
    books.snapshot("7", _levels("0.40"), _levels("0.60"), "test")
    for side in ("", "HOLD", "bid?"):
        books.change("7", side, "0.45", "10", "ws")
    quote = books.quote("7")
    assert quote is not None and (quote.bid, quote.ask) == (0.40, 0.60)


# -- rtds: values ------------------------------------------------------------------------


def _rtds() -> RtdsFeed:
    # never started; its clock a little after the points' stamps (none is from the future)
    return RtdsFeed("ws://127.0.0.1:9", threading.Event(), BTC_ONLY, clock=lambda: T0 + 10.0)


def _believed(feed: RtdsFeed, key: str, value: float) -> None:
    """A point already believed 10 s before T0: a lone point then has a level to agree with
    (an empty series waits for two that agree)."""
    feed.series[key].add((T0 - 10) * 1000, value)


@pytest.mark.parametrize("value", ["95123.45", "95123.456789012345678901", "101234.999999999"])
def test_twap_value_is_full_accuracy_value_over_1e18(value: str) -> None:
    feed = _rtds()
    _believed(feed, TWAP60, float(value))
    update = FakeRtds.update(TWAP_TOPIC, T0 * 1000, Decimal(value))
    assert update["payload"]["full_accuracy_value"] == str(int(Decimal(value) * 10**18))

    feed.handle(update)

    assert feed.series[TWAP60].latest() == (T0 * 1000, float(Decimal(value)))
    assert feed.series[SPOT].latest() is None


def test_full_accuracy_value_wins_over_the_rounded_value() -> None:
    feed = _rtds()
    _believed(feed, TWAP60, 95000.0)
    feed.handle(
        {
            "topic": TWAP_TOPIC,
            "type": "update",
            "payload": {
                "symbol": "btc/usd",
                "timestamp": T0 * 1000,
                "value": 95000.0,
                "full_accuracy_value": scaled("95123.456789"),
                "window_s": 60,
            },
        }
    )
    assert feed.series[TWAP60].latest() == (T0 * 1000, 95123.456789)


def test_first_message_data_list_latest_is_the_last_point() -> None:
    feed = _rtds()
    points = [(T0 * 1000 + i * 1000, Decimal("100000") + i) for i in range(-5, 1)]
    # The spot's history snapshot comes under ``crypto_prices``, as the server sends it.
    feed.handle(FakeRtds.first_message(SPOT_TOPIC, points, wire_topic=SPOT_HISTORY_TOPIC))

    assert feed.series[SPOT].latest() == (T0 * 1000, 100000.0)
    assert feed.series[SPOT].at((T0 - 3) * 1000, 0) == 99997.0  # the history is kept


def test_a_history_snapshot_after_live_points_is_merged_in_time_order() -> None:
    feed = _rtds()
    feed.handle(FakeRtds.update(SPOT_TOPIC, (T0 + 1) * 1000, Decimal("100001")))
    points = [(T0 * 1000 + i * 1000, Decimal("100000") + i) for i in range(-5, 1)]
    feed.handle(FakeRtds.first_message(SPOT_TOPIC, points, wire_topic=SPOT_HISTORY_TOPIC))

    series = feed.series[SPOT]
    assert series.latest() == ((T0 + 1) * 1000, 100001.0)  # the live point stays the newest
    assert series.at((T0 - 3) * 1000, 0) == 99997.0  # the late history is not dropped
    assert series.around(T0 * 1000) == ((T0 * 1000, 100000.0), ((T0 + 1) * 1000, 100001.0))


def test_an_error_frame_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    feed = _rtds()
    frame = {"statusCode": 400, "body": {"message": "Invalid topic: crypto_prices_nope"}}
    with caplog.at_level("WARNING"):
        for _ in range(3):
            feed.handle(frame)
    logged = [r for r in caplog.records if "Invalid topic: crypto_prices_nope" in r.getMessage()]
    assert len(logged) == 1
    assert all(series.latest() is None for series in feed.series.values())


@pytest.mark.parametrize("garbage", ["NaN", "Infinity", "-Infinity", scaled("-95123.45"), "0"])
def test_a_garbage_full_accuracy_value_is_never_a_price(garbage: str) -> None:
    """A garbage exact TWAP value is dropped: no price at all, or the last valid one kept."""
    # A NaN or negative price would poison the model (and NaN the volatility for good); the
    # rounded ``value`` beside it is no substitute: the exact value is the one that settles.

    def garbage_at(ts_s: int) -> dict[str, Any]:
        return {
            "topic": TWAP_TOPIC,
            "type": "update",
            "payload": {
                "symbol": "btc/usd",
                "timestamp": ts_s * 1000,
                "value": 95123.46,
                "full_accuracy_value": garbage,
            },
        }

    feed = _rtds()
    feed.handle(garbage_at(T0))
    assert feed.series[TWAP60].latest() is None  # no price to beat from it

    _believed(feed, TWAP60, 95100.0)
    feed.handle(FakeRtds.update(TWAP_TOPIC, (T0 + 1) * 1000, Decimal("95100.123456")))
    feed.handle(garbage_at(T0 + 2))
    assert feed.series[TWAP60].latest() == ((T0 + 1) * 1000, 95100.123456)  # the valid one
    # Nothing was kept at the garbage's time either: a valid point there is taken.
    feed.handle(FakeRtds.update(TWAP_TOPIC, (T0 + 2) * 1000, Decimal("95200.5")))
    assert feed.series[TWAP60].latest() == ((T0 + 2) * 1000, 95200.5)


def test_other_symbols_topics_and_shapes_are_ignored() -> None:
    feed = _rtds()
    for message in [
        {"topic": SPOT_TOPIC, "payload": {"symbol": "eth/usd", "timestamp": 1, "value": 3000}},
        {"topic": "crypto_prices", "payload": {"symbol": "eth/usd", "timestamp": 1, "value": 9}},
        {
            "topic": "crypto_prices_binance",
            "payload": {"symbol": "btc/usd", "timestamp": 1, "value": 9},
        },
        {"topic": SPOT_TOPIC, "payload": {"symbol": "btc/usd", "timestamp": "1", "value": 9}},
        {"topic": SPOT_TOPIC, "payload": {"symbol": "btc/usd", "timestamp": 1, "value": "x"}},
        {"topic": SPOT_TOPIC, "payload": {"symbol": "btc/usd", "timestamp": 1, "value": -9}},
        {"topic": SPOT_TOPIC, "payload": "btc/usd"},
        {"topic": SPOT_TOPIC},
        "PONG",
        [None, 3],
    ]:
        feed.handle(message)
    assert all(series.latest() is None for series in feed.series.values())


def test_price_series_latch_tolerance() -> None:
    series = PriceSeries()
    for ts, value in [(10_000, 1.0), (12_000, 2.0), (20_000, 3.0)]:
        series.add(ts, value)
    series.add(20_000, 9.0)  # duplicate: ignored
    series.add(30_000_000, 9.0)  # far ahead: the history is cut behind it
    series.add(15_000, 9.0)  # older than the history kept: ignored
    assert series.latest() == (30_000_000, 9.0)
    assert series.around(20_000) == (None, (30_000_000, 9.0))  # the old points were cut

    series = PriceSeries()
    for ts, value in [(10_000, 1.0), (12_000, 2.0), (20_000, 3.0)]:
        series.add(ts, value)
    assert series.latest() == (20_000, 3.0)
    assert series.at(12_000, 0) == 2.0  # exactly at
    assert series.at(13_000, 1_000) == 2.0  # the value in force, within tolerance
    assert series.at(13_001, 1_000) is None  # 12 000 too old, 20 000 too far ahead
    assert series.at(15_000, 0) is None
    assert series.at(19_500, 1_000) == 3.0  # nothing before within tolerance: the next one
    assert series.at(9_000, 1_000) == 1.0
    assert series.at(8_999, 1_000) is None
    assert series.at(30_000, 5_000) is None


# -- the source against the fakes ---------------------------------------------------------


@pytest.mark.parametrize("outcomes", [("Down", "Up"), ("Up", "Down")])
def test_row_carries_the_fake_markets_tokens_and_best_levels(
    world: FakePolymarket,
    make_source: MakeSource,
    outcomes: tuple[str, str],
) -> None:
    market = world.list_market(FakeMarket(T0, outcomes=outcomes))
    seed_around(world, SPOT_TOPIC, T0, K)
    clock = Clock(T0 + 2.5)
    source = make_source(clock)

    row = poll(source, clock, lambda r: from_socket(r) and r["priceToBeat"] is not None, "books")

    assert_books_are_the_fakes(row, world, market)
    # The fake's best levels are the LAST array elements; Gamma's snapshot says 0.01/0.99.
    assert (row["up_bid"], row["up_ask"], row["down_bid"], row["down_ask"]) == (
        0.53,
        0.55,
        0.45,
        0.47,
    )
    assert row["symbol"] == "BTC" and row["source"] == "polymarket"
    assert row["slot"] == T0 and row["windowStart"] == T0 and row["windowEnd"] == NEXT
    assert row["slug"] == market.slug
    assert row["settlement"] == "spot" and row["twapLookbackS"] is None
    assert row["rem_secs"] == pytest.approx(297.5)
    assert row["price"] == float(K + 2) and row["priceToBeat"] == float(K)
    assert_adds_up(row)
    assert_spot_volatility(row)
    assert row["sources"] == {
        "market": "gamma",
        "upBook": "clob-ws",
        "downBook": "clob-ws",
        "price": f"rtds:{SPOT_TOPIC}",
        "priceToBeat": f"rtds:{SPOT_TOPIC}",
        "model": "digital-option:spot",
    }
    ages = row["inputAgesMs"]
    assert set(ages) == {"upBook", "downBook", "price"}
    # From when the point was RECEIVED (on the source's clock, static here), never from its
    # own stamp (which is 500 ms old).
    assert ages["price"] == 0
    assert row["ts"] == clock.ms - max(ages.values())  # as old as the oldest input
    assert row["suspect"] == []  # every input agrees with its witnesses

    # The documented subscriptions.
    subscription = world.clob_ws.subscriptions[-1]
    assert subscription["type"] == "market" and subscription["custom_feature_enabled"] is True
    assert set(subscription["assets_ids"]) == set(market.tokens)
    assert world.rtds.subscribed_topics() == {SPOT_TOPIC, TWAP_TOPIC, TWAP30_TOPIC}
    assert world.rtds.bad_subscriptions == []
    *chainlink, exchange = world.rtds.subscriptions[-1]["subscriptions"]
    for sub in chainlink:
        assert sub["type"] == "*" and json.loads(sub["filters"]) == {"symbol": "btc/usd"}
    assert exchange == {"topic": "crypto_prices", "type": "update", "filters": "btcusdt"}

    # The refresher publishes it (the bus validates it as a worker would).
    bus = MemoryBoardBus()
    assert Refresher(source, bus, 500, clock=clock).tick() is True
    snapshot = bus.latest()
    assert snapshot is not None
    assert snapshot.document["items"][0]["up_token_id"] == market.up_token


def test_probability_moves_with_the_price_against_the_price_to_beat(
    world: FakePolymarket, make_source: MakeSource
) -> None:
    world.list_market(FakeMarket(T0))
    seed_around(world, SPOT_TOPIC, T0, K, range(-3, 1))
    clock = Clock(T0 + 3.5)
    source = make_source(clock)
    row = poll(source, clock, lambda r: r["priceToBeat"] == float(K), "the price to beat")
    assert row["price"] == float(K)
    # S == K: a coin flip, but for the continuation of the last 1-second return (+$1 in
    # $100k, times the autocorrelations measured on what history has arrived by then):
    # 49.99 or 50.01 on some runs, never further.
    assert row["p_up_pct"] == pytest.approx(50, abs=0.05), row
    assert row["p_up_pct"] + row["p_down_pct"] == 100, row

    world.rtds.push(SPOT_TOPIC, (T0 + 1) * 1000, K + 150)
    up = poll(source, clock, lambda r: r["price"] == float(K + 150), "a higher price")
    assert up["p_up_pct"] > 50 > up["p_down_pct"]
    assert_adds_up(up)

    world.rtds.push(SPOT_TOPIC, (T0 + 2) * 1000, K - 150)
    down = poll(source, clock, lambda r: r["price"] == float(K - 150), "a lower price")
    assert down["p_up_pct"] < 50 < down["p_down_pct"]
    assert_adds_up(down)
    assert down["priceToBeat"] == float(K)  # latched: the price to beat does not move
    assert down["sources"]["model"] == "digital-option:spot"


def test_no_probability_until_the_spot_has_enough_one_second_returns(
    world: FakePolymarket, make_source: MakeSource
) -> None:
    world.list_market(FakeMarket(T0))
    # MIN_RETURNS one-second points up to T0: one return short of an estimate.
    seed_around(world, SPOT_TOPIC, T0, K, range(1 - MIN_RETURNS, 1), history=False)
    clock = Clock(T0 + 1.5)
    source = make_source(clock)
    row = poll(source, clock, lambda r: r["priceToBeat"] == float(K), "the price to beat")
    assert row["price"] == float(K)
    assert row["p_up_pct"] is None and row["p_down_pct"] is None
    assert row["sigma"] is None and row["sigmaScale"] is None
    assert row["sources"]["model"] is None

    world.rtds.push(SPOT_TOPIC, (T0 + 1) * 1000, K + 1)  # the MIN_RETURNS-th return
    row = poll(source, clock, lambda r: r["price"] == float(K + 1), "the next point")
    assert_adds_up(row)
    assert_spot_volatility(row)
    assert row["sources"]["model"] == "digital-option:spot"


def test_price_to_beat_is_latched_at_t0_once_the_feed_has_passed_it(
    world: FakePolymarket, make_source: MakeSource
) -> None:
    world.list_market(FakeMarket(T0))
    seed_around(world, SPOT_TOPIC, T0, K, range(-4, 0))  # up to T0 - 1 s
    clock = Clock(T0 + 1.0)
    source = make_source(clock)

    # The newest point (rows built while the history snapshot is merged show older ones, and
    # a row shows the point its own volatility reading ends at: wait for the row's own).
    newest = (T0 - 1) * 1000
    row = poll(
        source,
        clock,
        lambda r: r["price"] == float(K - 1) and from_socket(r),
        "the newest point on the row",
    )
    assert latest_ms(source) == newest  # nothing newer came: the feed stops at T0 - 1 s
    assert row["price"] == float(K - 1)
    assert row["priceToBeat"] is None  # the feed has not reached T0 yet: wait, do not guess
    assert row["p_up_pct"] is None and row["p_down_pct"] is None
    assert row["sources"]["priceToBeat"] is None and row["sources"]["model"] is None

    world.rtds.push(SPOT_TOPIC, T0 * 1000, K)
    world.rtds.push(SPOT_TOPIC, (T0 + 1) * 1000, K + 7)
    row = poll(source, clock, lambda r: r["price"] == float(K + 7), "the new points")
    assert row["priceToBeat"] == float(K)
    assert row["sources"]["priceToBeat"] == f"rtds:{SPOT_TOPIC}"
    assert_adds_up(row)


def test_price_changes_move_the_best_levels(world: FakePolymarket, make_source: MakeSource) -> None:
    market = world.list_market(FakeMarket(T0, outcomes=("Down", "Up")))
    up, down = market.tokens
    clock = Clock(T0 + 10)
    source = make_source(clock)
    poll(source, clock, from_socket, "books from the socket")

    world.set_level(up, "BUY", "0.53", "0")  # the best bid is removed
    row = poll(source, clock, lambda r: r["up_bid"] == 0.52, "the next bid level")
    world.set_level(up, "SELL", "0.55", "0")
    world.set_level(down, "BUY", "0.46", "12")  # a better bid arrives
    for price in ("0.47", "0.49", "0.52"):  # every DOWN ask goes
        world.set_level(down, "SELL", price, "0")
    row = poll(
        source,
        clock,
        lambda r: (r["up_ask"], r["down_bid"], r["down_ask"]) == (0.56, 0.46, None),
        "the changed levels",
    )
    assert from_socket(row)
    assert_books_are_the_fakes(row, world, market)
    assert row["up_bid"] == 0.52 and row["down_ask"] is None  # an empty side is null


def test_rolls_to_the_next_window_on_the_boundary(
    world: FakePolymarket, make_source: MakeSource
) -> None:
    current = world.list_market(FakeMarket(T0, outcomes=("Down", "Up")))
    upcoming = world.list_market(
        FakeMarket(NEXT),
        books=(
            FakeBook(bids={"0.60": "5", "0.62": "9"}, asks={"0.66": "3", "0.64": "8"}),
            FakeBook(bids={"0.33": "5", "0.35": "9"}, asks={"0.39": "3", "0.37": "8"}),
        ),
    )
    seed_around(world, SPOT_TOPIC, T0, K)
    clock = Clock(T0 + 200)  # before the next window is looked up
    source = make_source(clock)
    poll(source, clock, from_socket, "books from the socket")
    assert world.clob_ws.assets_of_connections() == [set(current.tokens)]

    # Before the roll: the current window's row, and the next window's tokens added to the
    # open connection (an ``operation`` frame), their books sent.
    clock.t = T0 + 299.5

    def next_watched(row: Row) -> bool:
        return (
            from_socket(row)
            and world.clob_ws.assets_of_connections() == [{*current.tokens, *upcoming.tokens}]
            and any(set(upcoming.tokens) <= set(sent) for sent in world.clob_ws.snapshots_sent)
        )

    row = poll(source, clock, next_watched, "the next window to be watched")
    assert row["windowStart"] == T0
    assert_books_are_the_fakes(row, world, current)
    assert NEXT in world.gamma.lookups()
    assert operation_sent(world, "subscribe", upcoming.tokens)

    world.rtds.push(SPOT_TOPIC, (NEXT - 1) * 1000, K + 40)
    world.rtds.push(SPOT_TOPIC, NEXT * 1000, K + 41)
    world.rtds.push(SPOT_TOPIC, (NEXT + 1) * 1000, K + 42)
    wait_for(
        lambda: (source.rtds.series[SPOT].latest() or (0, 0.0))[0] == (NEXT + 1) * 1000,
        "the points around the boundary",
    )

    clock.t = NEXT + 0.2
    row = first_row(source, clock)  # the very first row after the boundary

    assert row["windowStart"] == NEXT and row["slot"] == NEXT
    assert row["slug"] == upcoming.slug
    assert row["rem_secs"] == pytest.approx(299.8)
    assert_books_are_the_fakes(row, world, upcoming)  # warm: no gap at the roll
    assert (row["up_bid"], row["up_ask"], row["down_bid"], row["down_ask"]) == (
        0.62,
        0.64,
        0.35,
        0.37,
    )
    assert row["priceToBeat"] == float(K + 41)  # the new window's own price to beat
    assert_adds_up(row)

    # The old window's tokens stay watched until its outcome arrives (so a tape has it) ...
    clock.t = NEXT + 30
    row = poll(source, clock, from_socket, "books after the roll")
    assert world.clob_ws.assets_of_connections() == [{*current.tokens, *upcoming.tokens}]
    assert not operation_sent(world, "unsubscribe", current.tokens)
    world.clob_ws.send_market_resolved(current, "Up")
    # ... then they are no longer watched; the books keep coming from the socket.
    row = poll(
        source,
        clock,
        lambda r: (
            from_socket(r) and world.clob_ws.assets_of_connections() == [set(upcoming.tokens)]
        ),
        "the old window to be dropped",
    )
    assert_books_are_the_fakes(row, world, upcoming)
    assert operation_sent(world, "unsubscribe", current.tokens)
    # All of it on the one connection: no reconnect at the roll, nothing refused.
    assert world.clob_ws.connections == 1 and len(world.clob_ws.subscriptions) == 1
    assert world.clob_ws.refused == []


@pytest.mark.parametrize("lookback", [60, 30])
@pytest.mark.parametrize("with_config", [True, False], ids=["config", "resolution-source"])
def test_spot_window_then_twap_window(
    world: FakePolymarket,
    make_source: MakeSource,
    with_config: bool,
    lookback: int,
) -> None:
    topic, other_topic = (
        (TWAP_TOPIC, TWAP30_TOPIC) if lookback == 60 else (TWAP30_TOPIC, TWAP_TOPIC)
    )
    world.list_market(FakeMarket(T0, rule=SPOT, with_config=with_config))
    twap_market = world.list_market(
        FakeMarket(NEXT, rule=TWAP, lookback=lookback, with_config=with_config)
    )
    world.rtds.twap_history = True  # the TWAP is there in the spot window too, and unused
    seed_around(world, SPOT_TOPIC, T0, K)
    seed_around(world, topic, T0, K - 30)
    clock = Clock(T0 + 2.5)
    source = make_source(clock)

    # The newest point may wait a moment for the TWAP reports while they cannot judge yet
    # (a point that trails the exchange: price_series.py); the row meanwhile shows the one
    # before it, true and a second older. The window's facts are the subject: its newest.
    row = poll(
        source,
        clock,
        lambda r: r["priceToBeat"] is not None and r["price"] == float(K + 2),
        "the spot window",
    )
    assert row["settlement"] == "spot" and row["twapLookbackS"] is None
    assert row["price"] == float(K + 2) and row["priceToBeat"] == float(K)
    assert row["sources"]["price"] == f"rtds:{SPOT_TOPIC}"
    assert row["sources"]["priceToBeat"] == f"rtds:{SPOT_TOPIC}"
    assert row["sources"]["model"] == "digital-option:spot"

    twap_points = {
        NEXT - 1: Decimal("99990.123456789012345678"),
        NEXT: Decimal("99991.987654321098765432"),
        NEXT + 1: Decimal("99992.456789012345678901"),
    }
    clock.t = NEXT - 0.5  # before the points arrive: none is stamped far in our future
    for t, value in twap_points.items():
        # The spot is $58 from the TWAP: it is the price, never the price to beat. (Not
        # farther: the spot's own points witness the report, issue 35; $500 is refused.)
        world.rtds.push(SPOT_TOPIC, t * 1000, K + 50)
        world.rtds.push(topic, t * 1000, value)
        world.rtds.push(other_topic, t * 1000, K - 777)  # the other lookback: not this market's
    poll(source, clock, lambda r: r["price"] == float(K + 50), "the spot feed near the roll")
    clock.t = NEXT + 1.5

    row = poll(
        source,
        clock,
        lambda r: r["windowStart"] == NEXT and r["priceToBeat"] is not None,
        "the TWAP window",
    )

    assert row["up_token_id"] == twap_market.up_token
    assert row["settlement"] == "twap" and row["twapLookbackS"] == lookback
    # The price is the Chainlink spot, whatever the rule; the TWAP report at T0 is the
    # price to beat, read from full_accuracy_value (not the value rounded to cents).
    assert row["price"] == float(K + 50)
    assert row["priceToBeat"] == shown_price(exact(twap_points[NEXT]))
    assert row["priceToBeat"] != round(float(twap_points[NEXT]), 2)
    assert row["sources"]["price"] == f"rtds:{SPOT_TOPIC}"
    assert row["sources"]["priceToBeat"] == f"rtds:{topic}"
    assert row["sources"]["model"] == "digital-option:twap"
    assert 0 <= row["inputAgesMs"]["price"] < 3000  # from its receipt, not its stamp
    assert_adds_up(row)
    assert_spot_volatility(row)
    assert row["p_up_pct"] > 50  # the spot is well above the price to beat


def test_a_window_not_listed_yet_gives_null_tokens_then_is_found(
    monotonic: Skipping, world: FakePolymarket, make_source: MakeSource
) -> None:
    seed_around(world, SPOT_TOPIC, T0, K)
    clock = Clock(T0 + 3)
    source = make_source(clock)

    row = first_row(source, clock)  # 404 from Gamma: no exception

    for name in ("up_token_id", "down_token_id", "up_bid", "up_ask", "down_bid", "down_ask"):
        assert row[name] is None, name
    assert row["p_up_pct"] is None and row["p_down_pct"] is None
    assert row["priceToBeat"] is None and row["slug"] is None
    assert row["settlement"] is None and row["twapLookbackS"] is None  # no market: no rule
    assert row["sources"]["market"] is None and row["sources"]["model"] is None
    assert row["ts"] <= clock.ms  # not fresh
    # Lookups run in the source's upkeep thread, never on the tick.
    assert wait_until(lambda: world.gamma.lookups()[:1] == [T0], timeout=10)
    assert set(world.gamma.lookups()) == {T0}
    assert Refresher(source, MemoryBoardBus(), 500, clock=clock).tick() is True  # publishable

    # A fresh price does not make the row fresh while it has no books. (Rows built while the
    # history snapshot is being merged show its older points at their own ages, some with
    # the newest one's value, K + 2, in the history's zigzag: wait for the newest point.)
    wait_for(lambda: latest_ms(source) == (T0 + 2) * 1000, "the newest seeded point")
    row = first_row(source, clock)
    assert row["price"] == float(K + 2)
    ages = row["inputAgesMs"]
    assert ages == {"upBook": None, "downBook": None, "price": 0}  # from its receipt
    assert row["ts"] <= clock.ms - STALE_AFTER_MS - 1  # no books: stale, never fresh

    market = world.list_market(FakeMarket(T0, outcomes=("Down", "Up")))
    monotonic.skip(DISCOVERY_RETRY_S)  # the next lookup is due
    row = poll(source, clock, from_socket, "the market once listed")
    assert_books_are_the_fakes(row, world, market)


@pytest.mark.parametrize("failure", ["error", "hang"])
def test_gamma_failing_gives_null_tokens_and_the_source_recovers(
    monotonic: Skipping, world: FakePolymarket, failure: str
) -> None:
    market = world.list_market(FakeMarket(T0))
    seed_around(world, SPOT_TOPIC, T0, K)
    world.gamma.mode = failure
    clock = Clock(T0 + 3)
    # The hang outlasts the client's timeout whatever its length: 0.5 s instead of 3 s.
    with sources_on(world, http_timeout_s=0.5) as make_source:
        source = make_source(clock)

        row = first_row(source, clock)  # 500, or no answer within the client's timeout

        assert row["up_token_id"] is None and row["down_token_id"] is None
        assert row["up_bid"] is None and row["p_up_pct"] is None
        assert wait_until(lambda: world.gamma.lookups()[:1] == [T0], timeout=10)

        world.gamma.mode = "ok"
        monotonic.skip(DISCOVERY_RETRY_S)  # the retry is due
        row = poll(
            source, clock, lambda r: from_socket(r) and r["p_up_pct"] is not None, "recovery"
        )
        assert_books_are_the_fakes(row, world, market)
        assert_adds_up(row)


# docs/live-source.md ("Books"): REST also fills in when a quote has not been confirmed for
# 2 s. Stated as the number, not read from source.BOOK_FRESH_S (issue 35, point 6).
@pytest.mark.parametrize(("unconfirmed_s", "asked"), [(1.5, False), (2.5, True)])
def test_rest_reads_the_books_of_a_quote_unconfirmed_for_over_2_s(
    world: FakePolymarket, unconfirmed_s: float, asked: bool
) -> None:
    market = world.list_market(FakeMarket(T0))
    with sources_on(world, background=False) as make:
        source = make(Clock(T0 + 10))  # never started: nothing else reads or writes books
        # The books' own monotonic clock, 10 s in: neither the 30 s cross-check nor the 1 s
        # between two REST reads stands in the way.
        bids, asks = [{"price": "0.45", "size": "10"}], [{"price": "0.55", "size": "5"}]
        with clocks.use(lambda: 10.0):
            for token in market.tokens:  # the socket's books, confirmed at 10 s
                source.books.snapshot(token, bids, asks, "clob-ws")
        with clocks.use(lambda: 10.0 + unconfirmed_s):
            source.rest_books.refresh(list(market.tokens))
    assert bool(world.clob.requests_to("/books")) is asked


def test_clob_rest_failing_does_not_stop_the_socket_books(
    world: FakePolymarket, make_source: MakeSource
) -> None:
    market = world.list_market(FakeMarket(T0))
    world.clob.mode = "error"
    clock = Clock(T0 + 3)
    source = make_source(clock)

    row = poll(source, clock, from_socket, "books from the socket")

    assert_books_are_the_fakes(row, world, market)
    # REST was tried (its own upkeep thread), and failed; the socket's books stand.
    wait_for(lambda: bool(world.clob.requests_to("/books")), "a REST /books request")
    assert first_row(source, clock)["sources"]["upBook"] == "clob-ws"


def test_dropped_clob_socket_falls_back_to_rest_then_back_to_the_socket(
    world: FakePolymarket,
    make_source: MakeSource,
    fast_reconnect: None,
) -> None:
    market = world.list_market(FakeMarket(T0, outcomes=("Down", "Up")))
    clock = Clock(T0 + 10)
    source = make_source(clock)
    poll(source, clock, from_socket, "books from the socket")

    world.clob_ws.refuse = True
    world.clob_ws.drop()
    # Nobody hears these on a socket. (Both books change: a REST read that only confirms
    # what the socket said keeps "clob-ws".)
    world.set_level(market.up_token, "BUY", "0.535", "10")
    world.set_level(market.down_token, "BUY", "0.455", "10")

    def from_rest(row: Row) -> bool:
        sources = row["sources"]
        return bool(
            sources["upBook"] == "clob-rest"
            and sources["downBook"] == "clob-rest"
            and (row["up_bid"], row["down_bid"]) == (0.535, 0.455)
        )

    row = poll(source, clock, from_rest, "books from POST /books")
    assert_books_are_the_fakes(row, world, market)
    last = world.clob.requests_to("/books")[-1]
    assert last.method == "POST"
    assert sorted(item["token_id"] for item in last.body) == sorted(market.tokens)

    world.clob_ws.refuse = False
    world.set_level(market.down_token, "SELL", "0.465", "7")
    row = poll(source, clock, lambda r: from_socket(r) and r["down_ask"] == 0.465, "the socket")
    assert_books_are_the_fakes(row, world, market)
    assert world.clob_ws.connections >= 2


def test_text_pings_are_sent_and_pongs_do_not_disturb_the_feeds(
    world: FakePolymarket,
    make_source: MakeSource,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(ClobFeed, "ping_every_s", 0.2)
    monkeypatch.setattr(RtdsFeed, "ping_every_s", 0.2)
    market = world.list_market(FakeMarket(T0))
    seed_around(world, SPOT_TOPIC, T0, K)
    clock = Clock(T0 + 3)
    source = make_source(clock)
    poll(source, clock, from_socket, "books from the socket")

    wait_for(lambda: world.clob_ws.pings >= 3 and world.rtds.pings >= 3, "text PINGs")

    world.set_level(market.up_token, "BUY", "0.54", "1")
    world.rtds.push(SPOT_TOPIC, (T0 + 3) * 1000, K + 9)
    row = poll(source, clock, lambda r: r["up_bid"] == 0.54 and r["price"] == float(K + 9), "data")
    assert from_socket(row)
    assert world.clob_ws.connections == 1 and world.rtds.connections == 1  # no reconnects


def test_price_to_beat_falls_back_to_the_site_when_the_feed_missed_t0(
    world: FakePolymarket, make_source: MakeSource
) -> None:
    """A spot market: the site's open price (the spot at T0, what a spot market settles on)
    comes before Gamma's priceToBeat."""
    world.list_market(FakeMarket(T0, price_to_beat=99800.25))
    # Nothing within 5 s of T0: no point at T0 to latch.
    seed_around(world, SPOT_TOPIC, T0, K, range(7, 10), history=False)
    world.site.open_prices[T0] = 99876.5
    clock = Clock(T0 + 10)
    source = make_source(clock)

    row = poll(source, clock, lambda r: r["priceToBeat"] is not None, "the price to beat")

    assert row["priceToBeat"] == 99876.5
    assert row["sources"]["priceToBeat"] == "site:crypto-price"
    query = world.site.requests_to("/api/crypto/crypto-price")[-1].query
    assert query == {
        "symbol": "BTC",
        "eventStartTime": iso(T0),
        "endDate": iso(NEXT),
        "variant": "fiveminute",
    }


def test_the_sites_answer_waiting_for_its_witness_is_not_passed_over_for_gammas(
    monotonic: Skipping, world: FakePolymarket, make_source: MakeSource
) -> None:
    """The site answers before any spot point near T0 can witness it (nor Gamma's); when the
    points come, within the site's retry interval, the site's answer is taken, not Gamma's.
    Before: Gamma's was taken at the next upkeep (seen in a loaded CI run, where the points
    came just after the site's answer)."""
    world.list_market(FakeMarket(T0, price_to_beat=99800.25))
    world.site.open_prices[T0] = 99876.5
    clock = Clock(T0 + 10)
    source = make_source(clock)
    poll(source, clock, lambda r: r["slug"] is not None, "the market")
    wait_for(lambda: bool(world.site.requests_to("/api/crypto/crypto-price")), "the site asked")
    assert first_row(source, clock)["priceToBeat"] is None  # nothing can witness either yet
    for second in range(7, 10):  # the driven monotonic clock stays: the site is not asked again
        world.rtds.push(SPOT_TOPIC, (T0 + second) * 1000, K + second)
    row = poll(source, clock, lambda r: r["priceToBeat"] is not None, "the price to beat")
    assert (row["priceToBeat"], row["sources"]["priceToBeat"]) == (99876.5, "site:crypto-price")
    assert len(world.site.requests_to("/api/crypto/crypto-price")) == 1


@pytest.mark.parametrize("site_answers", [True, False], ids=["site-and-gamma", "gamma-only"])
def test_a_twap_market_takes_no_price_to_beat_from_the_site_or_gamma(
    world: FakePolymarket, make_source: MakeSource, site_answers: bool
) -> None:
    """The TWAP topic is silent and the spot has a hole around T0: neither the report at T0
    nor our own mean of the spot over [T0 - 60, T0] exists. The site (whose open price is the
    SPOT at T0, even with twapEnabled=true) and Gamma's priceToBeat (TWAP or spot: unknown)
    offer numbers; neither is taken, the site is never even asked, and the board has no P(up)
    rather than one against a price to beat that may be the wrong one."""
    world.list_market(FakeMarket(T0, rule=TWAP, price_to_beat=99800.25))
    seed_history(world, T0 - 10, K)  # 15 minutes of spot up to T0 - 11 s ...
    world.rtds.seed(SPOT_TOPIC, [((T0 + k) * 1000, K + k) for k in range(7, 10)])  # ... T0 + 7
    world.site.open_prices[T0] = 99876.5 if site_answers else None
    clock = Clock(T0 + 10)
    source = make_source(clock)

    poll(
        source,
        clock,
        lambda r: r["slug"] is not None and r["price"] == float(K + 9),
        "the market and the spot",
    )
    for t in (T0 + 10, T0 + 30, T0 + 60):  # the fallbacks' steps, done when upkeep returns
        clock.t = t
        source.upkeep(t)
    row = first_row(source, clock)

    assert row["settlement"] == "twap" and row["twapLookbackS"] == 60
    assert row["priceToBeat"] is None and row["sources"]["priceToBeat"] is None
    assert row["p_up_pct"] is None and row["p_down_pct"] is None
    assert row["sources"]["model"] is None
    assert_spot_volatility(row)  # only the price to beat is missing
    assert not world.site.requests_to("/api/crypto/crypto-price")
    assert world.site.twap_queries() == []


def test_the_fake_site_answers_the_spot_even_when_asked_for_the_twap(
    world: FakePolymarket,
) -> None:
    """What a public study observed (the site's open values are the spot at the boundary
    second), so the fake never makes the site look like a source of a TWAP."""
    world.site.open_prices[T0] = 99876.5
    url = f"{world.site.url}/api/crypto/crypto-price"
    base = {"symbol": "BTC", "eventStartTime": iso(T0), "variant": "fiveminute"}
    twap = base | {"twapEnabled": "true", "twapLookbackSeconds": "60"}
    spot_answer = httpx.get(url, params=base).json()
    twap_answer = httpx.get(url, params=twap).json()
    assert spot_answer["openPrice"] == twap_answer["openPrice"] == 99876.5
    assert world.site.twap_queries() == [twap]


def test_twap_price_to_beat_is_the_spot_mean_until_the_report_arrives(
    world: FakePolymarket, make_source: MakeSource
) -> None:
    world.list_market(FakeMarket(T0, rule=TWAP))
    world.rtds.twap_history = True
    seed_around(world, SPOT_TOPIC, T0, K)
    world.rtds.seed(TWAP_TOPIC, [((T0 - 60 + k) * 1000, K - 30) for k in range(59)])  # to T0-2
    world.site.open_prices[T0] = 99876.5  # never asked: not a TWAP market's source
    clock = Clock(T0 + 4.5)
    source = make_source(clock)

    row = poll(source, clock, lambda r: r["price"] == float(K + 2), "the spot")
    assert row["priceToBeat"] is None  # the report may still come: wait 5 s for it

    clock.t = T0 + 5
    row = poll(source, clock, lambda r: r["priceToBeat"] is not None, "the spot mean")
    spot = [float(v) for ts, v in world.rtds.history[SPOT_TOPIC] if T0 - 60 < ts / 1000 <= T0]
    assert len(spot) == 60
    assert row["priceToBeat"] == pytest.approx(math.fsum(spot) / len(spot), abs=1e-6)
    assert row["sources"]["priceToBeat"] == f"rtds:{SPOT_TOPIC}:mean60s"
    assert_adds_up(row)

    # The first report after T0, 3 s after the one before it (no hole): once the report for
    # T0 has had T0_REPORT_WAIT_S to come (it can arrive after T0 + 1 s's), it replaces the mean.
    world.rtds.push(TWAP_TOPIC, (T0 + 1) * 1000, K - Decimal("7.25"))
    clock.t = T0 + T0_REPORT_WAIT_S
    row = poll(
        source, clock, lambda r: r["priceToBeat"] == float(K - Decimal("7.25")), "the report"
    )
    assert row["sources"]["priceToBeat"] == f"rtds:{TWAP_TOPIC}"
    assert_adds_up(row)
    assert not world.site.requests_to("/api/crypto/crypto-price")


def test_price_to_beat_falls_back_to_gamma_when_the_site_has_none(
    world: FakePolymarket, make_source: MakeSource
) -> None:
    world.list_market(FakeMarket(T0, price_to_beat=99800.25))
    seed_around(world, SPOT_TOPIC, T0, K, range(7, 10), history=False)
    world.site.open_prices[T0] = None  # openPrice null for a while
    clock = Clock(T0 + 10)
    source = make_source(clock)

    row = poll(source, clock, lambda r: r["priceToBeat"] is not None, "the price to beat")

    assert row["priceToBeat"] == 99800.25
    assert row["sources"]["priceToBeat"] == "gamma"
    assert world.site.requests_to("/api/crypto/crypto-price")  # the site was asked first


def test_no_price_at_all_leaves_the_price_fields_null(
    world: FakePolymarket, make_source: MakeSource
) -> None:
    world.rtds.silent = True
    world.list_market(FakeMarket(T0))
    clock = Clock(T0 + 3)
    source = make_source(clock)

    row = poll(source, clock, from_socket, "books from the socket")

    assert row["price"] is None and row["priceToBeat"] is None
    assert row["p_up_pct"] is None and row["p_down_pct"] is None
    assert row["sources"]["price"] is None and row["inputAgesMs"]["price"] is None
    assert row["ts"] <= clock.ms - STALE_AFTER_MS - 1  # no price: stale, never fresh

    clock.t = T0 + 9
    assert first_row(source, clock)["ts"] <= (T0 + 3) * 1000  # and it does not get younger


def test_one_garbage_twap_point_does_not_break_the_board_for_good(
    world: FakePolymarket, make_source: MakeSource
) -> None:
    """A NaN ``full_accuracy_value`` must be dropped, not latched as the price to beat; a NaN
    spot must not reach the price or the volatility."""
    world.list_market(FakeMarket(T0, rule=TWAP))
    world.rtds.twap_history = True
    seed_around(world, SPOT_TOPIC, T0, K)
    # Reports up to T0 - 1 s: the one at T0 (the price to beat) has not come yet.
    world.rtds.seed(TWAP_TOPIC, [((T0 - 60 + k) * 1000, K + k % 3) for k in range(60)])
    clock = Clock(T0 + 2.5)  # before the fallbacks (5 s after T0)
    source = make_source(clock)
    row = poll(source, clock, lambda r: from_socket(r) and r["price"] == float(K + 2), "inputs")
    assert row["priceToBeat"] is None

    def garbage(topic: str, ts_ms: int, **payload: Any) -> dict[str, Any]:
        fields = {"symbol": "btc/usd", "timestamp": ts_ms, **payload}
        return {"topic": topic, "type": "update", "timestamp": ts_ms, "payload": fields}

    world.rtds.send_raw(
        garbage(TWAP_TOPIC, T0 * 1000, value=float(K), full_accuracy_value="NaN", window_s=60)
    )
    world.rtds.send_raw(garbage(SPOT_TOPIC, (T0 + 3) * 1000, value="NaN"))
    world.rtds.push(TWAP_TOPIC, T0 * 1000, K + 1)  # the good report at T0
    world.rtds.push(SPOT_TOPIC, (T0 + 3) * 1000, K + 3)
    row = poll(
        source,
        clock,
        lambda r: r["price"] == float(K + 3) and r["priceToBeat"] is not None,
        "the good points",
    )

    assert row["priceToBeat"] == float(K + 1)
    assert row["sources"]["priceToBeat"] == f"rtds:{TWAP_TOPIC}"
    assert_spot_volatility(row)
    assert 0 < row["p_up_pct"] < 100
    assert Refresher(source, MemoryBoardBus(), 500, clock=clock).tick() is True


def test_frozen_rtds_subscription_is_replaced(world: FakePolymarket, fast_reconnect: None) -> None:
    """RTDS is known to stop sending data on a connection whose PING/PONG still works
    (Polymarket/real-time-data-client#35). Silence is silence of data: the feed must
    reconnect, and the price resume. (The real intervals, on the RTDS feed's own monotonic
    clock, which the test moves.)"""
    world.list_market(FakeMarket(T0))
    seed_around(world, SPOT_TOPIC, T0, K)
    clock = Clock(T0 + 3)
    feed_clock = Skipping()
    with sources_on(world, rtds_monotonic=feed_clock) as make_source:
        source = make_source(clock)
        poll(source, clock, lambda r: r["price"] == float(K + 2), "the price")

        world.rtds.freeze()
        world.rtds.push(SPOT_TOPIC, (T0 + 3) * 1000, K + 77)  # only a new connection gets it

        pings = world.rtds.pings
        feed_clock.skip(RtdsFeed.ping_every_s)  # PING/PONG goes on while no data comes
        wait_for(lambda: world.rtds.pings >= pings + 1, "a PING on the frozen connection")
        feed_clock.skip(RtdsFeed.ping_every_s)
        wait_for(lambda: world.rtds.pings >= pings + 2, "a second PING")
        assert world.rtds.connections == 1  # pongs are no data, but 20 s is no silence yet
        # A whole silence more: the last data may have come after the first skip (a history
        # snapshot late under load), so the silence is counted from then, not from the freeze.
        feed_clock.skip(feed_module.SILENCE_S + 1)
        poll(source, clock, lambda r: r["price"] == float(K + 77), "the price to resume", 15)
        assert world.rtds.connections >= 2


def test_a_hanging_gamma_lookup_does_not_stall_the_board(
    monotonic: Skipping, world: FakePolymarket
) -> None:
    """Near the roll the next window is looked up; while Gamma hangs (each request held open
    past the client's timeout) the refresher must keep publishing the current window's
    board at its tick, not once per timed-out lookup: a stalled board turns stale although
    every input is fresh. Counted, not timed: boards published between two lookups, the
    lookup thread held by the hang for the whole of that time (the retry is made due at the
    first lookup, so the second follows the first's timeout at once)."""
    world.list_market(FakeMarket(T0))  # the next window is never answered
    world.clob_ws.keep_alive(0.1)
    seed_around(world, SPOT_TOPIC, T0, K)
    offset = T0 + 240 - time.time()  # a running clock, 60 s before the roll

    def clock() -> float:
        return time.time() + offset

    # The client's timeout 1 s instead of 3 s, and a board every 200 ms instead of 500 ms:
    # about 5 boards a hung lookup, 3 asked for; a board stalled by the lookup gives 1.
    with sources_on(world, http_timeout_s=1.0) as make_source:
        source = make_source(clock)
        wait_for(lambda: from_socket(first_row(source, clock)), "books from the socket")
        world.gamma.mode = "hang"
        before = len(world.gamma.hits)

        def hung_lookups() -> list[float]:
            hits = world.gamma.hits[before:]
            return [hit.at for hit in hits if hit.path.endswith(f"-{NEXT}")]

        published: list[float] = []
        bus = MemoryBoardBus()
        bus.add_listener(lambda snapshot: published.append(time.monotonic()))
        stop = Refresher(source, bus, 200, clock=clock).start_background()
        try:
            # The prefetch looked the next window up before the hang: the retry is due now.
            monotonic.skip(DISCOVERY_RETRY_S)
            wait_for(lambda: len(hung_lookups()) >= 1, "a lookup of the next window")
            monotonic.skip(DISCOVERY_RETRY_S)  # the next lookup is due once this one ends
            wait_for(lambda: len(hung_lookups()) >= 2, "two lookups of the next window")
        finally:
            stop.set()
    first, second = hung_lookups()[:2]
    between = [t for t in published if first < t < second]
    assert len(between) >= 3, f"{len(between)} boards published between two Gamma lookups"


# -- stale, not wrong: through the app ----------------------------------------------------


def test_silent_rtds_turns_the_item_stale_not_wrong(
    world: FakePolymarket,
    make_source: MakeSource,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    app: Flask = create_app(
        {
            **BASE_CONFIG,
            "DATABASE_URL": f"sqlite:///{tmp_path / 'app.sqlite3'}",
            "STALE_THRESHOLD_MS": "1000",
            "SEVERE_STALE_THRESHOLD_MS": "2500",
        }
    )
    bus: BoardBus = services_of(app).bus
    client = app.test_client()
    market = world.list_market(FakeMarket(T0, outcomes=("Down", "Up")))
    world.clob_ws.keep_alive(0.1)  # a busy market: the books stay fresh
    seed_around(world, SPOT_TOPIC, T0, K, range(-3, 6))
    clock = Clock(T0 + 5.2)
    source = make_source(clock)
    refresher = Refresher(source, bus, 500, clock=clock)
    monkeypatch.setattr(latest_view, "now_ms", lambda: clock.ms)

    def served() -> dict[str, Any]:
        assert refresher.tick() is True
        response = client.get("/api/probboard/latest")
        assert response.status_code == 200
        items = validated("board", response.data)["items"]
        assert len(items) == 1
        item: dict[str, Any] = items[0]
        return item

    def served_until(predicate: Callable[[dict[str, Any]], bool], what: str) -> dict[str, Any]:
        deadline = time.monotonic() + POLL_S
        while True:
            item = served()
            if predicate(item):
                return item
            if time.monotonic() > deadline:
                pytest.fail(f"timed out waiting for {what}; last item: {item}")
            time.sleep(0.05)

    poll(source, clock, lambda r: from_socket(r) and r["priceToBeat"] is not None, "inputs")
    # Live: a new point moves the data time forward (ages count from its RECEIPT, on the
    # source's clock: the clock moves first, then the point arrives).
    clock.t = T0 + 6.2
    world.rtds.push(SPOT_TOPIC, (T0 + 6) * 1000, K + 20)
    # (Polled: the books' ages are real; a loaded machine may make one tick late.)
    good = served_until(
        lambda i: i["price"] == float(K + 20) and i["inputAgesMs"]["price"] == 0, "fresh"
    )
    assert good["latencyLevel"] == "ok" and good["isStale"] is False
    assert_books_are_the_fakes(good, world, market)

    # Silent: the point at T0+7 s never arrives; the data time stays where it was.
    world.rtds.silent = True
    world.rtds.push(SPOT_TOPIC, (T0 + 7) * 1000, K + 999)
    clock.t = T0 + 7.6
    received = int((T0 + 6.2) * 1000)
    warn = served_until(lambda i: i["latencyLevel"] == "warn" and i["ts"] == received, "warn")
    assert warn["inputAgesMs"]["price"] == 1400
    assert warn["isStale"] is True and warn["dataAgeMs"] == 1400

    clock.t = T0 + 9
    danger = served_until(lambda i: i["latencyLevel"] == "danger" and i["ts"] == received, "danger")
    assert danger["inputAgesMs"]["price"] == 2800 and danger["dataAgeMs"] == 2800
    for item in (warn, danger):  # the last good numbers, never made up
        assert item["price"] == float(K + 20) and item["priceToBeat"] == good["priceToBeat"]
        assert_books_are_the_fakes(item, world, market)
        assert item["sources"]["price"] == f"rtds:{SPOT_TOPIC}"
        assert_adds_up(item)


def test_a_finished_window_without_an_outcome_is_dropped_after_ten_minutes(
    world: FakePolymarket, make_source: MakeSource
) -> None:
    current = world.list_market(FakeMarket(T0))
    upcoming = world.list_market(FakeMarket(NEXT))
    seed_around(world, SPOT_TOPIC, T0, K)
    clock = Clock(T0 + 299.5)
    source = make_source(clock)
    poll(
        source,
        clock,
        lambda r: world.clob_ws.assets_of_connections() == [{*current.tokens, *upcoming.tokens}],
        "both windows watched before the roll",
    )
    clock.t = NEXT + 299  # ended 299 s ago, no market_resolved: still watched
    source.rows(clock())
    assert set(current.tokens) <= set(source.clob._assets)
    clock.t = NEXT + 601  # ten minutes after its end: given up
    source.rows(clock())
    assert not set(current.tokens) & set(source.clob._assets)
