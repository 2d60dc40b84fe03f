"""The real-time data socket: Chainlink BTC/USD, spot and 60-second TWAP.

Both topics are subscribed; the market's rule picks which one settles it. Updates carry
``payload: {symbol, timestamp (ms), value}``; the TWAP topic adds ``full_accuracy_value``,
a decimal string scaled by 1e18 (preferred: exact). The first message after subscribing
may instead carry ``payload.data: [{timestamp, value}, ...]``.
"""

from __future__ import annotations

import bisect
import json
import math
import threading
import time
from decimal import Decimal, InvalidOperation
from typing import Any

from app.refresher.model import SPOT, TWAP, RealizedVolatility
from app.refresher.sources.polymarket.feed import Feed, each

TOPICS = {SPOT: "crypto_prices_chainlink", TWAP: "crypto_prices_twap_sixty"}
HISTORY_S = 1800
# Public studies scale 1-second realised variance up for 5-minute windows (microstructure).
VARIANCE_SCALE = 1.75
FALLBACK_SIGMA = 0.5 / math.sqrt(365 * 24 * 3600)


def _value(point: dict[str, Any]) -> float | None:
    exact = point.get("full_accuracy_value")
    if isinstance(exact, str):
        try:
            scaled = Decimal(exact)
            if scaled.is_finite() and scaled > 0:
                return float(scaled / Decimal(10**18))
        except (InvalidOperation, ValueError):
            pass
        return None  # a garbage exact value is never a price, whatever "value" says
    raw = point.get("value")
    if isinstance(raw, bool) or not isinstance(raw, int | float | str):
        return None
    try:
        value = float(raw)
    except ValueError:
        return None
    return value if math.isfinite(value) and value > 0 else None


class PriceSeries:
    """Recent points of one topic: the latest, a history for latching, a volatility."""

    def __init__(self) -> None:
        self._times: list[int] = []
        self._values: list[float] = []
        self.received_at = 0.0  # monotonic time of the newest point
        self.vol = RealizedVolatility(window=900, scale=VARIANCE_SCALE, fallback=FALLBACK_SIGMA)
        self._lock = threading.Lock()

    def add(self, ts_ms: int, value: float) -> None:
        """Record a point (out-of-order and duplicate timestamps are ignored)."""
        with self._lock:
            if self._times and ts_ms <= self._times[-1]:
                return
            self._times.append(ts_ms)
            self._values.append(value)
            self.received_at = time.monotonic()
            cut = bisect.bisect_left(self._times, ts_ms - HISTORY_S * 1000)
            if cut:
                del self._times[:cut], self._values[:cut]
        self.vol.add(ts_ms / 1000.0, value)

    def latest(self) -> tuple[int, float] | None:
        """The newest (ts_ms, value)."""
        with self._lock:
            return (self._times[-1], self._values[-1]) if self._times else None

    def at(self, ts_ms: int, tolerance_ms: int) -> float | None:
        """The value in force at ``ts_ms``: the last point at or before it, else the first after
        it, within ``tolerance_ms``."""
        with self._lock:
            i = bisect.bisect_right(self._times, ts_ms)
            if i and ts_ms - self._times[i - 1] <= tolerance_ms:
                return self._values[i - 1]
            if i < len(self._times) and self._times[i] - ts_ms <= tolerance_ms:
                return self._values[i]
            return None


class RtdsFeed(Feed):
    """Subscribes to the spot and TWAP topics for btc/usd."""

    name_for_logs = "rtds"
    ping_every_s = 5.0

    def __init__(self, url: str, stop: threading.Event) -> None:
        super().__init__(url, stop)
        self.series = {SPOT: PriceSeries(), TWAP: PriceSeries()}
        self._by_topic = {topic: self.series[rule] for rule, topic in TOPICS.items()}

    def subscription(self) -> list[str] | None:
        """One subscribe message for both topics."""
        filters = json.dumps({"symbol": "btc/usd"})
        subscriptions = [
            {"topic": topic, "type": "*", "filters": filters} for topic in TOPICS.values()
        ]
        return [json.dumps({"action": "subscribe", "subscriptions": subscriptions})]

    def handle(self, message: Any) -> None:
        """Record the points of an update, or of a first message's ``data`` list."""
        for item in each(message):
            series = self._by_topic.get(str(item.get("topic", "")))
            payload = item.get("payload")
            if series is None or not isinstance(payload, dict):
                continue
            symbol = payload.get("symbol")
            if isinstance(symbol, str) and symbol.lower() != "btc/usd":
                continue
            points = payload.get("data") if isinstance(payload.get("data"), list) else [payload]
            for point in each(points):
                ts, value = point.get("timestamp"), _value(point)
                if isinstance(ts, int | float) and not isinstance(ts, bool) and value:
                    series.add(int(ts), value)
