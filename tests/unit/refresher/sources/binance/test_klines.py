"""Binance's settlement candle for the hourly markets (issue 49, point 2:
``app/refresher/sources/binance/klines.py``), read by the real client from the loopback
stand-in (``harness/fake_polymarket/binance.py``) that answers in Binance's documented format, and
parsed from the documented example and its awkward variants."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest

from app.refresher.sources.binance.klines import (
    Candle,
    KlinesClient,
    KlinesError,
    parse_candle,
    parse_candles,
)
from harness.fake_polymarket.binance import FakeBinance

T0 = 1_772_373_600  # 2026-03-01 14:00 UTC: the 9AM ET hourly market
HOUR_MS = 3_600_000
ROW = [T0 * 1000, "66123.45", "66300.00", "66010.12", "66250.01", "812.3", T0 * 1000 + HOUR_MS - 1,
       "53712345.6", 101234, "401.2", "26512345.1", "0"]  # fmt: skip


@pytest.fixture
def client(binance: FakeBinance) -> Iterator[KlinesClient]:
    binance.clock = lambda: T0 + 7200.0  # two hours after T0: its candle is over
    client = KlinesClient(binance.url + "/")
    try:
        yield client
    finally:
        client.close()


def test_the_documented_candle_is_read_with_its_outcome() -> None:
    candle = parse_candle([ROW], T0 * 1000, "1h")
    assert candle == Candle(T0 * 1000, T0 * 1000 + HOUR_MS - 1, 66123.45, 66250.01)
    assert candle.up
    assert not candle.final(T0 * 1000 + HOUR_MS - 1) and candle.final(T0 * 1000 + HOUR_MS)


def test_a_tie_is_up_and_a_lower_close_down() -> None:
    tie = parse_candle([[*ROW[:4], "66123.45", *ROW[5:]]], T0 * 1000, "1h")
    lower = parse_candle([[*ROW[:4], "66123.44", *ROW[5:]]], T0 * 1000, "1h")
    assert tie is not None and tie.up
    assert lower is not None and not lower.up


@pytest.mark.parametrize(
    ("payload", "said"),
    [
        ({"code": -1121, "msg": "Invalid symbol."}, "Invalid symbol"),
        ({"rows": []}, "expected a list of candles"),
        ([[T0 * 1000, "1"]], "at least 7 items"),
        ([[T0 * 1000 + HOUR_MS, *ROW[1:6], T0 * 1000 + 2 * HOUR_MS - 1, *ROW[7:]]], "got one from"),
        ([[str(T0 * 1000), *ROW[1:]]], "open time is no integer"),
        ([[*ROW[:1], "NaN", *ROW[2:]]], "open is no price"),
        ([[*ROW[:4], "0", *ROW[5:]]], "close is no price"),
        ([[*ROW[:4], True, *ROW[5:]]], "close is no price"),
    ],
    ids=[
        "error-object",
        "not-a-list",
        "short",
        "next-candle",
        "stamp-string",
        "nan",
        "zero",
        "bool",
    ],
)
def test_every_other_answer_is_a_clear_error(payload: Any, said: str) -> None:
    with pytest.raises(KlinesError, match=said):
        parse_candle(payload, T0 * 1000, "1h")


def test_no_candle_yet_is_none() -> None:
    assert parse_candle([], T0 * 1000, "1h") is None


def test_the_client_reads_the_candle_binance_serves(
    binance: FakeBinance, client: KlinesClient
) -> None:
    candle = client.candle("BTCUSDT", T0)
    assert candle is not None and (candle.open, candle.close, candle.up) == (
        66123.45,
        66250.01,
        True,
    )
    hit = binance.requests_to("/api/v3/klines")[-1]
    assert hit.query == {
        "symbol": "BTCUSDT", "interval": "1h", "startTime": str(T0 * 1000), "limit": "1"
    }  # fmt: skip
    assert client.candle("BTCUSDT", T0 + 3600) is None  # the next hour: no candle set


def test_a_later_candle_for_a_missing_one_is_refused(
    binance: FakeBinance, client: KlinesClient
) -> None:
    """Binance answers the first candle at or after startTime: with the hour's candle
    missing, the next hour's comes, and is not taken for it."""
    binance.set_candle("BTCUSDT", "1h", (T0 + 3600) * 1000, "1", "1", "1", "1")
    with pytest.raises(KlinesError, match="got one from"):
        client.candle("BTCUSDT", T0 - 3600)


@pytest.mark.parametrize(
    ("refuse", "said"),
    [
        ((451, "Service unavailable from a restricted location"), "451"),
        ((429, "Too many requests"), "429"),
    ],
)
def test_binance_refusing_is_a_clear_error(
    binance: FakeBinance, client: KlinesClient, refuse: tuple[int, str], said: str
) -> None:
    binance.refuse = refuse
    with pytest.raises(KlinesError, match=f"Binance answered {said}: '{refuse[1]}'"):
        client.candle("BTCUSDT", T0)


def test_an_unknown_pair_and_interval_say_so(client: KlinesClient) -> None:
    with pytest.raises(KlinesError, match="Invalid symbol"):
        client.candle("DOGEBTC", T0)
    with pytest.raises(ValueError, match="unknown interval '2h'"):
        client.candle("BTCUSDT", T0, "2h")


def _minute(open_ms: int, close: str = "66000.00") -> list[Any]:
    return [
        open_ms,
        "66000.00",
        close,
        close,
        close,
        "1.0",
        open_ms + 59_999,
        "1",
        1,
        "1",
        "1",
        "0",
    ]


def test_several_candles_must_follow_each_other_on_their_grid() -> None:
    start = T0 * 1000
    rows = [_minute(start), _minute(start + 60_000), _minute(start + 180_000)]
    assert [c.open_ms for c in parse_candles(rows, start, "1m")] == [
        start, start + 60_000, start + 180_000,  # a minute without trades may be missing
    ]  # fmt: skip
    assert parse_candles([], start, "1m") == []
    for bad in (
        [_minute(start + 60_000), _minute(start)],  # out of order
        [_minute(start - 60_000)],  # before the start asked for
        [_minute(start + 30_000)],  # off the minutes' grid
        [[start, "1", "1", "1", "1", "1", start + 3_599_999]],  # an hour's close on a minute
    ):
        with pytest.raises(KlinesError):
            parse_candles(bad, start, "1m")


def test_candles_asks_for_at_most_binances_bound(client: KlinesClient) -> None:
    with pytest.raises(ValueError, match="limit 1001"):
        client.candles("BTCUSDT", T0, "1m", 1001)
    [candle] = client.candles("BTCUSDT", T0, "1h", 1000)
    assert candle.open == 66123.45


def test_a_followed_path_gives_the_candles_the_exchange_price_makes(
    binance: FakeBinance,
) -> None:
    """The stand-in's candles built from the same price path RTDS relays: the hourly candle
    opens at the path's price at its hour and closes at its last second's (or now's while
    it runs); the minutes follow on their grid."""

    def path(t: float) -> Decimal:
        return Decimal(60_000 + int(t) % 7 * 10 + int(t) // 60 % 3)

    binance.follow("ETHUSDT", path)
    binance.clock = lambda: T0 + 7200.5
    client = KlinesClient(binance.url)
    try:
        hour = client.candle("ETHUSDT", T0)
        assert hour is not None and hour.final(int((T0 + 7200) * 1000))
        assert (hour.open, hour.close) == (float(path(T0)), float(path(T0 + 3599)))
        binance.clock = lambda: T0 + 1800.5  # mid-hour: the candle runs, its close is now's
        running = client.candle("ETHUSDT", T0)
        assert running is not None and running.close == float(path(T0 + 1800))
        minutes = client.candles("ETHUSDT", T0 + 30, "1m", 5)  # the first minute after
        assert [c.open_ms // 1000 for c in minutes] == [T0 + 60 * k for k in range(1, 6)]
        assert minutes[0].close == float(path(T0 + 119))
    finally:
        client.close()
