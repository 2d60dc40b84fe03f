"""The board rows from the live market: one house, a room per job.

- ``discovery.py``: each market's windows and the market Gamma names for each (discovery);
- ``rest_books.py`` beside the socket's ``book.py``: the books;
- ``price_to_beat.py``: the price to beat from the settlement stream, else its fallbacks;
- ``doubts.py``: inputs that disagree with their witnesses keep a row stale;
- ``model_inputs.py``: the model's answer from the spot, its volatility and the rule;
- ``row_assembly.py``: the row, every number with where it came from and how old it is.

This module wires them and runs them: building a row does no network I/O (the sockets feed
books and prices in their threads; one upkeep thread per kind of HTTP call, so a hanging
upstream never holds the refresher's tick nor another upstream's lookups). Every input is
judged before it is believed (docs/reliability.md); which market the numbers belong to is
believed only when the CLOB confirms Gamma's word (``identity.py``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from app.board.row import BoardRow
from app.markets import BINANCE_CANDLE, DEFAULT_SPAN, Market, Span
from app.refresher import clocks
from app.refresher.changes import Changes
from app.refresher.sources.polymarket import model_inputs
from app.refresher.sources.polymarket.book import Books
from app.refresher.sources.polymarket.chainlink_settlement import (
    ChainlinkSettlement,
    opening_of,
)
from app.refresher.sources.polymarket.clob import ClobFeed, winners_of
from app.refresher.sources.polymarket.discovery import Windows
from app.refresher.sources.polymarket.doubts import Doubts
from app.refresher.sources.polymarket.gamma import GammaClient
from app.refresher.sources.polymarket.hourly import HourlyRows
from app.refresher.sources.polymarket.http_deadline import DeadlineTransport
from app.refresher.sources.polymarket.identity import Identities
from app.refresher.sources.polymarket.latch_journal import LatchJournal
from app.refresher.sources.polymarket.price_to_beat import PriceToBeat
from app.refresher.sources.polymarket.recording import RecordingTransport
from app.refresher.sources.polymarket.rest_books import RestBooks
from app.refresher.sources.polymarket.row_assembly import Instant, assemble_row
from app.refresher.sources.polymarket.rtds import SPOT_KEY, RtdsFeed
from app.refresher.sources.polymarket.suspects import Suspects
from app.refresher.tape import Tape

log = logging.getLogger(__name__)

UPKEEP_S = 0.25
CLOSE_WAIT_S = 2.0  # closing a recording source: how long the sockets may take to close


@dataclass(frozen=True)
class Upstreams:
    """Where each upstream lives (all configurable)."""

    gamma: str
    clob: str
    clob_ws: str
    rtds: str
    site: str
    binance: str | None = None  # Binance's REST API: the hourly kind's candle (None: unserved)


class PolymarketSource:
    """The live rows of ``markets`` for each span of ``spans`` (span by span, markets in
    order): one CLOB socket and one RTDS socket serve them all; each row has its own
    windows, books, spot series, price to beat and staleness. Feeds start on first use."""

    name = "polymarket"

    def __init__(
        self,
        upstreams: Upstreams,
        markets: tuple[Market, ...],
        *,
        http: httpx.Client | None = None,
        clock: Callable[[], float] = time.time,
        stale_after_ms: int = 3000,
        tape: Tape | None = None,
        background: bool = True,
        spans: tuple[Span, ...] = (DEFAULT_SPAN,),
        http_timeout_s: float = 3.0,
        rtds_monotonic: Callable[[], float] = time.monotonic,
        journal_url: str | None = None,
    ) -> None:
        if not markets or not spans:
            raise ValueError("a source serves at least one market and one window")
        self.markets = markets
        self.spans = spans
        self.upstreams = upstreams
        self.tape = tape
        # False: no threads; whoever drives the source (a replay) feeds the sockets' frames
        # to ``clob``/``rtds`` and calls ``upkeep`` itself.
        self.background = background
        self._clock = clock
        self._stale_after_ms = stale_after_ms
        self._asked_at: dict[str, float] = {}  # token -> when it was first watched (clock s)
        self.http = http or httpx.Client(
            # Each read's timeout (a test whose subject is not its length shortens it).
            timeout=httpx.Timeout(http_timeout_s, connect=min(2.0, http_timeout_s)),
            headers={"User-Agent": "probboard/0.1"},
            follow_redirects=False,
            transport=self._transport(upstreams, tape),
        )
        self.changes = Changes()  # a new top of book, price, market or price to beat
        self.books = Books(on_change=self.changes.notify)
        self.stop = threading.Event()
        self.clob = ClobFeed(upstreams.clob_ws, self.books, self.stop)
        # Gamma's market checked against the CLOB's own (identity.py).
        self.identity = Identities(self.http, upstreams.clob)
        self.clob.on_book = self.identity.note_book
        windows = tuple(span.seconds for span in spans)  # the settlement factors' horizons
        self.rtds = RtdsFeed(
            upstreams.rtds,
            self.stop,
            markets,
            clock=clock,
            windows=windows,
            monotonic=rtds_monotonic,
        )
        self.suspects = Suspects("market")  # Gamma's and the site's answers
        self.clob.tape = self.rtds.tape = tape
        self.rtds.on_change = self.changes.notify
        gamma = {
            (coin.symbol, span.name): GammaClient(upstreams.gamma, self.http, coin, span)
            for coin in markets
            for span in spans
        }
        self.windows = Windows(
            markets, spans, gamma, self.identity, self.changes, self.suspects, clock
        )
        suspects = {"market": self.suspects, "rtds": self.rtds.suspects}
        self.doubts = Doubts(suspects, self.books, self.identity)
        self.rest_books = RestBooks(self.http, upstreams.clob, self.books, self.identity)
        # The prices to beat latched here, kept on Redis for a refresher that starts late.
        journal = LatchJournal(journal_url) if journal_url else None
        self.price_to_beat = PriceToBeat(
            self.rtds, self.http, upstreams.site, self.suspects, self.doubts, journal
        )
        # Each kind's settlement source: the Chainlink stream's, or Binance's candle (whose
        # rows are its own: ``hourly.py``).
        self.chainlink = ChainlinkSettlement.of(spans, self.windows, self.price_to_beat, self.rtds)
        self.hourly = HourlyRows.serving(
            upstreams.binance, spans, markets, self.rtds, clock, self.http
        )
        self._started = False
        self._created = clock()
        # One thread per kind of upkeep, so a slow answer (held up to the 5 s deadline) of
        # one upstream never holds the others' lookups.
        jobs = [self._discover, self._books_upkeep, self._price_to_beat_upkeep]
        # Binance: each coin's candle of the current hour (its open; its close once over).
        self._upkeep_jobs = (*jobs, *([self.hourly.upkeep] if self.hourly else []))
        self._upkeep_threads = [
            threading.Thread(
                target=self._upkeep_forever,
                args=(job,),
                name=f"probboard-upkeep{job.__name__}",
                daemon=True,
            )
            for job in self._upkeep_jobs
        ]

    @staticmethod
    def _transport(upstreams: Upstreams, tape: Tape | None) -> httpx.BaseTransport:
        """One overall deadline per exchange (``http_deadline.py``), recorded to ``tape``."""
        if tape is None:
            return DeadlineTransport()
        names = {upstreams.gamma: "gamma", upstreams.clob: "clob-rest", upstreams.site: "site"}
        if upstreams.binance:
            names[upstreams.binance] = "binance"
        return RecordingTransport(DeadlineTransport(), tape, names)

    # -- lifecycle --------------------------------------------------------------------
    def start(self) -> None:
        """Start the WebSocket threads (idempotent)."""
        if not self._started and self.background:
            self._started = True
            if self.tape is not None:
                self.tape.start()
            self.clob.start()
            self.rtds.start()
            for thread in self._upkeep_threads:
                thread.start()

    def close(self) -> None:
        """Stop the threads and close the HTTP client."""
        self.stop.set()
        for feed in (self.clob, self.rtds):
            feed.wake()  # one waiting for something to subscribe to stops now
        self.http.close()
        if self.hourly is not None:
            self.hourly.close()
        self.price_to_beat.close()
        if self.tape is not None:
            # The sockets' last lines (their disconnects) come from their own threads.
            for feed in (self.clob, self.rtds):
                if feed.is_alive():
                    feed.join(CLOSE_WAIT_S)
            self.tape.close()

    def winners(self) -> dict[str, bool]:
        """Token id -> won, from the ``market_resolved`` messages seen on the socket."""
        return winners_of(self.clob.resolutions)

    def warm_up(self, timeout_s: float) -> None:
        """Wait (up to ``timeout_s``) until books and a price have arrived: for ``--once``."""
        self.start()
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            now = self._clock()
            self.rows(now)
            if all(self._warm(coin, now) for coin in self.markets):
                return
            time.sleep(0.2)

    def _warm(self, coin: Market, now: float) -> bool:
        span = self.spans[0]
        market = self.windows.get(coin, span.start(now), span).market
        has_book = market is not None and self.books.quote(market.up_token_id) is not None
        return has_book and self.rtds.of(coin)[SPOT_KEY].latest() is not None

    # -- upkeep: every HTTP call, off the tick ------------------------------------------
    def _upkeep_forever(self, job: Callable[[float], None]) -> None:
        # The first step at once: a source's first lookups wait for no interval.
        while not self.stop.is_set():
            self._run(job, self._clock())
            self.stop.wait(UPKEEP_S)

    @staticmethod
    def _run(job: Callable[[float], None], now: float) -> None:
        try:
            job(now)
        except Exception:
            log.exception("upkeep step %s failed", job.__name__)

    def upkeep(self, now: float) -> None:
        """One upkeep step of every kind, in turn (a replay's; the live source runs each
        kind in a thread of its own every ``UPKEEP_S``): market lookups, REST books, the
        price to beat's fallbacks."""
        for job in self._upkeep_jobs:
            self._run(job, now)

    def _discover(self, now: float) -> None:
        """Gamma: each market's window, and the next one's from ``PREFETCH_S`` before."""
        self.windows.discover(now, self.price_to_beat.wants_lookup)

    def _books_upkeep(self, now: float) -> None:
        """REST books of every market's watched windows' tokens, in one request, when due."""
        markets = self.windows.markets_at(now)
        tokens = [t for m in markets for t in (m.up_token_id, m.down_token_id)]
        if tokens:
            self.rest_books.refresh(tokens)

    def _price_to_beat_upkeep(self, now: float) -> None:
        """Each Chainlink kind's price to beat from the stream, else its fallbacks (the
        candle's open is asked in a thread of its own: ``HourlyRows.upkeep``)."""
        for settlement in self.chainlink.values():
            for coin in self.markets:
                settlement.upkeep(coin, settlement.span.start(now), now)
        self.price_to_beat.flush()

    # -- the rows ---------------------------------------------------------------------
    def _watch(self, tokens: tuple[str, ...], now: float) -> None:
        for token in tokens:
            self._asked_at.setdefault(token, now)
        for token in [t for t in self._asked_at if t not in tokens]:
            del self._asked_at[token]
        self.clob.watch(tokens)

    def rows(self, now: float) -> list[BoardRow]:
        """One row per (span, market) at ``now``: span by span, markets in order."""
        self.start()
        # From PREFETCH_S before the roll the next window's tokens are watched too, on the
        # same socket, so the board switches on the boundary with warm books.
        current = self.windows.markets_at(now)
        winners = {str(r.get("winning_asset_id")) for r in self.clob.resolutions}
        watched = [*self.windows.unresolved(now, winners), *current]
        self._watch(tuple(t for m in watched for t in (m.up_token_id, m.down_token_id)), now)
        at = Instant(
            now,
            int(now * 1000),
            clocks.monotonic(),
            self._stale_after_ms,
            self._asked_at,
            self._created,
        )
        return [self._row(coin, span, at) for span in self.spans for coin in self.markets]

    def _row(self, coin: Market, span: Span, at: Instant) -> BoardRow:
        """``coin``'s row of ``span``: its own window, books, spot, price to beat and
        staleness."""
        if self.hourly is not None and span.settlement == BINANCE_CANDLE:
            return self.hourly.row(coin, span, at, self.windows, self.books, self.doubts)
        window = self.windows.get(coin, span.start(at.now), span)
        market = window.market
        up = down = None
        if market is not None:
            up = self.books.quote(market.up_token_id)
            down = self.books.quote(market.down_token_id)
        settlement = self.chainlink[span.name]
        settlement.latch(window, at.now)
        self.doubts.judge_identity(window, market)
        spot = self.rtds.of(coin)[SPOT_KEY]  # the Chainlink spot series
        # A doubted one stays beside its doubt: the row is stale for it (``suspect``).
        price_to_beat = opening_of(window).value
        answer = model_inputs.answer(market, price_to_beat, spot)
        spot_doubts = (spot.doubt(), self.rtds.twap_doubt(coin), self.rtds.alone_doubt(coin))
        return assemble_row(
            window, up, down, spot, spot_doubts, price_to_beat, answer, at, self.name
        )
