"""The shared world: ``FakePolymarket`` holds the markets and the books, starts the five
stand-ins on it (Gamma, CLOB REST, site, CLOB market channel, RTDS) and points the service
at them (``env()``); ``running`` starts them all and always stops them.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from app.markets import MARKETS, SPANS, Span
from harness.fake_polymarket.binance import FakeBinance
from harness.fake_polymarket.clob import FakeClobRest
from harness.fake_polymarket.clob_ws import FakeClobWs, PriceChange
from harness.fake_polymarket.gamma import FakeGamma
from harness.fake_polymarket.http_server import _HttpFake
from harness.fake_polymarket.market import FakeBook, FakeMarket, default_books, shifted
from harness.fake_polymarket.rtds import FakeRtds
from harness.fake_polymarket.site import FakeSite
from harness.fake_polymarket.wire import DEFAULT_SYMBOL, SPOT, chainlink_of
from harness.fake_polymarket.ws_server import _WsFake
from harness.spans import FIVE_MINUTES


@dataclass
class FakePolymarket:
    """Gamma, CLOB REST, site, CLOB market WS and RTDS fakes sharing one world.

    ``auto_markets``: every window of every market is listed (made up on demand, with
    default books), for tests that run on the real clock and may cross a window boundary.

    Several markets at once: ``list_market(FakeMarket(t0, symbol="ETH"))`` lists ETH's
    window beside BTC's of the same ``t0`` (``market_of(symbol, t0)`` reads either; ``market``
    and ``markets`` are BTC's), with tokens and books of its own on the one CLOB.
    """

    auto_markets: bool = False
    auto_rule: str = SPOT  # the settlement rule of markets made up on demand
    markets: dict[int, FakeMarket] = field(default_factory=dict)  # BTC's, by window start
    books: dict[str, FakeBook] = field(default_factory=dict)
    # The one wall clock of every stand-in (a ``harness.clocks.OffsetClock`` puts "now"
    # anywhere in a window); ages, delays and timeouts stay on the real monotonic clock.
    clock: Callable[[], float] = time.time

    def __post_init__(self) -> None:
        self._lock = threading.RLock()
        # The other markets' windows, by symbol then window start (BTC's are ``markets``).
        self._other_markets: dict[str, dict[int, FakeMarket]] = {
            symbol: {} for symbol in MARKETS if symbol != DEFAULT_SYMBOL
        }
        # Every market's windows of another length (15 minutes), by (symbol, span name).
        self._span_markets: dict[tuple[str, str], dict[int, FakeMarket]] = {
            (symbol, span): {} for symbol in MARKETS for span in SPANS if span != "5m"
        }
        self.gamma = FakeGamma(self)
        self.clob = FakeClobRest(self)
        self.site = FakeSite()
        self.clob_ws = FakeClobWs(self)
        self.rtds = FakeRtds()
        # Binance's klines, built from the exchange prices RTDS relays (the hourly candle).
        self.binance = FakeBinance()
        self.binance.paths = self.rtds.exchange_prices
        self._started: list[_HttpFake | _WsFake] = []
        for server in self._servers():
            server.clock = self.clock

    def _servers(self) -> tuple[_HttpFake | _WsFake, ...]:
        return (self.gamma, self.clob, self.site, self.clob_ws, self.rtds, self.binance)

    # lifecycle
    def start(self) -> FakePolymarket:
        """Start every server (stopping those started if one fails)."""
        try:
            for server in self._servers():
                server.start()
                self._started.append(server)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop every server that was started."""
        for server in reversed(self._started):
            with contextlib.suppress(Exception):
                server.stop()
        self._started.clear()

    def __enter__(self) -> FakePolymarket:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def env(self) -> dict[str, str]:
        """The ``POLYMARKET_*`` (and ``BINANCE_REST_URL``) variables that point the service at
        these fakes."""
        return {
            "BOARD_SOURCE": "polymarket",
            "POLYMARKET_GAMMA_URL": self.gamma.url,
            "POLYMARKET_CLOB_URL": self.clob.url,
            "POLYMARKET_CLOB_WS_URL": self.clob_ws.url,
            "POLYMARKET_RTDS_URL": self.rtds.url,
            "POLYMARKET_SITE_URL": self.site.url,
            "BINANCE_REST_URL": self.binance.url,
        }

    # the world
    def markets_of(
        self, symbol: str = DEFAULT_SYMBOL, span: Span = FIVE_MINUTES
    ) -> dict[int, FakeMarket]:
        """The listed windows of one market (of one length), by window start (``markets``
        for BTC's 5-minute ones)."""
        chainlink_of(symbol)  # an unknown market is a mistake in the test
        if span != FIVE_MINUTES:
            return self._span_markets[symbol, span.name]
        if symbol == DEFAULT_SYMBOL:
            return self.markets
        return self._other_markets[symbol]

    def all_markets(self) -> list[FakeMarket]:
        """Every listed window of every market."""
        with self._lock:
            tables = [
                self.markets,
                *self._other_markets.values(),
                *self._span_markets.values(),
            ]
            return [market for table in tables for market in table.values()]

    def list_market(
        self,
        market: FakeMarket,
        books: tuple[FakeBook, FakeBook] | None = None,
    ) -> FakeMarket:
        """List ``market`` on Gamma (under its own symbol's slug), with its UP and DOWN books
        on the CLOB."""
        up, down = books or default_books(market)
        with self._lock:
            self.markets_of(market.symbol, market.span)[market.window_start] = market
            self.books.setdefault(market.up_token, up)
            self.books.setdefault(market.down_token, down)
        return market

    def unlist(self, window_start: int, symbol: str = DEFAULT_SYMBOL) -> None:
        """Gamma answers 404 for this window of ``symbol``'s market again."""
        with self._lock:
            self.markets_of(symbol).pop(window_start, None)

    def market(self, window_start: int) -> FakeMarket | None:
        """BTC's market of a window (made up when ``auto_markets``)."""
        return self.market_of(DEFAULT_SYMBOL, window_start)

    def market_of(
        self, symbol: str, window_start: int, span: Span = FIVE_MINUTES
    ) -> FakeMarket | None:
        """``symbol``'s market of a window of ``span`` (made up when ``auto_markets``)."""
        with self._lock:
            market = self.markets_of(symbol, span).get(window_start)
            if market is None and self.auto_markets and span.start(window_start) == window_start:
                made = FakeMarket(window_start, rule=self.auto_rule, symbol=symbol, span=span)
                market = self.list_market(made)
            return market

    def condition_of(self, asset: str) -> str:
        """The condition id of the market a token belongs to."""
        for market in self.all_markets():
            if asset in market.tokens:
                return market.condition
        return "0x" + "0" * 64

    def market_by_condition(self, condition: str) -> FakeMarket | None:
        """The listed market whose condition id is ``condition``."""
        return next((m for m in self.all_markets() if m.condition == condition), None)

    def counterpart(self, asset: str, offset: int) -> str | None:
        """The token of the same outcome as ``asset`` in the window ``offset`` windows away
        (of the same market), if listed."""
        for market in self.all_markets():
            if asset in market.tokens:
                start = shifted(market.span, market.window_start, offset)
                other = self.market_of(market.symbol, start, market.span)
                if other is None:
                    return None
                return other.tokens[market.tokens.index(asset)]
        return None

    def book_json(self, asset: str) -> dict[str, Any] | None:
        """The CLOB book object of a token, or None when there is no book."""
        with self._lock:
            book = self.books.get(asset)
            if book is None:
                return None
            return book.as_json(asset, self.condition_of(asset), int(self.clock() * 1000))

    def best(self, asset: str) -> tuple[float | None, float | None]:
        """(best bid, best ask) of a token as the fake holds it."""
        with self._lock:
            book = self.books[asset]
            return book.best_bid, book.best_ask

    def quote_texts(self, asset: str) -> tuple[str, str, str]:
        """(best bid, best ask, book hash) of a token as the market channel writes them:
        decimal strings, ``"0"`` / ``"1"`` for an empty side."""
        with self._lock:
            book = self.books[asset]
            return book.best_bid_text, book.best_ask_text, book.hash()

    def set_level(self, asset: str, side: str, price: str, size: str, send: bool = True) -> None:
        """Change one level of a book (REST sees it at once) and send the ``price_change``;
        with ``send=False`` the message is lost (the socket's book goes wrong)."""
        with self._lock:
            self.books[asset].set(side, price, size)
        if send:
            self.clob_ws.send_price_change(asset, side, price, size)

    def set_levels(self, changes: Sequence[PriceChange], send: bool = True) -> None:
        """Apply several (asset, side, price, size) changes, then send them as ONE
        ``price_change`` message (unless ``send=False``: lost)."""
        with self._lock:
            for asset, side, price, size in changes:
                self.books[asset].set(side, price, size)
        if send:
            self.clob_ws.send_price_changes(changes)


@contextlib.contextmanager
def running(
    auto_markets: bool = False, auto_rule: str = SPOT, clock: Callable[[], float] = time.time
) -> Iterator[FakePolymarket]:
    """All fakes on the wall clock ``clock``, started and always stopped."""
    world = FakePolymarket(auto_markets=auto_markets, auto_rule=auto_rule, clock=clock)
    with world:
        yield world
