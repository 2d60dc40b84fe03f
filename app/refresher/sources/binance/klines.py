"""Binance's candles, as the hourly up/down markets settle on them (issue 49, point 2).

An hourly market settles UP when the close of the Binance pair's 1-hour candle that begins at
its hour is at least its open (docs/horizons.md). Binance documents the candle's answer::

    GET <BINANCE_REST_URL>/api/v3/klines?symbol=BTCUSDT&interval=1h&startTime=<T0 ms>&limit=1
    [[1772373600000, "66123.45", "66300.00", "66010.12", "66250.01", "812.3", 1772377199999,
      "53712345.6", 101234, "401.2", "26512345.1", "0"]]

an array of candles, each an array whose first seven items are the open time (ms), the
open, high, low and close (strings), the volume and the close time (ms, the open time plus
the interval less 1); a candle is final once its close time is past. An answer with no
candle (``[]``) is a candle that has not opened yet. Anything else (another candle than the
one asked for, a price that is no positive number, Binance's error object ``{"code": -1121,
"msg": "Invalid symbol."}``, a status other than 200: 429 and 418 when rate limited, 451
where Binance refuses the region) is a ``KlinesError`` that says what came.

Every exchange is bounded as the Polymarket clients' are (``DeadlineTransport``: 5 s from
start to the last byte), and no redirect is followed.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import httpx

from app.refresher.sources.polymarket.http_deadline import DeadlineTransport

INTERVALS_MS = {"1h": 3_600_000, "4h": 14_400_000, "1m": 60_000}
TIMEOUT_S = 3.0  # each phase of an exchange (the deadline bounds the whole)
SNIPPET = 200  # characters of an unexpected answer quoted in an error
MAX_LIMIT = 1000  # candles in one answer, at most (Binance's documented bound)


class KlinesError(Exception):
    """Binance's answer was not the candle asked for; the message says what came."""


@dataclass(frozen=True)
class Candle:
    """One Binance candle: its open and close times (ms) and prices."""

    open_ms: int
    close_ms: int
    open: float
    close: float

    def final(self, now_ms: int) -> bool:
        """Whether the candle is over at ``now_ms`` (its close time is past)."""
        return now_ms > self.close_ms

    @property
    def up(self) -> bool:
        """The hourly market's outcome on this candle: UP when the close is at least the
        open (ties UP)."""
        return self.close >= self.open


def parse_candle(payload: Any, start_ms: int, interval: str) -> Candle | None:
    """The candle of ``interval`` opening at ``start_ms`` from a klines answer; None when
    the answer holds no candle (not opened yet); ``KlinesError`` otherwise."""
    if isinstance(payload, dict) and "code" in payload:
        raise KlinesError(f"Binance refused: {payload.get('msg')!r} (code {payload['code']!r})")
    if not isinstance(payload, list):
        raise KlinesError(f"expected a list of candles, got {_snippet(payload)}")
    if not payload:
        return None
    candle = _candle(payload[0], interval)
    if candle.open_ms != start_ms:
        raise KlinesError(
            f"asked for the {interval} candle opening at {start_ms}, got one from "
            f"{candle.open_ms} to {candle.close_ms}"
        )
    return candle


def parse_candles(payload: Any, start_ms: int, interval: str) -> list[Candle]:
    """The candles of ``interval`` opening at or after ``start_ms`` in a klines answer, in
    time order (empty: none opened yet); ``KlinesError`` for anything else (one before
    ``start_ms``, out of order, or off the interval's grid of multiples from the epoch)."""
    if isinstance(payload, dict) and "code" in payload:
        raise KlinesError(f"Binance refused: {payload.get('msg')!r} (code {payload['code']!r})")
    if not isinstance(payload, list):
        raise KlinesError(f"expected a list of candles, got {_snippet(payload)}")
    candles = [_candle(row, interval) for row in payload]
    step = INTERVALS_MS[interval]
    previous = start_ms - 1  # Binance's candles open on the interval's grid from the epoch
    for candle in candles:
        if candle.open_ms <= previous or candle.open_ms % step:
            raise KlinesError(
                f"a {interval} candle opening at {candle.open_ms} is not on its grid after "
                f"{previous} (asked from {start_ms})"
            )
        previous = candle.open_ms
    return candles


def _candle(row: Any, interval: str) -> Candle:
    """One candle of an answer: its open and close times (the close the open plus the
    interval less 1 ms) and its open and close prices."""
    if not isinstance(row, list) or len(row) < 7:
        raise KlinesError(f"expected a candle of at least 7 items, got {_snippet(row)}")
    open_ms, close_ms = _millis(row[0], "open time"), _millis(row[6], "close time")
    if close_ms != open_ms + INTERVALS_MS[interval] - 1:
        raise KlinesError(f"a {interval} candle from {open_ms} cannot close at {close_ms}")
    return Candle(open_ms, close_ms, _price(row[1], "open"), _price(row[4], "close"))


def _millis(raw: Any, what: str) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise KlinesError(f"the candle's {what} is no integer of milliseconds: {raw!r}")
    return raw


def _price(raw: Any, what: str) -> float:
    """A candle's price: Binance sends a decimal string; a bare number is taken too."""
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        raise KlinesError(f"the candle's {what} is no price: {raw!r}")
    try:
        value = float(raw)
    except ValueError:
        raise KlinesError(f"the candle's {what} is no price: {raw!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise KlinesError(f"the candle's {what} is no price: {raw!r}")
    return value


def _snippet(value: Any) -> str:
    """The start of an unexpected value, as JSON where it is JSON."""
    return json.dumps(value, default=repr)[:SNIPPET]


class KlinesClient:
    """Asks Binance's REST API (``base_url``: ``BINANCE_REST_URL``) for one candle at a time."""

    def __init__(
        self,
        base_url: str,
        transport: httpx.BaseTransport | None = None,
        http: httpx.Client | None = None,
    ) -> None:
        # ``http``: a client of the caller's (the live source's: its deadline, its tape
        # recording, a replay's tape), not closed here; else one of its own.
        self._base = base_url.rstrip("/")
        self._own = http is None
        self._client = http or httpx.Client(
            transport=transport or DeadlineTransport(),
            timeout=TIMEOUT_S,
            follow_redirects=False,
        )

    def candle(self, pair: str, start_s: int, interval: str = "1h") -> Candle | None:
        """The ``interval`` candle of ``pair`` (``BTCUSDT``) opening at ``start_s``; None
        before it opens; ``KlinesError`` for any other answer, ``httpx.HTTPError`` when
        Binance cannot be reached or the exchange outlasts its deadline."""
        return parse_candle(self._ask(pair, start_s, interval, 1), start_s * 1000, interval)

    def candles(self, pair: str, start_s: int, interval: str, limit: int) -> list[Candle]:
        """Up to ``limit`` (at most ``MAX_LIMIT``) ``interval`` candles of ``pair`` from the
        one opening at ``start_s`` on, in time order; errors as ``candle``'s."""
        if not 1 <= limit <= MAX_LIMIT:
            raise ValueError(f"limit {limit} is not within 1..{MAX_LIMIT}")
        return parse_candles(self._ask(pair, start_s, interval, limit), start_s * 1000, interval)

    def _ask(self, pair: str, start_s: int, interval: str, limit: int) -> Any:
        """The JSON of one klines answer of status 200; ``KlinesError`` otherwise."""
        if interval not in INTERVALS_MS:
            raise ValueError(f"unknown interval {interval!r} (known: {', '.join(INTERVALS_MS)})")
        params: dict[str, str | int] = {
            "symbol": pair,
            "interval": interval,
            "startTime": start_s * 1000,
            "limit": limit,
        }
        response = self._client.get(
            f"{self._base}/api/v3/klines", params=params, headers={"Accept": "application/json"}
        )
        try:
            payload = response.json()
        except ValueError:
            payload = None
        if response.status_code != 200:
            detail = payload.get("msg") if isinstance(payload, dict) else response.text[:SNIPPET]
            raise KlinesError(f"Binance answered {response.status_code}: {detail!r}")
        if payload is None:
            raise KlinesError(f"Binance answered no JSON: {response.text[:SNIPPET]!r}")
        return payload

    def close(self) -> None:
        """Close the connection pool (its own only)."""
        if self._own:
            self._client.close()
