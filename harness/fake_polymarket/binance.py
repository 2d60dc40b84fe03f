"""A stand-in for Binance's REST market data on loopback: ``GET /api/v3/klines`` as Binance
documents it (``binance/binance-spot-api-docs``, rest-api.md, "Kline/Candlestick data").

Candles are set by hand (``set_candle``: the pair, the interval, the open time and the four
prices as decimal strings), or built from a price path (``follow``: the same path the fake
RTDS relays on ``crypto_prices``, so the hourly candle and the exchange price agree). An
answer lists the candles of the pair and interval opening at or after ``startTime`` that have
opened on the fake's clock, up to ``limit`` (default 500, at most 1,000), each as Binance's
12-item array with its prices as strings; a missing or bad parameter and an unknown pair
answer 400 with Binance's error object (``{"code": -1121, "msg": "Invalid symbol."}``).
``refuse = (451, "...")`` answers every request so (a region refused, 429 or 418 when rate
limited), and the switches of every HTTP fake apply (``mode``, ``trickle_bps``:
``harness.fake_polymarket.http_server``).
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

from harness.fake_polymarket.http_server import _HttpFake

INTERVALS_MS = {"1m": 60_000, "1h": 3_600_000, "4h": 14_400_000}
MAX_LIMIT = 1000


class FakeBinance(_HttpFake):
    """Binance's klines, from the candles set (``candles``: (pair, interval, open ms) ->
    (open, high, low, close))."""

    def __init__(self) -> None:
        super().__init__()
        self.candles: dict[tuple[str, str, int], tuple[str, str, str, str]] = {}
        self.refuse: tuple[int, str] | None = None
        # Pairs whose candles are built from a price path (``follow``): pair -> price at t.
        self.paths: dict[str, Callable[[float], Decimal]] = {}

    def follow(self, pair: str, price: Callable[[float], Decimal]) -> None:
        """Build ``pair``'s candles from ``price`` (its trade price at any instant: the same
        path the ``crypto_prices`` topic relays, an ``ExchangeView``'s): a candle's open is the
        price at its open time, its close the price at its last second (at the fake's now
        while it runs), its high and low those of its whole seconds. Set candles win."""
        self.paths[pair] = price

    def set_candle(self, pair: str, interval: str, open_ms: int, *prices: str) -> None:
        """One candle: ``prices`` are its open, high, low and close as Binance writes them."""
        if len(prices) != 4:
            raise ValueError("a candle has four prices: open, high, low, close")
        self.candles[pair, interval, open_ms] = (prices[0], prices[1], prices[2], prices[3])

    def route(self, method: str, path: str, query: dict[str, str], body: Any) -> tuple[int, Any]:
        """``/api/v3/klines`` only."""
        if self.refuse is not None:
            status, message = self.refuse
            return status, {"code": 0, "msg": message}
        if method != "GET" or path != "/api/v3/klines":
            return 404, {"code": -1, "msg": "not found"}
        symbol, interval = query.get("symbol"), query.get("interval")
        for name, value in (("symbol", symbol), ("interval", interval)):
            if not value:
                return 400, _missing(name)
        assert symbol is not None and interval is not None
        if interval not in INTERVALS_MS:
            return 400, {"code": -1120, "msg": "Invalid interval."}
        if symbol not in self.paths and not any(key[0] == symbol for key in self.candles):
            return 400, {"code": -1121, "msg": "Invalid symbol."}
        try:
            start = int(query.get("startTime", "0"))
            limit = min(int(query.get("limit", "500")), MAX_LIMIT)
        except ValueError:
            return 400, _missing("startTime")
        now_ms = self.now_ms()
        opened = sorted(
            (open_ms, prices)
            for (pair, kind, open_ms), prices in self.candles.items()
            if pair == symbol and kind == interval and start <= open_ms <= now_ms
        )
        if not opened and symbol in self.paths:
            opened = self._built(self.paths[symbol], INTERVALS_MS[interval], start, limit)
        return 200, [kline_row(open_ms, INTERVALS_MS[interval], p) for open_ms, p in opened[:limit]]

    def _built(
        self, price: Callable[[float], Decimal], step_ms: int, start_ms: int, limit: int
    ) -> list[tuple[int, tuple[str, str, str, str]]]:
        """Up to ``limit`` candles of ``step_ms`` from the first opening at or after
        ``start_ms`` that have opened by now, from the price path."""
        now_ms = self.now_ms()
        first = -(-start_ms // step_ms) * step_ms
        built: list[tuple[int, tuple[str, str, str, str]]] = []
        for open_ms in range(first, now_ms + 1, step_ms):
            if len(built) == limit:
                break
            last_ms = min(open_ms + step_ms - 1000, now_ms - now_ms % 1000)
            seconds = [price(t / 1000) for t in range(open_ms, last_ms + 1, 1000)]
            built.append(
                (open_ms, (str(seconds[0]), str(max(seconds)), str(min(seconds)), str(seconds[-1])))
            )
        return built


def kline_row(open_ms: int, interval_ms: int, prices: tuple[str, str, str, str]) -> list[Any]:
    """Binance's 12 items of one candle (volumes and counts made up, as strings where
    Binance sends strings)."""
    o, h, low, c = prices
    close_ms = open_ms + interval_ms - 1
    return [open_ms, o, h, low, c, "812.30000000", close_ms, "53712345.60000000", 101234,
            "401.20000000", "26512345.10000000", "0"]  # fmt: skip


def _missing(name: str) -> dict[str, Any]:
    return {
        "code": -1102,
        "msg": f"Mandatory parameter '{name}' was not sent, was empty/null, or malformed.",
    }
