"""A coin's 1-minute closes of the last days, from Binance's klines, kept up to date (issue 49,
point 3): the history the long-horizon variance reads (``volatility/long_horizon.py``).

At start ``refresh`` fetches the last ``days`` days (1,000 candles an answer, 1,440 a day);
each later call fetches the minutes closed since the newest kept. Only final candles are
kept (a minute still running is not a close yet), older ones than ``days`` are dropped, and
the ``LongHorizon`` is computed once per new minute. A refused or failed answer keeps what is
held (its reason in ``error``) and is asked again at the next call; the source's upkeep
thread calls it, never a row.
"""

from __future__ import annotations

import logging
import threading

import httpx

from app.refresher.sources.binance.klines import MAX_LIMIT, KlinesClient, KlinesError
from app.refresher.volatility.long_horizon import MINUTE_S, LongHorizon, long_horizon

log = logging.getLogger(__name__)

DAY_S = 86_400
MAX_PAGES = 8  # answers one refresh asks for at most (a cold start of 2 days takes 3)
ERROR_PAUSE_S = 30.0  # after a refused or failed answer, nothing is asked for this long


class MinuteHistory:
    """``pair``'s 1-minute closes of the last ``days`` days; thread-safe."""

    def __init__(self, klines: KlinesClient, pair: str, days: int = 2) -> None:
        self._klines = klines
        self.pair = pair
        self._days = days
        self._closes: list[tuple[int, float]] = []  # (minute start s, close), in time order
        self._horizon: LongHorizon | None = None
        self.error: str | None = None
        self._paused_until = -float("inf")
        self._lock = threading.Lock()
        self._refreshing = threading.Lock()  # one refresh at a time; another call skips

    def closes(self) -> list[tuple[int, float]]:
        """A copy of the closes held."""
        with self._lock:
            return list(self._closes)

    def horizon(self) -> LongHorizon | None:
        """The long-horizon variance of the closes held (None while too few)."""
        with self._lock:
            return self._horizon

    def refresh(self, now: float) -> None:
        """Fetch the minutes closed by ``now`` since the newest held (all of the last
        ``days`` days at first), at most ``MAX_PAGES`` answers; nothing while another
        refresh runs or for ``ERROR_PAUSE_S`` after a refused or failed answer."""
        if now < self._paused_until or not self._refreshing.acquire(blocking=False):
            return
        try:
            self._refresh(now)
        finally:
            self._refreshing.release()

    def _refresh(self, now: float) -> None:
        oldest = int(now) - self._days * DAY_S
        oldest -= oldest % MINUTE_S
        with self._lock:
            start = self._closes[-1][0] + MINUTE_S if self._closes else oldest
        found: list[tuple[int, float]] = []
        now_ms = int(now * 1000)
        try:
            for _ in range(MAX_PAGES):
                if start + MINUTE_S > now:
                    break  # the minute from ``start`` has not closed yet
                candles = self._klines.candles(self.pair, start, "1m", MAX_LIMIT)
                final = [c for c in candles if c.final(now_ms)]
                found += [(c.open_ms // 1000, c.close) for c in final]
                if len(final) < len(candles) or len(candles) < MAX_LIMIT:
                    break  # caught up
                start = candles[-1].open_ms // 1000 + MINUTE_S
            error = None
        except (KlinesError, httpx.HTTPError) as exc:
            error = f"{type(exc).__name__}: {exc}"[:200]
            log.warning("binance 1m klines %s: %s", self.pair, error)
        with self._lock:
            self.error = error
            if error is not None:
                self._paused_until = now + ERROR_PAUSE_S
            newest = self._closes[-1][0] if self._closes else -1
            fresh = [c for c in found if c[0] >= oldest and c[0] > newest]
            if fresh:
                self._closes = [c for c in self._closes if c[0] >= oldest] + fresh
                self._horizon = long_horizon(self._closes)
