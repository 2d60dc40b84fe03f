"""The board row from the live market: tokens, books, the price, the price to beat, the model.

Building a row does no network I/O: the sockets feed books and prices in their threads, and
an upkeep thread does every HTTP call (Gamma lookups, REST books, the site's open price), so
a hanging upstream can never hold the refresher's tick.

Every number says where it came from (``sources``) and how old it is (``inputAgesMs``);
the row's ``ts`` is the time of its OLDEST input that matters (both books and the price),
so the row goes stale when any of them goes silent. A missing input leaves its fields null
and the row stale: its age counts from when it was first asked for, and is never under the
stale threshold. A probability without a believable price to beat is null, never made up.
A crossed book is shown but stale. Nothing is invented. Every input is judged before it is
believed (docs/reliability.md); which market the numbers belong to is believed only when the
CLOB confirms Gamma's word (``identity.py``).

The model follows each market's settlement rule (``app.refresher.model``): the centre is the
Chainlink SPOT (never the TWAP, which trails it), the volatility is the spot's, and the time
left is counted from the spot's own timestamp.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import httpx

from app.board.row import BoardRow, LiveDetails
from app.markets import DEFAULT_SYMBOLS, MARKETS, WINDOW_S, Market, window_start
from app.metrics.refresher import UPSTREAM_ERRORS
from app.refresher import clocks
from app.refresher.changes import Changes
from app.refresher.model import TWAP, horizon_ratio, percentages, probability_up
from app.refresher.sources.polymarket.book import Books, Quote
from app.refresher.sources.polymarket.clob import REST, ClobFeed, fetch_books, winners_of
from app.refresher.sources.polymarket.gamma import (
    GammaClient,
    UpstreamError,
    WindowMarket,
    WrongMarketError,
)
from app.refresher.sources.polymarket.http_deadline import DeadlineTransport
from app.refresher.sources.polymarket.identity import (
    IDENTITY,
    TOP_KINDS,
    Identities,
    Verdict,
    top_verdicts,
)
from app.refresher.sources.polymarket.price_series import PriceSeries
from app.refresher.sources.polymarket.price_to_beat import (
    sigma_of,
    spot_witness,
    topic_agrees_now,
    twap_witness,
)
from app.refresher.sources.polymarket.recording import RecordingTransport
from app.refresher.sources.polymarket.rtds import SPOT_KEY, TOPICS, TWAP_KEYS, RtdsFeed
from app.refresher.sources.polymarket.suspects import Suspects
from app.refresher.tape import Tape

log = logging.getLogger(__name__)

PREFETCH_S = 60  # look up the next window this long before the roll
UPKEEP_S = 0.25
DISCOVERY_RETRY_S = 2.0
BOOK_FRESH_S = 2.0  # a quote not confirmed for this long is re-read over REST
REST_MIN_INTERVAL_S = 1.0  # /books: 500 requests per 10 s allowed; we stay far below
CROSS_CHECK_S = 30.0  # the level books are replaced from REST this often anyway
SITE_RETRY_S = 2.0  # while a spot window has no price to beat: one cheap request every 2 s
FALLBACK_AFTER_S = 5.0  # no settlement point at T0 this long after it: try the fallbacks
# A TWAP report for T0 has been seen 2.6-3.1 s late, after the one for T0 + 1 s (issue 37):
# the first report after T0 stands in for it only once T0's has had this long to come.
T0_REPORT_WAIT_S = 8.0
MAX_GAP_MS = 3000  # consecutive Chainlink points (about 1 Hz) further apart: a hole
SPOT_MEAN = "mean"
CLOSE_WAIT_S = 2.0  # closing a recording source: how long the sockets may take to close
RESOLUTION_WAIT_S = 600  # a finished window's tokens stay watched this long at most
PRICE_TO_BEAT = "price_to_beat"  # the kind of a window's doubt about its price to beat


def _bracketed(
    series: PriceSeries, before: tuple[int, float] | None, after: tuple[int, float] | None
) -> bool:
    """Points on both sides of an instant, close enough and with no reconnect between them
    (a point there may have been missed: wait for the back-fill)."""
    if before is None or after is None or after[0] - before[0] > MAX_GAP_MS:
        return False
    return not series.has_gap(before[0], after[0])


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
    coin: Market
    t0: int
    market: WindowMarket | None = None
    looked_up_at: float = 0.0
    price_to_beat: float | None = None
    price_to_beat_via: str | None = None
    final: bool = False  # the settlement's own report: nothing may replace it
    site_tried_at: float = 0.0
    fetched_at_ms: int = 0
    errors: list[str] = field(default_factory=list)
    refused: set[tuple[float, str]] = field(default_factory=set)  # prices to beat not believed
    # Inputs of this window that disagree with their witnesses: kind -> why. While any is
    # here the row is stale, with the reasons in its ``suspect`` (docs/reliability.md).
    doubts: dict[str, str] = field(default_factory=dict)


class PolymarketSource:
    """The live 5-minute rows of the markets in ``SYMBOLS``, in that order: one CLOB socket
    and one RTDS socket serve them all; each row has its own windows, books, spot series,
    price to beat and staleness. Feeds start on first use."""

    name = "polymarket"

    def __init__(
        self,
        upstreams: Upstreams,
        http: httpx.Client | None = None,
        clock: Callable[[], float] = time.time,
        stale_after_ms: int = 3000,
        tape: Tape | None = None,
        background: bool = True,
        markets: tuple[Market, ...] = (MARKETS[DEFAULT_SYMBOLS],),
    ) -> None:
        self.markets = markets
        self.upstreams = upstreams
        self.tape = tape
        # False: no threads; whoever drives the source (a replay) feeds the sockets' frames
        # to ``clob``/``rtds`` and calls ``upkeep`` itself.
        self.background = background
        self._clock = clock
        self._stale_after_ms = stale_after_ms
        self._asked_at: dict[str, float] = {}  # token -> when it was first watched (clock s)
        self.http = http or httpx.Client(
            timeout=httpx.Timeout(3.0, connect=2.0),
            headers={"User-Agent": "probboard/0.1"},
            follow_redirects=False,
            transport=self._transport(upstreams, tape),
        )
        self.gamma = {
            coin.symbol: GammaClient(upstreams.gamma, self.http, coin) for coin in markets
        }
        self.changes = Changes()  # a new top of book, price, market or price to beat
        self.books = Books(on_change=self.changes.notify)
        self.stop = threading.Event()
        self.clob = ClobFeed(upstreams.clob_ws, self.books, self.stop)
        # Gamma's market checked against the CLOB's own (identity.py).
        self.identity = Identities(self.http, upstreams.clob)
        self.clob.on_book = self.identity.note_book
        self.rtds = RtdsFeed(upstreams.rtds, self.stop, clock=clock, markets=markets)
        self.suspects = Suspects("market")  # Gamma's and the site's answers
        self.clob.tape = self.rtds.tape = tape
        self.rtds.on_change = self.changes.notify
        self._windows: dict[tuple[str, int], _Window] = {}
        self._finished: dict[str, WindowMarket] = {}  # by slug: ended, outcome not yet seen
        self._started = False
        self._created = clock()
        self._rest_at = 0.0
        self._checked_at = 0.0
        self._lock = threading.Lock()
        # One thread per kind of upkeep, so a slow answer (held up to the 5 s deadline) of
        # one upstream never holds the others' lookups.
        self._upkeep_jobs: tuple[Callable[[float], None], ...] = (
            self._discover,
            self._books_upkeep,
            self._price_to_beat_upkeep,
        )
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
        """One overall deadline per exchange (``deadline.py``), recorded to ``tape`` if any."""
        if tape is None:
            return DeadlineTransport()
        names = {upstreams.gamma: "gamma", upstreams.clob: "clob-rest", upstreams.site: "site"}
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
        self.http.close()
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
        market = self._window(coin, window_start(now)).market
        has_book = market is not None and self.books.quote(market.up_token_id) is not None
        return has_book and self._spot(coin).latest() is not None

    def _spot(self, coin: Market) -> PriceSeries:
        """The Chainlink spot series of ``coin``."""
        return self.rtds.of(coin)[SPOT_KEY]

    # -- discovery --------------------------------------------------------------------
    def _window(self, coin: Market, t0: int) -> _Window:
        with self._lock:
            window = self._windows.get((coin.symbol, t0))
            if window is None:
                window = self._windows[coin.symbol, t0] = _Window(coin, t0)
                old = [k for k in self._windows if k[0] == coin.symbol and k[1] < t0 - WINDOW_S]
                for key in old:
                    self._note_finished(self._windows.pop(key))
            return window

    def _lookup(self, coin: Market, t0: int, again: bool = False, replace: bool = False) -> None:
        """Look up the window's market on Gamma (every ``DISCOVERY_RETRY_S`` until found);
        ``again``: once found, look again (for a price to beat Gamma did not have yet), and
        take the answer only when it names the same tokens; ``replace``: look again and take
        any answer (the CLOB contradicts the one we have)."""
        window = self._window(coin, t0)
        if (window.market is None or again) and (
            clocks.monotonic() - window.looked_up_at >= DISCOVERY_RETRY_S
        ):
            window.looked_up_at = clocks.monotonic()
            known = window.market
            try:
                market = self.gamma[coin.symbol].window(t0)
                if known is not None and (market is None or not replace or market == known):
                    same = market is not None and (market.up_token_id, market.down_token_id) == (
                        known.up_token_id,
                        known.down_token_id,
                    )
                    if same:
                        window.market = market
                    return
                window.market = market
                if market is not None:
                    window.fetched_at_ms = int(self._clock() * 1000)
                    self.changes.notify()
                    log.info("window %d: %s (%s)", t0, market.slug, market.rule)
            except WrongMarketError as exc:
                UPSTREAM_ERRORS.labels("gamma").inc()
                self.suspects.note("wrong_market", f"gamma, {coin.symbol} window {t0}: {exc}")
            except (httpx.HTTPError, UpstreamError) as exc:
                UPSTREAM_ERRORS.labels("gamma").inc()
                self.suspects.note("failed", f"gamma lookup of {coin.symbol} window {t0}: {exc}")

    # -- upkeep: every HTTP call, off the tick ------------------------------------------
    def _upkeep_forever(self, job: Callable[[float], None]) -> None:
        while not self.stop.wait(UPKEEP_S):
            self._run(job, self._clock())

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
        for coin in self.markets:
            self._discover_one(coin, now)

    def _discover_one(self, coin: Market, now: float) -> None:
        t0 = window_start(now)
        starts = [t0, t0 + WINDOW_S] if t0 + WINDOW_S - now <= PREFETCH_S else [t0]
        for start in starts:
            window = self._window(coin, start)
            # A market the CLOB contradicts: ask Gamma again and take a new answer.
            replace = window.market is not None and self.identity.contradicted(window.market)
            again = replace or self._wants_price_to_beat(window, now)
            self._lookup(coin, start, again, replace)
            if window.market is not None:
                self.identity.upkeep(window.market)  # the CLOB's own market, when due
        self.identity.forget_before(t0 - WINDOW_S)

    @staticmethod
    def _wants_price_to_beat(window: _Window, now: float) -> bool:
        """A spot market still without a price to beat once the fallbacks are due: Gamma's
        ``priceToBeat`` comes late (or came unusable), so ask again."""
        return (
            window.market is not None
            and window.market.rule != TWAP
            and window.price_to_beat is None
            and now - window.t0 > FALLBACK_AFTER_S
        )

    def _books_upkeep(self, now: float) -> None:
        """REST books of every market's window's (and prefetched next window's) tokens, in
        one request, when due."""
        t0 = window_start(now)
        starts = [t0, t0 + WINDOW_S] if t0 + WINDOW_S - now <= PREFETCH_S else [t0]
        markets = [self._window(coin, start).market for coin in self.markets for start in starts]
        tokens = [t for m in markets if m is not None for t in (m.up_token_id, m.down_token_id)]
        if tokens:
            self._refresh_books(tokens)

    def _price_to_beat_upkeep(self, now: float) -> None:
        """Each market's price to beat from the settlement stream, else its fallbacks."""
        t0 = window_start(now)
        for coin in self.markets:
            window = self._window(coin, t0)
            if window.market is not None:
                self._fallback_price_to_beat(window, t0, window.market, now)

    # -- the price to beat ---------------------------------------------------------------
    def _twap_series(self, coin: Market, market: WindowMarket) -> PriceSeries | None:
        key = TWAP_KEYS.get(market.lookback_s or 0)
        return self.rtds.of(coin)[key] if key else None

    def _latch(self, window: _Window, t0: int, market: WindowMarket, now: float) -> None:
        """Latch the price to beat from the settlement stream once it is known for sure:
        the points around T0 have arrived with no hole between them (a back-fill after a
        reconnect counts), so a point missed in a gap can never be latched past."""
        if window.final:
            return
        t0_ms = t0 * 1000
        spot = self._spot(window.coin)
        if market.rule != TWAP:
            before, after = spot.around(t0_ms)
            if before is not None and (before[0] == t0_ms or _bracketed(spot, before, after)):
                self._set_price_to_beat(window, before[1], f"rtds:{TOPICS[SPOT_KEY]}", True)
            return
        lookback = market.lookback_s
        if lookback is None:
            return
        series = self._twap_series(window.coin, market)
        if series is not None:
            before, after = series.around(t0_ms - 1)  # after: the first report at or after T0
            stands_in = now - t0 >= T0_REPORT_WAIT_S and _bracketed(series, before, after)
            if after is not None and (after[0] == t0_ms or stands_in):
                self._latch_twap_report(window, series, after, lookback, now)
                return
        # The TWAP topic is silent (or has a hole at T0): the same average from the spot.
        if window.price_to_beat is None and now - t0 >= FALLBACK_AFTER_S:
            self._set_spot_mean(window, lookback, False)

    def _set_spot_mean(self, window: _Window, lookback: int, final: bool) -> None:
        """The price to beat from our own mean of the spot over [T0 - L, T0], when the spot
        has no hole there."""
        t0_ms = window.t0 * 1000
        start_ms = t0_ms - lookback * 1000
        spot = self._spot(window.coin)
        if spot.covered(start_ms, t0_ms, MAX_GAP_MS):
            mean = spot.mean(start_ms, t0_ms)
            if mean is not None:
                via = f"rtds:{TOPICS[SPOT_KEY]}:{SPOT_MEAN}{lookback}s"
                self._set_price_to_beat(window, mean, via, final)

    def _latch_twap_report(
        self,
        window: _Window,
        series: PriceSeries,
        report: tuple[int, float],
        lookback: int,
        now: float,
    ) -> None:
        """The TWAP report at T0 is the price to beat when the spot's own mean over the
        lookback witnesses it. One that disagrees is refused and the row is stale with the
        reason, until the topic's latest report agrees with the spot again: then the report
        at T0 was the topic's passing error and the spot's mean is the price to beat (the
        settlement stream's own points, which the model rests on anyway)."""
        via = f"rtds:{TOPICS[TWAP_KEYS[lookback]]}"
        spot, t0_ms = self._spot(window.coin), window.t0 * 1000
        sigma = sigma_of(spot.volatility())
        if (report[1], via) not in window.refused:
            witness = twap_witness(spot, t0_ms, lookback, sigma, MAX_GAP_MS)
            if witness is None:
                # The spot's history may come after its live points (and after the TWAP's):
                # nothing before the lookback yet, wait for it; nor are the points up to T0
                # all in during the first seconds.
                unheard = spot.around(t0_ms - lookback * 1000)[0] is None
                latest = spot.latest()
                behind = latest is None or latest[0] < t0_ms - MAX_GAP_MS
                if unheard or (behind and now - window.t0 < FALLBACK_AFTER_S):
                    return
                # A hole in the spot's lookback: the seconds it has, a coarse witness; with
                # none, the report was judged as a point only (docs/price-to-beat.md).
                witness = twap_witness(spot, t0_ms, lookback, sigma, MAX_GAP_MS, partial=True)
            if witness is None or witness.admits(report[1]):
                self._set_price_to_beat(window, report[1], via, True)
                return
            window.refused.add((report[1], via))
            self._doubt(window, PRICE_TO_BEAT, witness.reason(report[1], via), feed="rtds")
        if topic_agrees_now(spot, series, t0_ms, lookback, sigma, MAX_GAP_MS):
            self._set_spot_mean(window, lookback, True)

    def _plausible_price_to_beat(self, window: _Window, value: float, via: str) -> bool | None:
        """A price to beat from outside the settlement stream is believed only when it is a
        finite price the spot's own points around T0 witness (``price_to_beat.py``); None
        while they cannot (no point near T0 yet). A refused one makes the row stale with the
        reason until a believable one comes."""
        if not (math.isfinite(value) and value > 0):
            self.suspects.note("out_of_range", f"price to beat {value!r} from {via}")
            # Counted as out_of_range just above, not again as disagrees: no ``_doubt``.
            window.doubts[PRICE_TO_BEAT] = f"price to beat {value!r} from {via} is no price"
            return False
        spot = self._spot(window.coin)
        witness = spot_witness(spot, window.t0 * 1000, sigma_of(spot.volatility()))
        if witness is None:
            return None
        if witness.admits(value):
            return True
        self._doubt(window, PRICE_TO_BEAT, witness.reason(value, via))
        return False

    def _set_price_to_beat(self, window: _Window, value: float, via: str, final: bool) -> None:
        if window.final and not final:
            return  # the settlement's own value (latched meanwhile) stays
        candidate = (value, via)
        if candidate in window.refused:
            return
        known = (window.price_to_beat, window.price_to_beat_via)
        if candidate != known and not via.startswith("rtds:"):
            verdict = self._plausible_price_to_beat(window, value, via)
            if verdict is False:
                window.refused.add(candidate)  # judged once: not counted again on every tick
            if not verdict:
                return
        if window.price_to_beat_via != via:
            log.info("price to beat %.2f from %s", value, via)
        window.price_to_beat, window.price_to_beat_via, window.final = value, via, final
        self._clear(window, PRICE_TO_BEAT)  # a believed price to beat ends a refusal's doubt

    def _fallback_price_to_beat(
        self, window: _Window, t0: int, market: WindowMarket, now: float
    ) -> None:
        self._latch(window, t0, market, now)
        if window.price_to_beat is not None or market.rule == TWAP:
            # A TWAP market's price to beat is the TWAP at T0: the report, or our own mean of
            # the spot over [T0 - L, T0] (both in ``_latch``), else none and no P(up). The
            # site's open price is the SPOT at T0 (a public study; twapEnabled=true changes
            # nothing we can verify) and Gamma's priceToBeat may be either: neither is used,
            # the site is not even asked (docs/price-to-beat.md).
            return
        if now - t0 > FALLBACK_AFTER_S and (
            clocks.monotonic() - window.site_tried_at >= SITE_RETRY_S
        ):
            window.site_tried_at = clocks.monotonic()
            opened = self._site_open_price(window.coin, t0, market)
            if opened is not None:
                self._set_price_to_beat(window, opened, "site:crypto-price", False)
                return
        if market.price_to_beat is not None:
            self._set_price_to_beat(window, market.price_to_beat, "gamma", False)

    def _site_open_price(self, coin: Market, t0: int, market: WindowMarket) -> float | None:
        """The site's open price of a SPOT market's window (None for a TWAP market: never
        asked, see ``_fallback_price_to_beat``)."""
        if market.rule == TWAP:
            return None

        def iso(t: int) -> str:
            return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

        params = {
            "symbol": coin.symbol,
            "eventStartTime": iso(t0),
            "variant": "fiveminute",
            "endDate": iso(t0 + WINDOW_S),
        }
        try:
            response = self.http.get(
                f"{self.upstreams.site.rstrip('/')}/api/crypto/crypto-price", params=params
            )
            payload = response.json() if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError) as exc:
            UPSTREAM_ERRORS.labels("site").inc()
            log.debug("crypto-price lookup failed: %s", exc)
            return None
        value = payload.get("openPrice") if isinstance(payload, dict) else None
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)  # judged (finite, near the spot) in ``_set_price_to_beat``
        return None

    # -- books ------------------------------------------------------------------------
    def _refresh_books(self, assets: list[str]) -> None:
        """Re-read books over REST when a quote is missing or unconfirmed for a while, when
        the level book disagrees with the upstream's top (or is crossed), and every
        ``CROSS_CHECK_S``; the snapshot replaces the level book (at most once a second)."""
        now = clocks.monotonic()
        quotes = [self.books.quote(asset) for asset in assets]
        unconfirmed = any(q is None or now - q.at > BOOK_FRESH_S for q in quotes)
        disputed = bool(self.books.wanted_snapshots() & set(assets))
        cross_check = now - self._checked_at >= CROSS_CHECK_S
        if (
            not (unconfirmed or disputed or cross_check)
            or now - self._rest_at < REST_MIN_INTERVAL_S
        ):
            return
        self._rest_at = now
        try:
            books = fetch_books(self.http, self.upstreams.clob, assets)
        except (httpx.HTTPError, UpstreamError) as exc:
            UPSTREAM_ERRORS.labels("clob_rest").inc()
            log.warning("clob /books failed: %s", exc)
            self.books.rest_reachable(False)  # the socket's top is the only word (book.py)
            return
        self.books.rest_reachable(True)
        if cross_check:
            self._checked_at = now
        for asset in assets:
            book = books.get(asset)
            if book is not None:
                self.identity.note_book(asset, book.get("market"))
                self.books.snapshot(asset, book.get("bids"), book.get("asks"), REST, now)

    # -- doubts: inputs that disagree --------------------------------------------------------
    def _doubt(
        self, window: _Window, kind: str, reason: str, feed: str = "market", counted: bool = True
    ) -> None:
        """``window``'s row is stale for ``reason`` until ``_clear(window, kind)``; counted as a
        ``disagrees`` suspect of ``feed`` (``market``, ``rtds`` or ``clob``; logged at most
        once a minute) when new, unless not ``counted`` (an input not confirmed yet, which
        nothing contradicts)."""
        if window.doubts.get(kind) != reason:
            window.doubts[kind] = reason
            if not counted:
                return
            suspects = {"market": self.suspects, "rtds": self.rtds.suspects}.get(
                feed, self.books.suspects
            )
            suspects.note("disagrees", f"{window.coin.symbol} window {window.t0}: {reason}")

    @staticmethod
    def _clear(window: _Window, kind: str) -> None:
        """The input of ``kind`` agrees with its witness again."""
        window.doubts.pop(kind, None)

    def _judge_identity(self, window: _Window, market: WindowMarket | None) -> None:
        """Doubt the row while Gamma's market or a socket top is not confirmed by the CLOB
        (identity.py); clear each doubt once it is."""
        verdicts: dict[str, Verdict | None] = dict.fromkeys((IDENTITY, *TOP_KINDS.values()))
        if market is not None:
            verdicts[IDENTITY] = self.identity.verdict(market)
            verdicts.update(top_verdicts(self.books, market))
        for kind, verdict in verdicts.items():
            if verdict is None:
                self._clear(window, kind)
            else:
                self._doubt(window, kind, verdict.reason, verdict.feed, verdict.disagrees)

    # -- the row ----------------------------------------------------------------------
    def _unresolved(self, t0: int, now: float) -> list[WindowMarket]:
        """Finished windows still waiting for their ``market_resolved`` (at most
        ``RESOLUTION_WAIT_S`` after their end): their tokens stay watched, so the outcome
        arrives on the socket (and on a tape)."""
        with self._lock:
            for (_, start), window in self._windows.items():
                if start + WINDOW_S <= now:
                    self._note_finished(window)
        winners = {str(r.get("winning_asset_id")) for r in self.clob.resolutions}
        for slug, market in list(self._finished.items()):
            ended = market.window_start + WINDOW_S
            resolved = {market.up_token_id, market.down_token_id} & winners
            if resolved or now - ended > RESOLUTION_WAIT_S:
                del self._finished[slug]
        return list(self._finished.values())

    def _note_finished(self, window: _Window) -> None:
        """Wait for the outcome of ``window``'s market (the caller holds the lock)."""
        if window.market is not None:
            self._finished.setdefault(window.market.slug, window.market)

    def _watch(self, tokens: tuple[str, ...], now: float) -> None:
        for token in tokens:
            self._asked_at.setdefault(token, now)
        for token in [t for t in self._asked_at if t not in tokens]:
            del self._asked_at[token]
        self.clob.watch(tokens)

    def _model(
        self, market: WindowMarket | None, k: float | None, spot: PriceSeries
    ) -> tuple[float | None, float | None, float | None, float | None, float | None]:
        """(P(up) in percent, P(down) in percent, sigma used, variance scale, the model's own
        fraction), or Nones."""
        vol = spot.volatility()
        sigma = vol.sigma if vol else None
        scale = vol.scale if vol else None
        latest = spot.latest()
        if market is None or k is None or latest is None or vol is None:
            return None, None, sigma, scale, None
        ts_ms, price = latest
        end_ms = (market.window_start + WINDOW_S) * 1000
        tau = max(0.0, (end_ms - ts_ms) / 1000.0)  # from the price's own time, not ours
        known_mean = None
        if market.rule == TWAP:
            if market.lookback_s is None:
                return None, None, sigma, scale, None
            lookback = market.lookback_s
            if tau < lookback:
                start_ms = end_ms - lookback * 1000
                if not spot.covered(start_ms, ts_ms, MAX_GAP_MS):
                    return None, None, sigma, scale, None  # a hole in what is averaged
                known_mean = spot.mean(start_ms, ts_ms) or price
        # The spread measured on this settlement's own rule and horizon (volatility.py).
        spread, jump_var = vol.spread(market.rule, market.lookback_s, tau)
        p_up = probability_up(
            price,
            k,
            tau,
            spread,
            market.rule,
            market.lookback_s,
            known_mean,
            jump_rate=vol.jump_rate,
            jump_var=jump_var,
            rho=vol.rho,
            last_return=vol.last_return,
            ratios=vol.ratios,
        )
        up, down = percentages(p_up)
        # The variance scale applied over the time left (the feed's own, from its smoothing).
        return up, down, sigma, horizon_ratio(vol.rho, tau, vol.ratios), p_up

    def rows(self, now: float) -> list[BoardRow]:
        """One row per market at ``now``, in ``SYMBOLS`` order."""
        self.start()
        t0 = window_start(now)
        # From PREFETCH_S before the roll the next window's tokens are watched too, on the
        # same socket, so the board switches on the boundary with warm books.
        near_roll = t0 + WINDOW_S - now <= PREFETCH_S
        starts = [t0, t0 + WINDOW_S] if near_roll else [t0]
        current = [self._window(coin, start).market for coin in self.markets for start in starts]
        watched = [*self._unresolved(t0, now), *(m for m in current if m)]
        self._watch(tuple(t for m in watched for t in (m.up_token_id, m.down_token_id)), now)
        now_ms = int(now * 1000)
        mono = clocks.monotonic()
        return [self._row(coin, now, now_ms, mono) for coin in self.markets]

    def _row(self, coin: Market, now: float, now_ms: int, mono: float) -> BoardRow:
        """``coin``'s row: its own window, books, spot, price to beat and staleness."""
        t0 = window_start(now)
        window = self._window(coin, t0)
        market = window.market
        up = down = None
        if market is not None:
            up = self.books.quote(market.up_token_id)
            down = self.books.quote(market.down_token_id)
            self._latch(window, t0, market, now)
        self._judge_identity(window, market)
        spot = self._spot(coin)
        latest = spot.latest()
        price = latest[1] if latest else None
        k = window.price_to_beat
        p_up, p_down, sigma, scale, model_p_up = self._model(market, k, spot)

        # A missing (or crossed) input is as old as the time since it was first asked for,
        # and never younger than the stale threshold: the row is stale while it lacks one.
        never_fresh = now_ms - self._stale_after_ms - 1

        def waiting(token: str | None) -> int:
            asked = self._asked_at.get(token, self._created) if token else self._created
            return min(int(asked * 1000), never_fresh)

        def quote_ms(q: Quote | None, token: str | None) -> int:
            if q is None:
                return waiting(token)
            confirmed = now_ms - int((mono - q.at) * 1000)
            return min(confirmed, never_fresh) if q.crossed else confirmed

        up_token = market.up_token_id if market else None
        down_token = market.down_token_id if market else None
        price_ms = spot.information_ms()  # its stamp plus the feed's normal lag (rtds.py)
        input_times = {
            "upBook": quote_ms(up, up_token),
            "downBook": quote_ms(down, down_token),
            "price": price_ms if price_ms is not None else waiting(None),
        }
        present = {"upBook": up is not None, "downBook": down is not None, "price": bool(latest)}
        rem = max(0.0, t0 + WINDOW_S - now)
        rule = market.rule if market is not None else None
        # A row without a probability (no believable price to beat yet, too little history)
        # shows null there: no opinion rather than a wrong one; its books and price keep
        # their own ages (docs/reliability.md).
        ts = min(min(input_times.values()), now_ms)
        spot_doubts = [f"price: {why}" for why in (spot.doubt(), self.rtds.twap_doubt(coin)) if why]
        # A copy (atomic): the upkeep thread may doubt or clear while this tick reads.
        suspect = (*window.doubts.copy().values(), *spot_doubts)
        if suspect:
            ts = min(ts, never_fresh)  # inputs that disagree: stale, never fresh and wrong
        live = LiveDetails(
            sigma_scale=scale,
            twap_lookback_s=market.lookback_s if market else None,
            slug=market.slug if market else None,
            sources={
                "market": "gamma" if market else None,
                "upBook": up.via if up else None,
                "downBook": down.via if down else None,
                "price": f"rtds:{TOPICS[SPOT_KEY]}" if latest else None,
                "priceToBeat": window.price_to_beat_via,
                "model": f"digital-option:{rule}" if p_up is not None else None,
            },
            input_ages_ms={
                name: (max(0, now_ms - t) if present[name] else None)
                for name, t in input_times.items()
            },
            suspect=suspect,
        )
        return BoardRow(
            symbol=coin.symbol,
            slot=t0,
            p_up_pct=p_up,
            p_down_pct=p_down,
            up_bid=up.bid if up else None,
            up_ask=up.ask if up else None,
            down_bid=down.bid if down else None,
            down_ask=down.ask if down else None,
            up_token_id=up_token,
            down_token_id=down_token,
            rem_secs=round(rem, 3),
            ts=ts,
            window_start=t0,
            window_end=t0 + WINDOW_S,
            price=price,
            price_to_beat=k,
            sigma=sigma,
            settlement=rule,
            source=self.name,
            live=live,
            model_p_up=model_p_up,
        )
