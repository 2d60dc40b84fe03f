"""Discovery: each market's windows, and which market Gamma names for each, found off the tick.

A live window is one market's 5 (or 15) minutes (``LiveWindow``): the market Gamma names for
it (checked by the CLOB, ``identity.py``), its price to beat once known (``price_to_beat.py``)
and the doubts that keep its row stale (``doubts.py``). ``Windows`` holds them by (symbol,
span, start): it looks up the current window's market of each span served (``WINDOWS``), and
the next one's from ``PREFETCH_S`` before the roll so the board switches on the boundary with
warm books; it keeps a finished window's market until its outcome is seen on the socket (at
most ``RESOLUTION_WAIT_S``), so its tokens stay watched.

Every lookup is an HTTP call: it runs on the source's discovery thread, never in ``rows``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

import httpx

from app.markets import Market, Span
from app.metrics.refresher import UPSTREAM_ERRORS
from app.refresher import clocks
from app.refresher.changes import Changes
from app.refresher.sources.polymarket.gamma import (
    GammaClient,
    UpstreamError,
    WindowMarket,
    WrongMarketError,
)
from app.refresher.sources.polymarket.identity import Identities, identity_key
from app.refresher.sources.polymarket.suspects import Suspects

log = logging.getLogger(__name__)

PREFETCH_S = 60  # look up the next window this long before the roll
DISCOVERY_RETRY_S = 2.0
RESOLUTION_WAIT_S = 600  # a finished window's tokens stay watched this long at most


@dataclass
class LiveWindow:
    """One market's window: its market, its price to beat and its doubts."""

    coin: Market
    t0: int
    span: Span
    market: WindowMarket | None = None
    looked_up_at: float = 0.0
    price_to_beat: float | None = None
    price_to_beat_via: str | None = None
    final: bool = False  # the settlement's own report: nothing may replace it
    site_tried_at: float = 0.0
    site_open: float | None = None  # the site's last answer, offered until taken or refused
    journal_asked_at: float = 0.0  # when the price-to-beat journal was last asked (monotonic)
    unknowable_said: bool = False  # the log said why it can have no price to beat
    fetched_at_ms: int = 0
    errors: list[str] = field(default_factory=list)
    refused: set[tuple[float, str]] = field(default_factory=set)  # prices to beat not believed
    # Inputs of this window that disagree with their witnesses: kind -> why. While any is
    # here the row is stale, with the reasons in its ``suspect`` (docs/reliability.md).
    doubts: dict[str, str] = field(default_factory=dict)


def watched_starts(now: float, span: Span) -> list[int]:
    """The starts of ``span``'s windows whose markets matter at ``now``: the current one,
    and the next one from ``PREFETCH_S`` before the roll."""
    t0 = span.start(now)
    end = span.end(t0)
    return [t0, end] if end - now <= PREFETCH_S else [t0]


class Windows:
    """The windows of ``markets`` by (symbol, span, start), their markets looked up on Gamma."""

    def __init__(
        self,
        markets: tuple[Market, ...],
        spans: tuple[Span, ...],
        gamma: dict[tuple[str, str], GammaClient],
        identity: Identities,
        changes: Changes,
        suspects: Suspects,
        clock: Callable[[], float],
    ) -> None:
        self.markets = markets
        self.spans = spans
        self._gamma = gamma  # by (symbol, span name)
        self._identity = identity
        self._changes = changes
        self._suspects = suspects
        self._clock = clock
        self._windows: dict[tuple[str, str, int], LiveWindow] = {}
        self._finished: dict[str, WindowMarket] = {}  # by slug: ended, outcome not yet seen
        self._lock = threading.Lock()

    def get(self, coin: Market, t0: int, span: Span) -> LiveWindow:
        """``coin``'s ``span`` window starting at ``t0`` (made on first use; older ones than
        the one before it are dropped, their markets kept until their outcome comes)."""
        with self._lock:
            key = (coin.symbol, span.name, t0)
            window = self._windows.get(key)
            if window is None:
                window = self._windows[key] = LiveWindow(coin, t0, span)
                old = [k for k in self._windows if k[:2] == key[:2] and k[2] < span.start(t0 - 1)]
                for done in old:
                    self._note_finished(self._windows.pop(done))
            return window

    def find(self, coin: Market, t0: int, span: Span) -> LiveWindow | None:
        """``coin``'s ``span`` window starting at ``t0`` when it is known (none is made)."""
        with self._lock:
            return self._windows.get((coin.symbol, span.name, t0))

    def markets_at(self, now: float) -> list[WindowMarket]:
        """The known markets of every watched window (``watched_starts``) of every span,
        market by market."""
        found = [
            self.get(coin, start, span).market
            for span in self.spans
            for coin in self.markets
            for start in watched_starts(now, span)
        ]
        return [market for market in found if market is not None]

    def lookup(
        self,
        coin: Market,
        t0: int,
        span: Span,
        again: bool = False,
        replace: bool = False,
    ) -> None:
        """Look up the window's market on Gamma (every ``DISCOVERY_RETRY_S`` until found);
        ``again``: once found, look again (for a price to beat Gamma did not have yet), and
        take the answer only when it names the same tokens; ``replace``: look again and take
        any answer (the CLOB contradicts the one we have)."""
        window = self.get(coin, t0, span)
        if (window.market is None or again) and (
            clocks.monotonic() - window.looked_up_at >= DISCOVERY_RETRY_S
        ):
            window.looked_up_at = clocks.monotonic()
            known = window.market
            try:
                market = self._gamma[coin.symbol, span.name].window(t0)
                if known is not None and (market is None or not replace or market == known):
                    # Only the same identity (the one the CLOB checked) is taken again.
                    if market is not None and identity_key(market) == identity_key(known):
                        window.market = market
                    return
                window.market = market
                if market is not None:
                    window.fetched_at_ms = int(self._clock() * 1000)
                    self._changes.notify()
                    log.info("window %d: %s (%s)", t0, market.slug, market.rule)
            except WrongMarketError as exc:
                UPSTREAM_ERRORS.labels("gamma").inc()
                self._suspects.note("wrong_market", f"gamma, {coin.symbol} window {t0}: {exc}")
            except (httpx.HTTPError, UpstreamError) as exc:
                UPSTREAM_ERRORS.labels("gamma").inc()
                self._suspects.note("failed", f"gamma lookup of {coin.symbol} window {t0}: {exc}")

    def discover(self, now: float, wants_again: Callable[[LiveWindow, float], bool]) -> None:
        """Gamma: each market's watched windows (``watched_starts``); a market the CLOB
        contradicts, or whose window ``wants_again`` (a price to beat Gamma had not yet), is
        asked again. The CLOB's own market is asked for each when due (``identity.py``)."""
        for span in self.spans:
            for coin in self.markets:
                for start in watched_starts(now, span):
                    window = self.get(coin, start, span)
                    market = window.market
                    replace = market is not None and self._identity.contradicted(market)
                    again = replace or wants_again(window, now)
                    self.lookup(coin, start, span, again, replace)
                    if window.market is not None:
                        self._identity.upkeep(window.market)
        # Before the start of the previous window of every kind served.
        oldest = min(span.start(span.start(now) - 1) for span in self.spans)
        self._identity.forget_before(oldest)

    def unresolved(self, now: float, winners: Collection[str]) -> list[WindowMarket]:
        """Finished windows still waiting for their outcome (at most ``RESOLUTION_WAIT_S``
        after their end; ``winners``: the winning token ids seen so far): their tokens stay
        watched, so the outcome arrives on the socket (and on a tape)."""
        with self._lock:
            for window in self._windows.values():
                if window.span.end(window.t0) <= now:
                    self._note_finished(window)
        for slug, market in list(self._finished.items()):
            ended = market.window_end
            resolved = {market.up_token_id, market.down_token_id} & set(winners)
            if resolved or now - ended > RESOLUTION_WAIT_S:
                del self._finished[slug]
        return list(self._finished.values())

    def _note_finished(self, window: LiveWindow) -> None:
        """Wait for the outcome of ``window``'s market (the caller holds the lock)."""
        if window.market is not None:
            self._finished.setdefault(window.market.slug, window.market)
