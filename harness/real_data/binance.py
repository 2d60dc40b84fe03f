"""A tape (``docs/tapes.md``) from Binance 1-second klines standing in for the Chainlink spot.

What the tape holds, with the fakes' own message builders (``harness.fake_polymarket``, the
documented upstream formats):

- ``rtds``: a ``connect`` at the tape's start and the spot's history snapshot (topic
  ``crypto_prices``, the last ``history_s`` seconds, as the fake RTDS serves it); then every
  second's price as a ``crypto_prices_chainlink`` update stamped with its second, arriving
  ``lag_s`` later (1.4 s: the measured median lag of the real Chainlink feed on RTDS). A
  TWAP tape adds the reports of its lookback's topic, computed from the same seconds (the mean
  of the last ``lookback`` prices, stamped and delayed like the spot).
- ``gamma``: each window's event two minutes ahead (``FakeMarket.event()``: spot markets, or
  TWAP markets of the lookback).
- ``clob-ws``: the data has no market, so a PLACEHOLDER book (bid 0.01, ask 0.99 for every
  token) every second from a minute before each window until 5 s after it: it keeps rows
  from being stale for want of books; its mid (0.5) means nothing and must never be scored.
- optionally the OFFICIAL outcomes (``market_resolved`` two minutes after each window's end),
  where a list of them covers the window; without them the backtest computes each outcome from
  the replayed feed (next window's price to beat against this one's).

Binance is not Chainlink: the price level differs by a basis of tens of dollars and the
update rule differs, so an outcome computed from these ticks can disagree with the official
one (``bench/real.py`` counts how often).
"""

from __future__ import annotations

import csv
import heapq
import json
import math
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any

from app.backtest.replay import UNNAMED_TAPE_MARKET
from harness.fake_polymarket import (
    SPOT,
    SPOT_HISTORY_TOPIC,
    SPOT_TOPIC,
    TWAP,
    TWAP_TOPICS,
    FakeBook,
    FakeMarket,
    FakeRtds,
    chainlink_of,
    filters_of,
)
from harness.real_data.files import PUBLISHED_MARKET
from harness.real_data.klines import DAY_S, Ticks, day_start
from harness.spans import WINDOW_S

ARRIVAL_LAG_S = 1.4  # a Chainlink point reaches RTDS clients this long after its stamp (median)
HISTORY_S = 10_800  # the snapshot at connect: 3 h, what the fake RTDS keeps (history_limit)
GAMMA_AHEAD_S = 120  # each window's Gamma answer is on the tape this long before it starts
BOOKS_BEFORE_S = 60  # the source watches the next window's tokens a minute before the roll
BOOKS_AFTER_S = 5
BOOK_DELAY_S = 0.06  # each second's placeholder books arrive just after the second
RESOLVED_AFTER_S = 120  # market_resolved comes about two minutes after the end
PLACEHOLDER_BID, PLACEHOLDER_ASK, PLACEHOLDER_SIZE = "0.01", "0.99", "1000"
GAMMA_URL = "https://gamma-api.polymarket.com/events/slug/"
UP, DOWN = "up", "down"
LEAD_S = 3600  # a day's tape starts this long before midnight: the model's history warms up
TAIL_S = 150  # and ends after the day's last window has its outcome (and its resolution)


@dataclass(frozen=True)
class TapeOptions:
    """How a klines tape is laid out."""

    rule: str = SPOT  # the markets' settlement rule: spot or twap
    lookback: int = 60  # a TWAP market's lookback (seconds): 60 or 30, each has an RTDS topic
    lag_s: float = ARRIVAL_LAG_S
    history_s: int = HISTORY_S
    # The market (app.markets): its stream, slugs and tokens; a tape of UNNAMED_TAPE_MARKET
    # names none (as the one-market refresher's tapes did).
    symbol: str = UNNAMED_TAPE_MARKET

    def __post_init__(self) -> None:
        chainlink_of(self.symbol)  # an unknown market fails here
        if self.rule not in (SPOT, TWAP):
            raise ValueError(f"rule must be {SPOT} or {TWAP}, not {self.rule!r}")
        if self.rule == TWAP and self.lookback not in TWAP_TOPICS:
            raise ValueError(f"a TWAP lookback has a topic only for {sorted(TWAP_TOPICS)} s")
        if not 0 <= self.lag_s < 30 or self.history_s < 0:
            raise ValueError("lag_s must be in [0, 30) and history_s >= 0")


@dataclass(frozen=True)
class Span:
    """A tape's time span, and the windows it scores (those that start in
    [``scored_from``, ``scored_to``): each has at least ``LEAD_S`` of feed before it)."""

    start: int
    end: int
    scored_from: int
    scored_to: int


def span(first_tick: int, first_day: date, days: int = 1) -> Span:
    """The tape of ``days`` days from ``first_day``: from ``LEAD_S`` before its midnight (or
    the data's start, when it starts later) to ``TAIL_S`` after the last day's end."""
    midnight = day_start(first_day)
    # first_tick - 1: the open of the data's first kline, the instant the data begins
    start = max(midnight - LEAD_S, first_tick - 1)
    warm = math.ceil((start + LEAD_S) / WINDOW_S) * WINDOW_S
    end = midnight + days * DAY_S
    return Span(start, end + TAIL_S, max(midnight, warm), end)


def line(t: float, src: str, **fields: Any) -> dict[str, Any]:
    """One tape line (``docs/tapes.md``)."""
    return {"t": round(t, 6), "src": src, **fields}


def gamma_line(at: float, market: FakeMarket) -> dict[str, Any]:
    """The tape line of Gamma answering ``market``'s event at ``at``."""
    frame = json.dumps(market.event())
    url = GAMMA_URL + market.slug
    return line(at, "gamma", method="GET", url=url, body=None, status=200, frame=frame)


def _stamped(message: dict[str, Any], t: float) -> str:
    # The fakes put the wall clock in the envelope's timestamp; on a tape it is tape time.
    message["timestamp"] = round(t * 1000)
    return json.dumps(message)


def read_official(path: Path) -> dict[int, str]:
    """Window start -> ``up`` / ``down``, the official outcomes of a CSV with columns
    ``timestamp`` (window start, Unix seconds) and ``outcome`` (e.g.
    ``polymarket_btc_5m_enriched.csv``); rows without a clear outcome are left out."""
    found: dict[int, str] = {}
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        if not {"timestamp", "outcome"} <= set(reader.fieldnames or ()):
            raise ValueError(f"{path}: needs the columns timestamp and outcome")
        for row in reader:
            outcome = (row.get("outcome") or "").strip().lower()
            try:
                start = int(float(row["timestamp"]))
            except (TypeError, ValueError):
                continue
            if outcome in (UP, DOWN) and start % WINDOW_S == 0:
                found[start] = outcome
    return found


def market_resolved(market: FakeMarket, outcome: str, t: float) -> dict[str, Any]:
    """The CLOB's ``market_resolved`` message for ``market`` (the fields the fake CLOB sends,
    ``FakeClobWs.send_market_resolved``), stamped ``t``."""
    up = outcome == UP
    return {
        "event_type": "market_resolved",
        "market": market.condition,
        "assets_ids": [market.up_token, market.down_token],
        "winning_asset_id": market.up_token if up else market.down_token,
        "winning_outcome": "Up" if up else "Down",
        "timestamp": str(round(t * 1000)),
    }


class _Markets:
    """FakeMarket per window start, and each token's placeholder book (built once)."""

    def __init__(self, options: TapeOptions) -> None:
        self.options = options
        self._markets: dict[int, FakeMarket] = {}
        self._books: dict[str, dict[str, Any]] = {}

    def get(self, t0: int) -> FakeMarket:
        market = self._markets.get(t0)
        if market is None:
            rule, lookback = self.options.rule, self.options.lookback
            market = self._markets[t0] = FakeMarket(
                t0, rule=rule, lookback=lookback, symbol=self.options.symbol
            )
        return market

    def books(self, t0: int, ts_ms: int) -> list[dict[str, Any]]:
        market = self.get(t0)
        found = []
        for token in market.tokens:
            book = self._books.get(token)
            if book is None:
                placeholder = FakeBook(
                    bids={PLACEHOLDER_BID: PLACEHOLDER_SIZE},
                    asks={PLACEHOLDER_ASK: PLACEHOLDER_SIZE},
                )
                book = placeholder.as_json(token, market.condition, 0) | {"event_type": "book"}
                self._books[token] = book
            found.append(book | {"timestamp": str(ts_ms)})
        return found


def _subscription(chainlink: str, topics: list[str]) -> str:
    """The RTDS subscribe frame a refresher of this one market sends (the replay reads the
    tape's market from it)."""
    subscriptions = [{"topic": t, "type": "*", "filters": filters_of(chainlink)} for t in topics]
    return json.dumps({"action": "subscribe", "subscriptions": subscriptions})


def _head(ticks: Ticks, start: int, options: TapeOptions) -> Iterator[dict[str, Any]]:
    chainlink = chainlink_of(options.symbol)
    yield line(start, "rtds", event="connect")
    if options.symbol != UNNAMED_TAPE_MARKET:  # its tapes stay as they were
        topics = [SPOT_TOPIC, *(TWAP_TOPICS[k] for k in sorted(TWAP_TOPICS))]
        yield line(start + 0.0005, "rtds", dir="out", frame=_subscription(chainlink, topics))
    yield line(start + 0.001, "clob-ws", event="connect")
    at = start + 0.01
    # Every point that has arrived by the snapshot is in it; later ones come as updates.
    history = ticks.span(start - options.history_s, math.floor(at - options.lag_s))
    if history:
        points = [(s * 1000, Decimal(close)) for s, close in history]
        message = FakeRtds.first_message(
            SPOT_TOPIC, points, wire_topic=SPOT_HISTORY_TOPIC, symbol=chainlink
        )
        yield line(at, "rtds", frame=_stamped(message, at))


def _updates(ticks: Ticks, start: int, end: int, options: TapeOptions) -> Iterator[dict[str, Any]]:
    first = math.floor(start + 0.01 - options.lag_s) + 1  # the first point after the snapshot
    chainlink = chainlink_of(options.symbol)
    for second, close in ticks.span(first, math.floor(end - options.lag_s)):
        t = second + options.lag_s
        message = FakeRtds.update(SPOT_TOPIC, second * 1000, Decimal(close), symbol=chainlink)
        yield line(t, "rtds", frame=_stamped(message, t))


def _twap_updates(
    ticks: Ticks, start: int, end: int, options: TapeOptions
) -> Iterator[dict[str, Any]]:
    """Each second's TWAP report: the mean of the prices of the last ``lookback`` seconds
    (all of them present), stamped and delayed like the spot, just after it."""
    lookback, topic = options.lookback, TWAP_TOPICS[options.lookback]
    first = math.floor(start + 0.01 - options.lag_s) + 1
    last = math.floor(end - options.lag_s)
    closes = ticks.closes
    window: deque[Decimal] = deque()
    total = Decimal(0)  # exact: a running sum of Decimals never drifts
    for second in range(first - lookback + 1, last + 1):
        close = closes.get(second)
        if close is None:
            window.clear()  # no report until ``lookback`` consecutive seconds again
            total = Decimal(0)
            continue
        value = Decimal(close)
        window.append(value)
        total += value
        if len(window) > lookback:
            total -= window.popleft()
        if len(window) == lookback and second >= first:
            t = second + options.lag_s + 0.001
            mean = (total / lookback).quantize(Decimal("1e-12"))
            message = FakeRtds.update(
                topic, second * 1000, mean, symbol=chainlink_of(options.symbol)
            )
            yield line(t, "rtds", frame=_stamped(message, t))


def _gamma(markets: _Markets, start: int, end: int) -> Iterator[dict[str, Any]]:
    t0 = math.floor(start / WINDOW_S) * WINDOW_S
    while t0 - GAMMA_AHEAD_S <= end:
        market = markets.get(t0)
        yield gamma_line(max(start + 0.002, t0 - GAMMA_AHEAD_S), market)
        t0 += WINDOW_S


_STAMP_MARK = -1  # a book's stamp while its frame is a template (never a real one)


def _books(markets: _Markets, start: int, end: int) -> Iterator[dict[str, Any]]:
    # The same windows' books differ only in their stamps: their frame is serialised once
    # per set of windows, with a mark where the stamps go (the same text as json.dumps).
    mark = json.dumps({"timestamp": str(_STAMP_MARK)})[1:-1]
    template: tuple[tuple[int, ...], list[str]] = ((), [])
    for second in range(start + 1, end + 1):
        current = math.floor(second / WINDOW_S) * WINDOW_S
        starts = [current]
        if second - current <= BOOKS_AFTER_S:
            starts.insert(0, current - WINDOW_S)
        if current + WINDOW_S - second <= BOOKS_BEFORE_S:
            starts.append(current + WINDOW_S)
        t = second + BOOK_DELAY_S
        ts_ms = round(t * 1000)
        if template[0] != tuple(starts):
            marked = [book for t0 in starts for book in markets.books(t0, _STAMP_MARK)]
            template = (tuple(starts), json.dumps(marked).split(mark))
        stamp = json.dumps({"timestamp": str(ts_ms)})[1:-1]
        yield line(t, "clob-ws", frame=stamp.join(template[1]))


def _resolutions(
    markets: _Markets, official: Mapping[int, str], start: int, end: int
) -> Iterator[dict[str, Any]]:
    for t0 in sorted(official):
        t = t0 + WINDOW_S + RESOLVED_AFTER_S
        if start <= t0 and t <= end:
            message = market_resolved(markets.get(t0), official[t0], t)
            yield line(t, "clob-ws", frame=json.dumps(message))


def lines(
    ticks: Ticks,
    start: int,
    end: int,
    options: TapeOptions | None = None,
    official: Mapping[int, str] | None = None,
) -> Iterator[dict[str, Any]]:
    """Every line of the tape from ``start`` to ``end`` (Unix seconds), in ``t`` order;
    ``official``: window start -> ``up`` / ``down``, written as ``market_resolved``."""
    options = options or TapeOptions()
    if end <= start:
        raise ValueError("the tape must end after it starts")
    if official and options.rule != SPOT:
        # The official outcomes are those of spot-settled markets: no TWAP market existed.
        raise ValueError("official outcomes belong to spot markets: a TWAP tape has none")
    if official and options.symbol != PUBLISHED_MARKET:
        raise ValueError("the official outcomes (polymarket_btc_5m_enriched.csv) are BTC's")
    markets = _Markets(options)
    streams = [
        _head(ticks, start, options),
        _gamma(markets, start, end),
        _books(markets, start, end),
        _updates(ticks, start, end, options),
    ]
    if options.rule == TWAP:
        streams.append(_twap_updates(ticks, start, end, options))
    if official:
        streams.append(_resolutions(markets, official, start, end))
    # Each stream is in t order; ties keep the streams' order (snapshot before updates).
    return heapq.merge(*streams, key=lambda item: float(item["t"]))
