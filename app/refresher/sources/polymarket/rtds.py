"""The real-time data socket: a coin's Chainlink spot and its 60- and 30-second TWAP reports.

The spot topic (``crypto_prices_chainlink``) is the model's price and its volatility; a TWAP
topic only gives a TWAP market its price to beat. Updates carry ``payload: {symbol,
timestamp (ms), value}``; the TWAP topics add ``full_accuracy_value`` (a decimal string scaled
by 1e18 today, announced to become a plain decimal: it is cross-checked against ``value``).
After subscribing, a history snapshot arrives (``type: "subscribe"``, ``payload.data:
[{timestamp, value}, ...]``); the spot's comes under the topic ``crypto_prices``, possibly
after live points. Every point is merged into its series in time order, so a back-fill after
a reconnect repairs the history (and the latch at T0). Error frames
(``{statusCode, body: {message}}``) are counted and logged at most once per kind a minute.

Nothing is believed unheard (docs/reliability.md): a point stamped ahead of our clock by more
than ``MAX_SKEW_MS`` is dropped here; every other point is judged by its series before it is
believed (``price_series.py``), which keeps the believed ones (``points.py``).
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any

from app.markets import Market
from app.refresher.sources.polymarket.feed import Feed, each
from app.refresher.sources.polymarket.price_series import (
    SPOT_HISTORY_S,
    TWAP_HISTORY_S,
    PriceSeries,
)
from app.refresher.sources.polymarket.suspects import Suspects
from app.refresher.sources.polymarket.twap_witness import TwapWitness
from app.refresher.sources.polymarket.witness import ExchangeWitness

SPOT_KEY = "spot"
# Series keys by TWAP lookback (seconds): the markets say which lookback settles them.
TWAP_KEYS = {60: "twap60", 30: "twap30"}
TOPICS = {
    SPOT_KEY: "crypto_prices_chainlink",
    "twap60": "crypto_prices_twap_sixty",
    "twap30": "crypto_prices_twap_thirty",
}
SPOT_HISTORY_TOPIC = "crypto_prices"  # where the spot's history snapshot has been seen
# The exchanges' prices (Binance's, ``payload.symbol`` a pair: ``btcusdt``): the spot's
# witness. The same name as the spot's history, told apart by the symbol's form.
EXCHANGE_TOPIC = "crypto_prices"
EXACT_TOLERANCE = 0.01  # full_accuracy_value may differ from value by rounding, not by 1 %
SCALE = Decimal(10**18)
# A point stamped further ahead of our clock is not believed: real Chainlink points arrive
# 1.3-1.6 s AFTER their stamp, never before; 2 s allows for our clock's own error.
MAX_SKEW_MS = 2_000


def _number(raw: Any) -> float | None:
    if isinstance(raw, bool) or not isinstance(raw, int | float | str):
        return None
    try:
        value = float(raw)
    except ValueError:
        return None
    return value if math.isfinite(value) and value > 0 else None


def _stamp(raw: Any) -> float | None:
    """A message's or point's ``timestamp``: epoch ms as a JSON number (a string is none)."""
    return None if isinstance(raw, str) else _number(raw)


def point_value(point: dict[str, Any]) -> float | None:
    """The price of one point: ``full_accuracy_value`` when it agrees with ``value``
    (read as scaled by 1e18 or as a plain decimal, whichever agrees), else ``value``;
    None when they disagree by more than 1 % (a garbage exact value is never a price)."""
    value = _number(point.get("value"))
    exact = point.get("full_accuracy_value")
    if exact is None:
        return value
    if value is None or not isinstance(exact, str):
        return None
    try:
        raw = Decimal(exact)
    except (InvalidOperation, ValueError):
        return None
    if not raw.is_finite() or raw <= 0:
        return None
    for candidate in (float(raw / SCALE), float(raw)):
        if abs(candidate - value) <= EXACT_TOLERANCE * value:
            return candidate
    return None


def _series_of(
    market: Market,
    clock: Callable[[], float],
    witness: ExchangeWitness,
    twaps: tuple[TwapWitness, ...],
    windows: tuple[int, ...],
) -> dict[str, PriceSeries]:
    """A market's spot (witnessed by its exchange price and its TWAP reports, its settlement
    factors measured for the window lengths ``windows``) and TWAP series, judged by its own
    jump bound and window move."""
    base, move = market.jump_base, market.window_move
    spot = PriceSeries(
        SPOT_HISTORY_S,
        clock,
        jump_base=base,
        witness=witness,
        window_move=move,
        twaps=twaps,
        windows=windows,
    )
    return {
        key: spot
        if key == SPOT_KEY
        else PriceSeries(TWAP_HISTORY_S, clock, anchor=spot, jump_base=base, window_move=move)
        for key in TOPICS
    }


class RtdsFeed(Feed):
    """Subscribes to the spot and both TWAP topics of each market's Chainlink stream, on one
    socket; each stream has series of its own."""

    name_for_logs = "rtds"
    tape_src = "rtds"
    ping_every_s = 5.0

    def __init__(
        self,
        url: str,
        stop: threading.Event,
        markets: tuple[Market, ...],
        clock: Callable[[], float] = time.time,
        windows: tuple[int, ...] = (),
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(url, stop, clock=monotonic)  # the connection's silences and pings
        self._clock = clock  # our wall clock: a point stamped ahead of it is not believed
        self.suspects = Suspects(self.name_for_logs)
        self._markets = markets
        # Exchange pair (``btcusdt``) -> the witness of that coin's spot.
        self.witnesses = {
            market.exchange: ExchangeWitness(market.exchange, clock) for market in markets
        }
        # Chainlink symbol -> key -> series; a TWAP report is judged by its own coin's spot
        # until its series has points.
        # (Chainlink symbol, TWAP key) -> that topic's reports as the spot's second witness.
        self._twap_witnesses = {
            (market.chainlink, key): TwapWitness(TOPICS[key], lookback, clock)
            for market in markets
            for lookback, key in TWAP_KEYS.items()
        }
        self._by_symbol = {
            market.chainlink: _series_of(
                market,
                clock,
                self.witnesses[market.exchange],
                tuple(self._twap_witnesses[market.chainlink, key] for key in TWAP_KEYS.values()),
                windows,
            )
            for market in markets
        }
        self._spot_of_pair = {
            market.exchange: self._by_symbol[market.chainlink][SPOT_KEY] for market in markets
        }
        # The first market's series (what a one-market caller, and the tests, read).
        self.series = self._by_symbol[markets[0].chainlink]
        self._key_of_topic = {topic: key for key, topic in TOPICS.items()}
        self._key_of_topic[SPOT_HISTORY_TOPIC] = SPOT_KEY
        self.on_change: Callable[[], None] | None = None  # a series took a new point

    def of(self, market: Market) -> dict[str, PriceSeries]:
        """``market``'s series, by key (``SPOT_KEY``, ``TWAP_KEYS``)."""
        return self._by_symbol[market.chainlink]

    def subscription(self) -> list[str] | None:
        """One subscribe message for every topic of every market, each with the documented
        compact filter (no spaces) naming its Chainlink symbol, and the exchange prices of
        every market's coin (``crypto_prices``: the filter is the pairs, comma-separated)."""
        subscriptions = [
            {
                "topic": topic,
                "type": "*",
                "filters": json.dumps({"symbol": market.chainlink}, separators=(",", ":")),
            }
            for market in self._markets
            for topic in TOPICS.values()
        ]
        pairs = ",".join(market.exchange for market in self._markets)
        subscriptions.append({"topic": EXCHANGE_TOPIC, "type": "update", "filters": pairs})
        return [json.dumps({"action": "subscribe", "subscriptions": subscriptions})]

    def handle(self, message: Any) -> None:
        """Merge the points of an update or a history snapshot; log an error frame once;
        ``on_change`` when any series took a new point."""
        before = self._versions()
        self._handle(message)
        if self.on_change is not None and before != self._versions():
            self.on_change()

    def _versions(self) -> list[int]:
        return [s.version for table in self._by_symbol.values() for s in table.values()]

    def _handle(self, message: Any) -> None:
        for item in each(message):
            if "statusCode" in item and "topic" not in item:
                self._error(item)
                continue
            key = self._key_of_topic.get(str(item.get("topic", "")))
            payload = item.get("payload")
            if key is None or not isinstance(payload, dict):
                continue
            symbol = payload.get("symbol")
            if isinstance(symbol, str) and symbol.lower() in self._spot_of_pair:
                self._witnessed(symbol.lower(), payload)
                continue
            # A payload without a symbol can only be the one market's.
            if isinstance(symbol, str):
                chainlink = symbol.lower()
            elif len(self._markets) == 1:
                chainlink = self._markets[0].chainlink
            else:
                continue
            table = self._by_symbol.get(chainlink)
            if table is None:
                continue
            series = table[key]
            data = payload.get("data")
            points = self._believable(each(data if isinstance(data, list) else [payload]))
            if isinstance(data, list):
                kinds = series.merge(points)
            else:
                sent = _stamp(item.get("timestamp"))  # when RTDS sent it (its own clock)
                if sent is not None:
                    for ts_ms, _ in points:
                        series.note_sent(ts_ms, int(sent))
                verdicts = [(point, series.offer(*point)) for point in points]
                kinds = [kind for _, kind in verdicts if kind is not None]
                twap = self._twap_witnesses.get((chainlink, key))
                if twap is not None:
                    self._reported(twap, table[SPOT_KEY], [p for p, k in verdicts if k is None])
            self._note_kinds(kinds, series)

    def _reported(
        self, twap: TwapWitness, spot: PriceSeries, reports: list[tuple[int, float]]
    ) -> None:
        """TWAP reports its series took: the spot points that waited for them are judged, and
        the spot's second witness learns from them."""
        for report in reports:
            twap.report(*report)
        self._note_kinds(spot.settle(), spot)
        newest = spot.latest()
        if newest is not None:
            twap.learn(spot.mean_and_carry, newest[0])

    def _witnessed(self, pair: str, payload: dict[str, Any]) -> None:
        """Exchange prices of ``pair`` (an update, or a history's ``data``): the witness takes
        them, and the spot points that waited for them are judged."""
        data = payload.get("data")
        witness = self.witnesses[pair]
        for ts_ms, value in self._believable(each(data if isinstance(data, list) else [payload])):
            witness.add(ts_ms, value)
        spot = self._spot_of_pair[pair]
        self._note_kinds(spot.settle(), spot)

    def twap_doubt(self, market: Market) -> str | None:
        """Why ``market``'s spot is not believed by its TWAP reports (the newest whose span
        the spot covers, against its mean there), while its exchange price has no verdict;
        None when they agree, or cannot tell."""
        if self.witnesses[market.exchange].judging:
            return None  # the exchange price judges every point: a TWAP at odds is the suspect
        spot = self.of(market)[SPOT_KEY]
        newest = spot.latest()
        if newest is None:
            return None
        vol = spot.volatility()
        sigma = vol.sigma_1s if vol is not None else None
        for key in TWAP_KEYS.values():
            witness = self._twap_witnesses[market.chainlink, key]
            doubt = witness.doubt(spot.mean_and_carry, newest[0], sigma)
            if doubt is not None:
                return doubt
        return None

    def alone_doubt(self, market: Market) -> str | None:
        """Why ``market``'s spot has no witness left: its exchange price spoke, then went
        silent, and no TWAP report judges; None otherwise. A feed that never carried the
        exchange price (a tape recorded without it) is judged alone, as before (issue 48,
        point 1: docs/reliability.md)."""
        exchange = self.witnesses[market.exchange]
        if exchange.judging or exchange.newest_ms() is None:
            return None
        keys = TWAP_KEYS.values()
        if any(self._twap_witnesses[market.chainlink, key].judging for key in keys):
            return None
        return (
            f"no witness left: the exchange price ({market.exchange}) is silent and no TWAP "
            "report judges the spot"
        )

    def _note_kinds(self, kinds: list[str], series: PriceSeries) -> None:
        """Count the points not believed, by kind (one log line per kind a minute at most)."""
        if not kinds:
            return  # the usual case, on every message: nothing to build
        why = {
            "jump": "too far from the series' own",
            "out_of_range": "at a level no window reaches",
            "old_stamp": "stamped before the history kept (in seconds?)",
            "disagrees": f"contradicted by the exchange price: {series.doubt()}",
        }
        for kind in sorted(set(kinds)):
            self.suspects.note(kind, f"{kinds.count(kind)} point(s) {why.get(kind, kind)}")

    def _believable(self, items: list[dict[str, Any]]) -> list[tuple[int, float]]:
        """(ts_ms, value) of the points that are numbers and not stamped in the future."""
        horizon_ms = self._clock() * 1000 + MAX_SKEW_MS
        points, bad, future = [], 0, 0
        for point in items:
            ts, value = _stamp(point.get("timestamp")), point_value(point)
            if ts is None or value is None:
                bad += 1
            elif ts > horizon_ms:
                future += 1
            else:
                points.append((int(ts), value))
        if bad:
            self.suspects.note("out_of_range", f"{bad} point(s) without a usable time or value")
        if future:
            self.suspects.note("future_stamp", f"{future} point(s) stamped ahead of our clock")
        return points

    def on_connect(self) -> None:
        """After a reconnect, what was missed is a gap until a history snapshot repairs it."""
        for table in self._by_symbol.values():
            for series in table.values():
                series.connection_lost()

    def _error(self, item: dict[str, Any]) -> None:
        body = item.get("body")
        message = body.get("message") if isinstance(body, dict) else body
        self.suspects.note("error_frame", f"{item.get('statusCode')}: {str(message)[:200]}")
