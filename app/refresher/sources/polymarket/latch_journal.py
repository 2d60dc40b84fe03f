"""The prices to beat the settlement stream gave, kept in Redis for the next refresher.

A window's price to beat is latched from the Chainlink stream at T0 (``price_to_beat.py``), and
nothing outside that stream may stand in for a TWAP market's (the site's and Gamma's values
may be the spot). A refresher that starts after T0 (a restart, a deploy, the standby taking the
lease) has no point at T0 to latch: without a record it would show no P(up) until the next
window, for up to 5 hours on a 4-hour market. So every latched value is written here (under
the window's slug, with its condition id, rule and lookback) and read back by a refresher that
lacks it. Only the settlement stream's own values are written (never a fallback); a record is
taken only for the very market it was written for. Without Redis (``memory://``) there is no
journal: a restart then waits for the next window, as the row's reason says.

I/O happens only in ``flush`` and ``recall``, both called from the upkeep thread; ``note``
(called while a row is built) only queues.
"""

from __future__ import annotations

import json
import logging
import math
import threading
from typing import Any

from app.refresher.sources.polymarket.discovery import LiveWindow

log = logging.getLogger(__name__)

PREFIX = "probboard:price-to-beat:"
JOURNAL_VIA = "journal:"  # ``sources.priceToBeat`` of a recalled value: journal:<its via>
TIMEOUT_S = 1.0  # each Redis call; the upkeep thread waits no longer
KEEP_AFTER_END_S = 3600  # a record outlives its window by an hour (late settlement lookups)


def _key(window: LiveWindow) -> str | None:
    market = window.market
    return PREFIX + market.slug if market is not None else None


class LatchJournal:
    """Writes and reads the latched prices to beat on Redis at ``url``."""

    def __init__(self, url: str) -> None:
        # Here, not at the top: a replay (the backtest) builds the source without Redis.
        from app.redis_pool import RedisFallback, redis_client

        self._client = redis_client(url, TIMEOUT_S, size=2)
        self._fallback = RedisFallback("price-to-beat journal", "prices to beat not kept")
        self._pending: dict[str, tuple[str, int]] = {}
        self._lock = threading.Lock()

    def note(self, window: LiveWindow, value: float, via: str) -> None:
        """Queue ``window``'s price to beat ``value`` (from the settlement stream ``via``)
        for the next ``flush``; no I/O."""
        market = window.market
        key = _key(window)
        if market is None or key is None or via.startswith(JOURNAL_VIA):
            return
        record = {
            "value": value,
            "via": via,
            "condition": market.condition_id,
            "rule": market.rule,
            "lookback": market.lookback_s,
            "t0": window.t0,
        }
        ttl = max(1, window.span.end(window.t0) - window.t0 + KEEP_AFTER_END_S)
        with self._lock:
            self._pending[key] = (json.dumps(record), ttl)

    @property
    def queued(self) -> int:
        """How many records wait for the next ``flush`` (Redis away: they are kept)."""
        with self._lock:
            return len(self._pending)

    def flush(self) -> None:
        """Write what ``note`` queued (one pipelined round trip); kept for the next flush
        while Redis is away."""
        with self._lock:
            pending, self._pending = self._pending, {}
        if not pending:
            return

        def write() -> bool:
            with self._client.pipeline(transaction=False) as pipe:
                for key, (text, ttl) in pending.items():
                    pipe.set(key, text, ex=ttl)
                pipe.execute()
            return True

        if not self._fallback.call(write, lambda: False):
            with self._lock:
                self._pending = {**pending, **self._pending}

    def recall(self, window: LiveWindow) -> tuple[float, str] | None:
        """``window``'s price to beat as a refresher latched it, with ``journal:<via>``; None
        when none was kept for this very market (its condition, rule and lookback)."""
        key = _key(window)
        if key is None:
            return None
        text = self._fallback.call(lambda: self._client.get(key), lambda: None)
        return _believed(window, text)

    def close(self) -> None:
        """Write what is queued, then drop the connections."""
        try:
            self.flush()
        finally:
            self._client.close()


def _believed(window: LiveWindow, text: Any) -> tuple[float, str] | None:
    """The record's value when it is well formed and written for ``window``'s market."""
    market = window.market
    if market is None or not isinstance(text, bytes | str):
        return None
    try:
        record = json.loads(text)
    except ValueError:
        log.warning("price-to-beat journal: %s is not JSON; ignored", _key(window))
        return None
    if not isinstance(record, dict):
        return None
    value, via = record.get("value"), record.get("via")
    mine = (
        record.get("condition") == market.condition_id
        and record.get("rule") == market.rule
        and record.get("lookback") == market.lookback_s
        and record.get("t0") == window.t0
    )
    if not mine or not isinstance(via, str) or not via.startswith("rtds:"):
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    if value <= 0:
        return None
    return float(value), JOURNAL_VIA + via


__all__ = ["JOURNAL_VIA", "LatchJournal"]
