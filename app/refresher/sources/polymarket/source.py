"""The board row from the live market: tokens, books, the price, the price to beat, the model.

Building a row does no network I/O: the sockets feed books and prices in their threads, and
an upkeep thread does every HTTP call (Gamma lookups, REST books, the site's open price), so
a hanging upstream can never hold the refresher's tick.

Every number says where it came from (``sources``) and how old it is (``inputAgesMs``);
the row's ``ts`` is the time of its OLDEST input that matters (both books and the price),
so the row goes stale when any of them goes silent. A missing input leaves its fields null
and the row stale: nothing is invented.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx

from app.refresher.model import TWAP, percentages, probability_up
from app.refresher.sources import WINDOW_S, window_start
from app.refresher.sources.polymarket.book import Books, Quote
from app.refresher.sources.polymarket.clob import REST, ClobFeed, fetch_books
from app.refresher.sources.polymarket.gamma import GammaClient, UpstreamError, WindowMarket
from app.refresher.sources.polymarket.rtds import TOPICS, RtdsFeed

log = logging.getLogger(__name__)

PREFETCH_S = 60  # look up the next window this long before the roll
UPKEEP_S = 0.25
DISCOVERY_RETRY_S = 2.0
BOOK_FRESH_S = 5.0  # a WebSocket quote older than this is refreshed over REST
REST_MIN_INTERVAL_S = 1.0  # /books: 500 requests per 10 s allowed; we stay far below
CROSS_CHECK_S = 30.0
SITE_RETRY_S = 10.0
LATCH_TOLERANCE_MS = 5000


@dataclass(frozen=True)
class Upstreams:
    """Where each upstream lives (all configurable)."""

    gamma: str
    clob: str
    clob_ws: str
    rtds: str
    site: str


@dataclass
class _Window:
    market: WindowMarket | None = None
    looked_up_at: float = 0.0
    price_to_beat: float | None = None
    price_to_beat_via: str | None = None
    site_tried_at: float = 0.0
    fetched_at_ms: int = 0
    errors: list[str] = field(default_factory=list)


class PolymarketSource:
    """The live BTC 5-minute row; feeds start on first use."""

    name = "polymarket"

    def __init__(
        self,
        upstreams: Upstreams,
        http: httpx.Client | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.upstreams = upstreams
        self._clock = clock
        self.http = http or httpx.Client(
            timeout=httpx.Timeout(3.0, connect=2.0),
            headers={"User-Agent": "probboard/0.1"},
            follow_redirects=False,
        )
        self.gamma = GammaClient(upstreams.gamma, self.http)
        self.books = Books()
        self.stop = threading.Event()
        self.clob = ClobFeed(upstreams.clob_ws, self.books, self.stop)
        self.rtds = RtdsFeed(upstreams.rtds, self.stop)
        self._windows: dict[int, _Window] = {}
        self._started = False
        self._created = clock()
        self._rest_at = 0.0
        self._checked_at = 0.0
        self._lock = threading.Lock()
        self._upkeep_thread = threading.Thread(
            target=self._upkeep_forever, name="probboard-upkeep", daemon=True
        )

    # -- lifecycle --------------------------------------------------------------------
    def start(self) -> None:
        """Start the WebSocket threads (idempotent)."""
        if not self._started:
            self._started = True
            self.clob.start()
            self.rtds.start()
            self._upkeep_thread.start()

    def close(self) -> None:
        """Stop the threads and close the HTTP client."""
        self.stop.set()
        self.http.close()

    def warm_up(self, timeout_s: float) -> None:
        """Wait (up to ``timeout_s``) until books and a price have arrived: for ``--once``."""
        self.start()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            row = self.rows(self._clock())[0]
            has_book = row["up_bid"] is not None or row["up_ask"] is not None
            if has_book and row["price"] is not None:
                return
            time.sleep(0.2)

    # -- discovery --------------------------------------------------------------------
    def _window(self, t0: int) -> _Window:
        with self._lock:
            window = self._windows.get(t0)
            if window is None:
                window = self._windows[t0] = _Window()
                for old in [k for k in self._windows if k < t0 - WINDOW_S]:
                    del self._windows[old]
            return window

    def _lookup(self, t0: int) -> None:
        window = self._window(t0)
        if window.market is None and time.monotonic() - window.looked_up_at >= DISCOVERY_RETRY_S:
            window.looked_up_at = time.monotonic()
            try:
                window.market = self.gamma.window(t0)
                if window.market is not None:
                    window.fetched_at_ms = int(self._clock() * 1000)
                    log.info("window %d: %s (%s)", t0, window.market.slug, window.market.rule)
            except (httpx.HTTPError, UpstreamError) as exc:
                log.warning("gamma lookup of window %d failed: %s", t0, exc)

    # -- upkeep: every HTTP call, off the tick ------------------------------------------
    def _upkeep_forever(self) -> None:
        while not self.stop.wait(UPKEEP_S):
            try:
                self._upkeep(self._clock())
            except Exception:
                log.exception("upkeep step failed")

    def _upkeep(self, now: float) -> None:
        t0 = window_start(now)
        self._lookup(t0)
        if t0 + WINDOW_S - now <= PREFETCH_S:
            self._lookup(t0 + WINDOW_S)
        window = self._window(t0)
        market = window.market
        if market is not None:
            self._refresh_books(market)
            self._fallback_price_to_beat(window, t0, market.rule, now)

    # -- the price to beat ---------------------------------------------------------------
    def _latch(self, window: _Window, t0: int, rule: str) -> None:
        if window.price_to_beat is not None:
            return
        series = self.rtds.series[rule]
        latest = series.latest()
        # Latch only once a point at or after T0 has arrived: then the value in force at T0
        # is known (the feed lags the exchanges by about 2 s).
        if latest is not None and latest[0] >= t0 * 1000:
            latched = series.at(t0 * 1000, LATCH_TOLERANCE_MS)
            if latched is not None:
                window.price_to_beat, window.price_to_beat_via = latched, f"rtds:{TOPICS[rule]}"

    def _fallback_price_to_beat(self, window: _Window, t0: int, rule: str, now: float) -> None:
        self._latch(window, t0, rule)
        if window.price_to_beat is not None:
            return
        if now - t0 > LATCH_TOLERANCE_MS / 1000 and (
            time.monotonic() - window.site_tried_at >= SITE_RETRY_S
        ):
            window.site_tried_at = time.monotonic()
            opened = self._site_open_price(t0, rule)
            if opened is not None:
                window.price_to_beat, window.price_to_beat_via = opened, "site:crypto-price"
                return
        market = window.market
        if market is not None and market.price_to_beat is not None:
            window.price_to_beat, window.price_to_beat_via = market.price_to_beat, "gamma"

    def _site_open_price(self, t0: int, rule: str) -> float | None:
        def iso(t: int) -> str:
            return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

        params = {
            "symbol": "BTC",
            "eventStartTime": iso(t0),
            "variant": "fiveminute",
            "endDate": iso(t0 + WINDOW_S),
        }
        if rule == TWAP:
            params |= {"twapEnabled": "true", "twapLookbackSeconds": "60"}
        try:
            response = self.http.get(
                f"{self.upstreams.site.rstrip('/')}/api/crypto/crypto-price", params=params
            )
            payload = response.json() if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError) as exc:
            log.debug("crypto-price lookup failed: %s", exc)
            return None
        value = payload.get("openPrice") if isinstance(payload, dict) else None
        if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
            return float(value)
        return None

    # -- books ------------------------------------------------------------------------
    def _refresh_books(self, market: WindowMarket) -> None:
        up, down = self.books.quote(market.up_token_id), self.books.quote(market.down_token_id)
        now = time.monotonic()
        stale = [q is None or now - q.at > BOOK_FRESH_S for q in (up, down)]
        cross_check = now - self._checked_at >= CROSS_CHECK_S
        if (any(stale) or cross_check) and now - self._rest_at >= REST_MIN_INTERVAL_S:
            self._rest_at = now
            assets = [market.up_token_id, market.down_token_id]
            try:
                books = fetch_books(self.http, self.upstreams.clob, assets)
            except (httpx.HTTPError, UpstreamError) as exc:
                log.warning("clob /books failed: %s", exc)
                return
            if cross_check:
                self._checked_at = now
            for asset, was_stale, quote in zip(assets, stale, (up, down), strict=True):
                book = books.get(asset)
                if book is None:
                    continue
                if was_stale:
                    self.books.snapshot(asset, book.get("bids"), book.get("asks"), REST)
                elif quote is not None:
                    self._compare(asset, quote, book)

    def _compare(self, asset: str, quote: Quote, book: dict[str, Any]) -> None:
        probe = Books()
        probe.snapshot(asset, book.get("bids"), book.get("asks"), REST)
        rest = probe.quote(asset)
        if rest is not None and (rest.bid, rest.ask) != (quote.bid, quote.ask):
            log.info(
                "cross-check: token …%s socket %s/%s, REST %s/%s",
                asset[-6:], quote.bid, quote.ask, rest.bid, rest.ask,
            )  # fmt: skip

    # -- the row ----------------------------------------------------------------------
    def rows(self, now: float) -> list[dict[str, object]]:
        """The BTC row at ``now``."""
        self.start()
        t0 = window_start(now)
        window = self._window(t0)
        market = window.market
        # Shortly before the roll, the next window's market is looked up and its books
        # watched too, so the board switches on the boundary with warm books.
        near_roll = t0 + WINDOW_S - now <= PREFETCH_S
        upcoming = self._window(t0 + WINDOW_S).market if near_roll else None
        watched = [m for m in (market, upcoming) if m is not None]
        self.clob.watch(tuple(t for m in watched for t in (m.up_token_id, m.down_token_id)))

        now_ms = int(now * 1000)
        mono = time.monotonic()
        rule = market.rule if market is not None else "spot"
        up = down = None
        if market is not None:
            up = self.books.quote(market.up_token_id)
            down = self.books.quote(market.down_token_id)
            self._latch(window, t0, rule)
        series = self.rtds.series[rule]
        latest = series.latest()
        price = latest[1] if latest else None

        def quote_ms(q: Quote | None) -> int | None:
            return None if q is None else now_ms - int((mono - q.at) * 1000)

        input_times = {
            "upBook": quote_ms(up),
            "downBook": quote_ms(down),
            "price": latest[0] if latest else None,
        }
        # The row is as old as its oldest input; a missing one counts from when we began
        # waiting for it, so the row is stale, never fresh with invented numbers.
        waiting_since = int(max(self._created, t0) * 1000)
        oldest = min(t if t is not None else waiting_since for t in input_times.values())
        rem = max(0.0, t0 + WINDOW_S - now)
        p_up = p_down = None
        k = window.price_to_beat
        if price is not None and k is not None:
            p_up, p_down = percentages(probability_up(price, k, rem, series.vol.sigma(), rule))
        return [
            {
                "symbol": "BTC",
                "slot": t0 // WINDOW_S,
                "p_up_pct": p_up,
                "p_down_pct": p_down,
                "up_bid": up.bid if up else None,
                "up_ask": up.ask if up else None,
                "down_bid": down.bid if down else None,
                "down_ask": down.ask if down else None,
                "up_token_id": market.up_token_id if market else None,
                "down_token_id": market.down_token_id if market else None,
                "rem_secs": round(rem, 3),
                "ts": min(oldest, now_ms),
                "windowStart": t0,
                "windowEnd": t0 + WINDOW_S,
                "price": price,
                "priceToBeat": k,
                "sigma": series.vol.sigma(),
                "settlement": rule,
                "source": self.name,
                "slug": market.slug if market else None,
                "sources": {
                    "market": "gamma" if market else None,
                    "upBook": up.via if up else None,
                    "downBook": down.via if down else None,
                    "price": f"rtds:{TOPICS[rule]}" if latest else None,
                    "priceToBeat": window.price_to_beat_via,
                    "model": "digital-option" if p_up is not None else None,
                },
                "inputAgesMs": {
                    name: (None if t is None else max(0, now_ms - t))
                    for name, t in input_times.items()
                },
            }
        ]
