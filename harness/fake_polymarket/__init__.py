"""Fake Polymarket upstreams on 127.0.0.1 (free ports), for the tests and for benchmarks.

``FakePolymarket`` starts five servers that serve today's documented shapes, awkward parts
included (see ../shared/upstream.md):

- ``gamma`` (HTTP): ``GET /events/slug/btc-updown-5m-<T0>`` (``eth-``, ``sol-``, ``xrp-``
  for the other markets) answers an event whose
  ``markets[0].outcomes`` and ``clobTokenIds`` are JSON-encoded STRINGS, in the order the
  market says (``["Down","Up"]`` happens); 404 for a window not listed.
- ``clob`` (HTTP): ``POST /books`` (and ``GET /book``) with prices and sizes as decimal
  strings, bids ASCENDING and asks DESCENDING (the best levels are the last elements).
- ``site`` (HTTP): ``GET /api/crypto/crypto-price`` (the price-to-beat fallback of spot
  markets), per ``symbol`` (BTC when absent). Its ``openPrice`` is the spot at T0 even for
  ``twapEnabled=true`` (what a public study of TWAP rounds observed);
  ``FakeSite.twap_queries`` lists the queries that asked.
- ``clob_ws`` (WebSocket): the market channel.

  - The first ``{"assets_ids": [...], "type": "market", ...}`` frame of a connection
    subscribes; the reply is a JSON ARRAY of ``book`` snapshots. A second ``type: "market"``
    frame on the same connection is refused: text ``INVALID OPERATION``, nothing changes
    (``refused``).
  - ``{"assets_ids": [...], "operation": "subscribe" | "unsubscribe", ...}`` changes the
    assets of an open connection (``operations``): a subscribe answers a JSON array of
    snapshots of the assets it added, or the text ``NO NEW ASSETS``; an unsubscribe answers
    nothing. ``refuse_operations = True`` answers every operation ``INVALID OPERATION``.
  - ``snapshot_delay_s > 0`` sends every snapshot reply that late, from a thread (a slow
    snapshot); the assets join the connection only then, so nothing about them comes first.
  - Then ``price_change`` messages driven by the test (``FakePolymarket.set_level`` /
    ``set_levels``; ``send=False`` loses the message on purpose), each entry carrying its
    asset's new ``best_bid`` / ``best_ask`` (``"0"`` / ``"1"`` for an empty side) as decimal
    strings; ``best_bid_ask`` (``send_best_bid_ask``, ``keep_alive``) and
    ``market_resolved`` (``send_market_resolved``).
- ``rtds`` (WebSocket): the real-time data socket.

  - Topics ``crypto_prices_chainlink`` (spot), ``crypto_prices_twap_sixty`` and
    ``crypto_prices_twap_thirty``; any other topic answers ``{"statusCode": 400, "body":
    {"message": "Invalid topic: <topic>"}}``.
  - ``filters`` must be exactly the compact string ``{"symbol":"btc/usd"}`` (or another
    market's stream: ``eth/usd``, ``sol/usd``, ``xrp/usd``): the real filter is a string
    match, so ``{"symbol": "btc/usd"}`` (with a space) matches nothing
    (``bad_subscriptions``). A connection gets the symbols it subscribed, each in messages
    whose ``payload.symbol`` is its own; the methods below take ``symbol`` (btc/usd).
  - After subscribing to the spot topic, the symbol's history snapshot arrives under the topic
    ``crypto_prices`` (``type: "subscribe"``, ``payload.data``), ``history_delay_s`` late if
    set (live updates may come first). The TWAP topics have none unless ``twap_history``.
  - ``update`` messages; the TWAP topics add ``full_accuracy_value`` (scaled by 1e18, or a
    plain decimal string with ``plain_full_accuracy``, the announced successor) and
    ``window_s``. ``paused = True`` keeps recording pushes into the history without
    delivering them (a gap to repair from the snapshot); ``send_error`` sends an error frame.
  - ``BrownianPath`` is a seeded 1-second spot path with its exact TWAPs;
    ``FakeRtds.play`` pushes it (or any ``harness.paths.SeededPath``, such as the
    settlement-feed stand-in) up to a (virtual) time, ``seed_path`` puts it in the history,
    ``live_on`` plays it on the real clock.

Several markets: BTC is every fake's default, byte for byte as when it was the only one;
``FakeMarket(t0, symbol="ETH")`` and ``symbol=`` on the RTDS and site methods bring in the
others (the table is ``app.markets.MARKETS``).

Every HTTP fake can be switched to answer 500 (``mode = "error"``) or never to answer
(``mode = "hang"``: longer than the client's 3 s timeout). Every WebSocket fake answers the
text ``PING`` with ``PONG`` and can drop its connections (``drop()``: the sockets just
close), refuse new ones (``refuse = True``: HTTP 503 at the handshake), go silent
(``silent = True``: nothing at all, not even ``PONG``) or freeze the current connections
(``freeze()``: ``PONG`` still answered, no data, as the real RTDS is known to do).

Faults of VALUE (issue 27): well-formed answers that are wrong. Each is a switch a test turns
on, leaves on for a while and turns off; all are off by default, and off they change nothing
on the wire.

- Every HTTP fake: ``trickle_bps > 0`` writes each answer (status line, headers and body) at
  that many bytes a second; ``trickles`` records each such exchange and whether the client
  abandoned it (``Trickle``). An exchange under way keeps trickling after the switch is off.
- ``gamma``: ``window_offset = -1 | +1`` answers the previous / next window's event for a
  slug; ``same_tokens = True`` writes ``clobTokenIds`` as ``[UP, UP]``;
  ``price_to_beat_override`` is put as ``eventMetadata.priceToBeat`` whatever its type (the
  string ``"1e400"``...); ``trickle_windows`` limits ``trickle_bps`` to those windows' slugs.
- ``gamma``, identities (issue 35): ``tokens_offset`` / ``condition_offset`` take the
  event's ``clobTokenIds`` / ``conditionId`` from the window that many away (slug and times
  stay right); ``swapped_outcomes`` reverses ``outcomes`` beside token ids left in place.
- ``clob``: ``GET /markets/{condition_id}`` answers the CLOB's own market (``condition_id``,
  ``tokens: [{token_id, outcome, price, winner}]``, ``market_slug``...);
  ``market_lookups_fail = True`` answers 500 there only.
- ``site``: ``open_price_override`` is every answer's ``openPrice`` (``45000.0``, ``1e308``,
  ``math.inf``, which JSON writes as the token ``Infinity``).
- ``clob_ws``: ``junk_books = True`` makes every ``book`` snapshot's levels unreadable (the
  subscription replies and ``send_books()``); ``top_override = (bid, ask)`` puts those raw
  strings (``"-0"``, ``"1e-400"``) in every ``best_bid_ask``; ``top_offset = 1`` tells in
  every ``best_bid_ask`` and ``price_change`` entry the top of the same outcome's token of
  the next window, under the token's own id; ``quiet = True`` pauses
  ``keep_alive`` (a quiet market).
- ``rtds``: ``send_point`` sends one update with any stamp and any raw value (a point from
  the future, ``"1.5"``, ``2``, ``"1e308"``), never recorded in the history;
  ``spot_glitch`` replaces the spot ``live()`` sends by what it returns (``+50 %``, junk)
  while the history keeps the true value; ``flood_errors(per_s)`` sends that many error
  frames a second, each different (0 stops); ``send_history`` sends any history snapshot
  (several MB of points); ``drop_after(healthy_s, times)`` drops the connections each time
  one has been up ``healthy_s`` (``drops``, ``accepted_at`` give the reconnect delays);
  ``hole`` removes points from the history, ``value_at`` reads the one in force at a time;
  ``twap_glitch`` (within ``twap_glitch_span``) replaces what both TWAP topics send, live
  and in their history snapshots (``+1 %``), while the history keeps the truth.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from app.markets import MARKETS, WINDOW_S
from harness.fake_polymarket.brownian import LIVE_S, BrownianPath, live_span, wave_price
from harness.fake_polymarket.clob import FakeClobRest
from harness.fake_polymarket.clob_ws import (
    INVALID_OPERATION,
    NO_NEW_ASSETS,
    FakeClobWs,
    PriceChange,
    junk_levels,
)
from harness.fake_polymarket.gamma import FakeGamma
from harness.fake_polymarket.http_server import HANG_S, TRICKLE_POLL_S, Hit, Trickle, _HttpFake
from harness.fake_polymarket.market import FakeBook, FakeMarket, default_books
from harness.fake_polymarket.rtds import FakeRtds
from harness.fake_polymarket.site import FakeSite
from harness.fake_polymarket.wire import (
    CHAINLINK_OF_PAIR,
    CHAINLINK_SYMBOLS,
    COIN_NAMES,
    DEFAULT_CHAINLINK,
    DEFAULT_SYMBOL,
    EXCHANGE_BASIS,
    EXCHANGE_TOPIC,
    PAIR_OF_CHAINLINK,
    RTDS_TOPICS,
    SCALE,
    SERVED_FILTERS,
    SLUG_PREFIX,
    SPOT,
    SPOT_FILTERS,
    SPOT_HISTORY_TOPIC,
    SPOT_RESOLUTION_SOURCE,
    SPOT_TOPIC,
    TOPICS,
    TWAP,
    TWAP30_TOPIC,
    TWAP_RESOLUTION_SOURCE,
    TWAP_TOPIC,
    TWAP_TOPICS,
    WINDOW_S_OF_TOPIC,
    chainlink_of,
    condition_id,
    exact,
    filters_of,
    from_iso,
    iso,
    now_ms,
    plain,
    price_text,
    resolution_source,
    scaled,
    token_id,
    twap_topic,
)
from harness.fake_polymarket.ws_server import _WsFake

__all__ = [
    "CHAINLINK_OF_PAIR",
    "CHAINLINK_SYMBOLS",
    "COIN_NAMES",
    "DEFAULT_CHAINLINK",
    "DEFAULT_SYMBOL",
    "EXCHANGE_BASIS",
    "EXCHANGE_TOPIC",
    "HANG_S",
    "INVALID_OPERATION",
    "LIVE_S",
    "NO_NEW_ASSETS",
    "PAIR_OF_CHAINLINK",
    "RTDS_TOPICS",
    "SCALE",
    "SERVED_FILTERS",
    "SLUG_PREFIX",
    "SPOT",
    "SPOT_FILTERS",
    "SPOT_HISTORY_TOPIC",
    "SPOT_RESOLUTION_SOURCE",
    "SPOT_TOPIC",
    "TOPICS",
    "TRICKLE_POLL_S",
    "TWAP",
    "TWAP30_TOPIC",
    "TWAP_RESOLUTION_SOURCE",
    "TWAP_TOPIC",
    "TWAP_TOPICS",
    "WINDOW_S",
    "WINDOW_S_OF_TOPIC",
    "BrownianPath",
    "FakeBook",
    "FakeClobRest",
    "FakeClobWs",
    "FakeGamma",
    "FakeMarket",
    "FakePolymarket",
    "FakeRtds",
    "FakeSite",
    "Hit",
    "PriceChange",
    "Trickle",
    "chainlink_of",
    "condition_id",
    "default_books",
    "exact",
    "filters_of",
    "from_iso",
    "iso",
    "junk_levels",
    "live_span",
    "now_ms",
    "plain",
    "price_text",
    "resolution_source",
    "running",
    "scaled",
    "token_id",
    "twap_topic",
    "wave_price",
]


# -- identifiers, times, numbers --------------------------------------------------------


# -- markets and books -----------------------------------------------------------------


# -- HTTP fakes -------------------------------------------------------------------------


# -- WebSocket fakes --------------------------------------------------------------------


# -- a Brownian spot path for the model tests --------------------------------------------


# -- all of it --------------------------------------------------------------------------


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

    def __post_init__(self) -> None:
        self._lock = threading.RLock()
        # The other markets' windows, by symbol then window start (BTC's are ``markets``).
        self._other_markets: dict[str, dict[int, FakeMarket]] = {
            symbol: {} for symbol in MARKETS if symbol != DEFAULT_SYMBOL
        }
        self.gamma = FakeGamma(self)
        self.clob = FakeClobRest(self)
        self.site = FakeSite()
        self.clob_ws = FakeClobWs(self)
        self.rtds = FakeRtds()
        self._started: list[_HttpFake | _WsFake] = []

    # lifecycle
    def start(self) -> FakePolymarket:
        """Start every server (stopping those started if one fails)."""
        try:
            for server in (self.gamma, self.clob, self.site, self.clob_ws, self.rtds):
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
        """The ``POLYMARKET_*`` variables that point the service at these fakes."""
        return {
            "BOARD_SOURCE": "polymarket",
            "POLYMARKET_GAMMA_URL": self.gamma.url,
            "POLYMARKET_CLOB_URL": self.clob.url,
            "POLYMARKET_CLOB_WS_URL": self.clob_ws.url,
            "POLYMARKET_RTDS_URL": self.rtds.url,
            "POLYMARKET_SITE_URL": self.site.url,
        }

    # the world
    def markets_of(self, symbol: str = DEFAULT_SYMBOL) -> dict[int, FakeMarket]:
        """The listed windows of one market, by window start (``markets`` for BTC)."""
        if symbol == DEFAULT_SYMBOL:
            return self.markets
        chainlink_of(symbol)  # an unknown market is a mistake in the test
        return self._other_markets[symbol]

    def all_markets(self) -> list[FakeMarket]:
        """Every listed window of every market."""
        with self._lock:
            tables = [self.markets, *self._other_markets.values()]
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
            self.markets_of(market.symbol)[market.window_start] = market
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

    def market_of(self, symbol: str, window_start: int) -> FakeMarket | None:
        """``symbol``'s market of a window (made up when ``auto_markets``)."""
        with self._lock:
            market = self.markets_of(symbol).get(window_start)
            if market is None and self.auto_markets and window_start % WINDOW_S == 0:
                made = FakeMarket(window_start, rule=self.auto_rule, symbol=symbol)
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
                other = self.market_of(market.symbol, market.window_start + offset * WINDOW_S)
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
            return book.as_json(asset, self.condition_of(asset), now_ms())

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
def running(auto_markets: bool = False, auto_rule: str = SPOT) -> Iterator[FakePolymarket]:
    """All fakes, started and always stopped."""
    world = FakePolymarket(auto_markets=auto_markets, auto_rule=auto_rule)
    with world:
        yield world
