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

import bisect
import contextlib
import json
import math
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
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
from harness.fake_polymarket.ws_server import _Client, _WsFake
from harness.paths import SeededPath

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


class FakeRtds(_WsFake):
    """The real-time data socket: ``crypto_prices_chainlink`` (spot) and the TWAP topics
    ``crypto_prices_twap_sixty`` / ``crypto_prices_twap_thirty``.

    Every market's Chainlink stream (``btc/usd``, ``eth/usd``, ``sol/usd``, ``xrp/usd``: the
    ``chainlink`` of ``app.markets.MARKETS``) is served on each topic: a subscription entry
    whose ``filters`` is that stream's compact string gets that stream only. The series are
    kept per (symbol, topic): ``history`` is btc/usd's, ``history_of(symbol)`` any one's.
    ``push``, ``seed``, ``play``, ``live``... take ``symbol`` (btc/usd by default) and their
    messages carry it as ``payload.symbol``. ``paused_symbols`` pauses those streams only.
    """

    path = ""

    def __init__(self) -> None:
        super().__init__()
        self.history: dict[str, list[tuple[int, Decimal]]] = self._empty_series()  # btc/usd's
        self._other_history = {
            symbol: self._empty_series()
            for symbol in CHAINLINK_SYMBOLS
            if symbol != DEFAULT_CHAINLINK
        }
        self.paused_symbols: set[str] = set()  # these streams are recorded, not delivered
        self.history_limit = 10_800  # 3 h of 1-second points: room for 2 h of volatility
        self.bad_subscriptions: list[Any] = []
        self.unsubscriptions: list[Any] = []
        self.errors_sent: list[dict[str, Any]] = []  # every error frame sent
        self.twap_history = False  # the TWAP topics get a history snapshot too
        self.history_delay_s = 0.0  # > 0: the snapshot comes that long after the subscription
        self.plain_full_accuracy = False  # the successor format: a plain decimal string
        self.paused = False  # pushes go into the history but are not delivered (a gap)
        # A fault: live() sends what this returns instead of the true spot (kept in history).
        self.spot_glitch: Callable[[Decimal], Any] | None = None
        # A fault: live() stamps and sends each spot point this many seconds late (the point
        # of that earlier second, its true value), the history keeps the truth on time.
        self.spot_lag_s = 0.0
        # The exchange price live() sends beside the spot (``EXCHANGE_TOPIC``): the true spot
        # times ``exchange_basis``, rounded to the pair's tick; ``exchange_paused`` holds it.
        self.exchange_basis = EXCHANGE_BASIS
        self.exchange_paused = False
        self.exchange_filters: list[str] = []  # the filters of every exchange subscription
        # A fault: every TWAP point sent on the wire (live updates and history snapshots, of
        # both TWAP topics) stamped within ``twap_glitch_span`` (ms; None: any) carries what
        # this returns instead of the true TWAP; the history keeps the truth.
        self.twap_glitch: Callable[[Decimal], Decimal] | None = None
        self.twap_glitch_span: tuple[int, int] | None = None
        self.drops: list[float] = []  # monotonic time of each drop made by drop_after
        self._flood_per_s = 0.0
        self._flooding = False  # the flood's thread is running
        # (symbol, id(path)) -> (path, next second); the path is kept so its id stays its own
        self._cursors: dict[tuple[str, int], tuple[SeededPath, int]] = {}

    @staticmethod
    def _empty_series() -> dict[str, list[tuple[int, Decimal]]]:
        return {topic: [] for topic in RTDS_TOPICS}

    def history_of(self, symbol: str = DEFAULT_CHAINLINK) -> dict[str, list[tuple[int, Decimal]]]:
        """The recorded series of one Chainlink stream, per topic (``history`` for btc/usd)."""
        if symbol == DEFAULT_CHAINLINK:
            return self.history
        try:
            return self._other_history[symbol]
        except KeyError:
            known = ", ".join(CHAINLINK_SYMBOLS)
            raise ValueError(f"unknown Chainlink symbol {symbol!r} (known: {known})") from None

    def _series(self, topic: str, symbol: str) -> list[tuple[int, Decimal]]:
        return self.history_of(symbol)[topic]

    def _deliver(self, topic: str, symbol: str, text: str) -> None:
        """Send ``text`` to the connections subscribed to ``symbol`` on ``topic``."""
        for client in self.clients:
            if (topic, symbol) in client.streams and self.deliverable(client):
                client.send(text)

    def _held(self, symbol: str) -> bool:
        """Whether the updates of ``symbol`` are held back (``paused``, ``paused_symbols``)."""
        return self.paused or symbol in self.paused_symbols

    @staticmethod
    def served(subscription: Any) -> bool:
        """Whether one entry of ``subscriptions`` is served: a known topic and exactly the
        compact filter string of a known stream."""
        return FakeRtds.symbol_of(subscription) is not None

    @staticmethod
    def symbol_of(subscription: Any) -> str | None:
        """The Chainlink symbol a served entry of ``subscriptions`` asks for; None when the
        entry is not served."""
        if not isinstance(subscription, dict):
            return None
        if subscription.get("topic") not in RTDS_TOPICS:
            return None
        filters = subscription.get("filters")
        return SERVED_FILTERS.get(filters) if isinstance(filters, str) else None

    def subscribed_topics(self, symbol: str | None = None) -> set[str]:
        """Topics of every valid (served) subscription entry received (of ``symbol`` only
        when given)."""
        return {topic for topic, sym in self.subscribed_streams() if symbol in (None, sym)}

    def subscribed_symbols(self) -> set[str]:
        """Chainlink symbols of every valid (served) subscription entry received."""
        return {symbol for _, symbol in self.subscribed_streams()}

    def subscribed_streams(self) -> set[tuple[str, str]]:
        """(topic, symbol) of every valid (served) subscription entry received."""
        streams: set[tuple[str, str]] = set()
        for message in self.subscriptions:
            for entry in message["subscriptions"]:
                symbol = self.symbol_of(entry)
                if symbol is not None:
                    streams.add((entry["topic"], symbol))
        return streams

    def symbols_of_connections(self) -> list[set[str]]:
        """Each open connection's Chainlink symbols now (after unsubscriptions), in the order
        the connections were accepted."""
        return [client.symbols for client in self.clients]

    def on_message(self, client: _Client, message: Any) -> None:
        """``{"action": "subscribe" | "unsubscribe", "subscriptions": [...]}``."""
        if not isinstance(message, dict) or message.get("action") not in (
            "subscribe",
            "unsubscribe",
        ):
            return
        subscriptions = message.get("subscriptions")
        if not isinstance(subscriptions, list) or not all(
            isinstance(s, dict) and isinstance(s.get("filters"), str) for s in subscriptions
        ):
            self.bad_subscriptions.append(message)
            return
        if message["action"] == "unsubscribe":
            self.unsubscriptions.append(message)
            for sub in subscriptions:
                symbol = self.symbol_of(sub)
                if symbol is not None:
                    client.streams.discard((sub["topic"], symbol))
            return
        self.subscriptions.append(message)
        invalid: list[str] = []
        misfiltered = False
        streams: list[tuple[str, str]] = []
        for sub in subscriptions:
            topic = sub.get("topic")
            symbol = self.symbol_of(sub)
            if topic == EXCHANGE_TOPIC:
                self.exchange_filters.append(sub["filters"])
                pairs = sub["filters"].split(",")
                streams += [
                    (EXCHANGE_TOPIC, CHAINLINK_OF_PAIR[p]) for p in pairs if p in CHAINLINK_OF_PAIR
                ]
            elif not isinstance(topic, str) or topic not in RTDS_TOPICS:
                if str(topic) not in invalid:
                    invalid.append(str(topic))
            elif symbol is not None:
                if (topic, symbol) not in streams:
                    streams.append((topic, symbol))
            else:
                misfiltered |= self._misfiltered(sub["filters"])
        if misfiltered:
            self.bad_subscriptions.append(message)
        for topic in invalid:
            self._error(client, 400, f"Invalid topic: {topic}")
        client.streams |= set(streams)
        for topic, symbol in streams:
            if topic == SPOT_TOPIC or (self.twap_history and topic in RTDS_TOPICS):
                self._history_to(client, topic, symbol)

    @staticmethod
    def _misfiltered(filters: str) -> bool:
        """A filter that is not JSON, or that means a served stream (``btc/usd``...) but is
        not its compact string (the server compares strings: it matches nothing). Another
        symbol is not an error."""
        try:
            parsed = json.loads(filters) if filters else None
        except ValueError:
            return True
        return any(parsed == {"symbol": symbol} for symbol in CHAINLINK_SYMBOLS)

    def _history_to(self, client: _Client, topic: str, symbol: str = DEFAULT_CHAINLINK) -> None:
        """The history snapshot of ``symbol`` on ``topic`` (the spot's under
        ``crypto_prices``)."""

        def send() -> None:
            if not self.deliverable(client) or not self.is_open(client):
                return
            with self._lock:
                points = list(self._series(topic, symbol))  # taken when sent: later ones too
            points = [(ts, self._on_wire(topic, ts, value)) for ts, value in points]
            if points:
                wire = SPOT_HISTORY_TOPIC if topic == SPOT_TOPIC else None
                snapshot = self.first_message(topic, points, wire_topic=wire, symbol=symbol)
                client.send(json.dumps(snapshot))

        if self.history_delay_s > 0:
            self.later(self.history_delay_s, send)
        else:
            send()

    @staticmethod
    def first_message(
        topic: str,
        points: list[tuple[int, Decimal]],
        wire_topic: str | None = None,
        *,
        symbol: str = DEFAULT_CHAINLINK,
    ) -> dict[str, Any]:
        """The history snapshot of ``symbol``: the recent points as ``payload.data``, under
        ``wire_topic`` (``crypto_prices`` for the spot, as the server sends it) or else
        ``topic``."""
        return {
            "topic": wire_topic or topic,
            "type": "subscribe",
            "timestamp": now_ms(),
            "payload": {
                "symbol": symbol,
                "data": [{"timestamp": ts, "value": float(v)} for ts, v in points],
            },
        }

    @staticmethod
    def update(
        topic: str,
        ts_ms: int,
        value: Decimal,
        *,
        plain_full_accuracy: bool = False,
        symbol: str = DEFAULT_CHAINLINK,
    ) -> dict[str, Any]:
        """An ``update`` message of ``symbol``; the TWAP topics add ``full_accuracy_value``
        (scaled by 1e18, or a plain decimal string with ``plain_full_accuracy``) and
        ``window_s``.

        ``value`` is rounded to cents there, so a reader that ignores the exact value is seen.
        """
        payload: dict[str, Any] = {"symbol": symbol, "timestamp": ts_ms, "value": float(value)}
        window_s = WINDOW_S_OF_TOPIC.get(topic)
        if window_s is not None:
            payload["value"] = float(round(value, 2))
            payload["full_accuracy_value"] = plain(value) if plain_full_accuracy else scaled(value)
            payload["window_s"] = window_s
        return {"topic": topic, "type": "update", "timestamp": now_ms(), "payload": payload}

    def seed(
        self,
        topic: str,
        points: list[tuple[int, Decimal | str | float]],
        symbol: str = DEFAULT_CHAINLINK,
    ) -> None:
        """Points the history snapshot of ``symbol`` on ``topic`` will carry (kept in time
        order)."""
        for ts, value in points:
            self._record(topic, ts, Decimal(str(value)), symbol)

    def _record(
        self, topic: str, ts_ms: int, value: Decimal, symbol: str = DEFAULT_CHAINLINK
    ) -> None:
        with self._lock:
            series = self._series(topic, symbol)
            # Time order whatever the order of seeding and pushing: the snapshot is a series.
            bisect.insort_right(series, (ts_ms, value), key=lambda point: point[0])
            del series[: max(0, len(series) - self.history_limit)]

    def push(
        self,
        topic: str,
        ts_ms: int,
        value: Decimal | str | float,
        symbol: str = DEFAULT_CHAINLINK,
    ) -> None:
        """Record a point of ``symbol`` and send it as an ``update`` to the connections on
        ``topic`` for ``symbol`` (only recorded while ``paused`` or the symbol is in
        ``paused_symbols``)."""
        amount = Decimal(str(value))
        self._record(topic, ts_ms, amount, symbol)
        if self._held(symbol):
            return
        sent = self._on_wire(topic, ts_ms, amount)
        message = self.update(
            topic, ts_ms, sent, plain_full_accuracy=self.plain_full_accuracy, symbol=symbol
        )
        self._deliver(topic, symbol, json.dumps(message))

    def _on_wire(self, topic: str, ts_ms: int, value: Decimal) -> Decimal:
        """What the wire carries for a recorded point: ``twap_glitch`` of it for a TWAP point
        inside ``twap_glitch_span``, else the point itself."""
        glitch, span = self.twap_glitch, self.twap_glitch_span
        if glitch is None or topic not in WINDOW_S_OF_TOPIC:
            return value
        if span is not None and not span[0] <= ts_ms <= span[1]:
            return value
        return glitch(value)

    def send_error(self, status: int, message: str) -> None:
        """An error frame ``{statusCode, body: {message}}`` to every connection."""
        for client in self.clients:
            self._error(client, status, message)

    # -- faults of value ----------------------------------------------------------------
    def send_point(
        self, topic: str, ts_ms: int, value: Any, symbol: str = DEFAULT_CHAINLINK
    ) -> None:
        """One ``update`` of ``symbol`` on ``topic`` stamped ``ts_ms``, carrying ``value`` as
        it is given (a Decimal as ``push`` writes it; anything else raw: ``"1.5"``, ``2``,
        ``"1e308"``), to the connections on ``topic`` for ``symbol`` (none while it is
        held: ``paused``, ``paused_symbols``). Never recorded: a glitch on the wire, not in
        the upstream's history."""
        self.history_of(symbol)  # an unknown symbol is a mistake in the test
        if isinstance(value, Decimal):
            message = self.update(
                topic, ts_ms, value, plain_full_accuracy=self.plain_full_accuracy, symbol=symbol
            )
        else:
            payload = {"symbol": symbol, "timestamp": ts_ms, "value": value}
            message = {"topic": topic, "type": "update", "timestamp": now_ms(), "payload": payload}
        if self._held(symbol):
            return
        self._deliver(topic, symbol, json.dumps(message))

    def send_exchange(self, ts_ms: int, spot: Decimal, symbol: str = DEFAULT_CHAINLINK) -> None:
        """The exchange price of ``symbol``'s coin at ``ts_ms``, as RTDS relays Binance's:
        ``spot`` times ``exchange_basis``, rounded to the pair's tick (a cent; XRP's 0.0001),
        under ``crypto_prices`` with the pair as ``payload.symbol``. Not recorded."""
        pair = PAIR_OF_CHAINLINK[symbol]
        tick = Decimal("0.0001") if spot < 10 else Decimal("0.01")
        value = (spot * self.exchange_basis).quantize(tick)
        payload = {"symbol": pair, "timestamp": ts_ms, "value": float(value)}
        message = {
            "topic": EXCHANGE_TOPIC,
            "type": "update",
            "timestamp": now_ms(),
            "payload": payload,
        }
        if not self._held(symbol):
            self._deliver(EXCHANGE_TOPIC, symbol, json.dumps(message))

    def send_history(
        self,
        points: Sequence[tuple[int, Decimal]],
        topic: str = SPOT_TOPIC,
        symbol: str = DEFAULT_CHAINLINK,
    ) -> None:
        """A history snapshot of ``points`` (any number: megabytes of them) to the connections
        on ``topic`` for ``symbol``, as the server sends one (the spot's under
        ``crypto_prices``). Not recorded."""
        self.history_of(symbol)  # an unknown symbol is a mistake in the test
        wire = SPOT_HISTORY_TOPIC if topic == SPOT_TOPIC else None
        snapshot = self.first_message(topic, list(points), wire_topic=wire, symbol=symbol)
        self._deliver(topic, symbol, json.dumps(snapshot))

    def flood_errors(self, per_s: float) -> None:
        """Send about ``per_s`` error frames a second to every connection, each with a
        message of its own (and three status codes in turn); 0 stops the flood."""
        self._flood_per_s = per_s
        with self._lock:
            if self._flooding or per_s <= 0:
                return
            self._flooding = True
        self._spawn(self._flood)

    def _flood(self) -> None:
        count = 0
        step_s = 0.01
        while not self._stopping.wait(step_s):
            rate = self._flood_per_s
            for _ in range(max(0, round(rate * step_s))):
                count += 1
                status = (400, 429, 500)[count % 3]
                for client in self.clients:
                    self._error(client, status, f"upstream trouble #{count} (request {count:x})")

    def drop_after(self, healthy_s: float, times: int) -> None:
        """In a thread, ``times`` times over: once a connection has been up ``healthy_s``,
        drop every connection (its time goes to ``drops``)."""

        def run() -> None:
            dropped_at = -math.inf
            for _ in range(times):
                while not self._stopping.is_set():
                    # Only connections opened since the last drop (a dropped one may linger
                    # in the list for a moment).
                    opened = [c.opened_at for c in self.clients if c.opened_at > dropped_at]
                    if opened and time.monotonic() - min(opened) >= healthy_s:
                        break
                    self._stopping.wait(0.02)
                if self._stopping.is_set():
                    return
                dropped_at = time.monotonic()
                self.drops.append(dropped_at)
                self.drop()

        self._spawn(run)

    def hole(
        self,
        start_ms: int,
        end_ms: int,
        topic: str = SPOT_TOPIC,
        symbol: str = DEFAULT_CHAINLINK,
    ) -> None:
        """Remove the recorded points of ``symbol`` stamped within [start_ms, end_ms] from the
        history (a hole no history snapshot can fill)."""
        with self._lock:
            series = self.history_of(symbol)
            series[topic] = [p for p in series[topic] if not start_ms <= p[0] <= end_ms]

    def value_at(
        self, ts_ms: int, topic: str = SPOT_TOPIC, symbol: str = DEFAULT_CHAINLINK
    ) -> Decimal | None:
        """The recorded value of ``symbol`` in force at ``ts_ms``: the last point stamped at
        or before it."""
        with self._lock:
            series = self._series(topic, symbol)
            i = bisect.bisect_right(series, ts_ms, key=lambda point: point[0])
            return series[i - 1][1] if i else None

    def _error(self, client: _Client, status: int, message: str) -> None:
        frame = {"statusCode": status, "body": {"message": message}}
        if self.deliverable(client):
            self.errors_sent.append(frame)
            client.send(json.dumps(frame))

    def play(
        self,
        path: SeededPath,
        until_s: int,
        lookbacks: Sequence[int] = (60, 30),
        symbol: str = DEFAULT_CHAINLINK,
    ) -> None:
        """Push ``path`` as ``symbol``'s updates, in time order, up to and including second
        ``until_s``: per second the spot, then the TWAP of each lookback (60 and 30 have
        topics) once the path has that many seconds. Continues where the last ``play`` or
        ``seed_path`` of this path for this symbol stopped, so a test on a virtual clock can
        step through time."""
        topics = [(lookback, twap_topic(lookback)) for lookback in lookbacks]
        cursor = self._cursor(path, symbol)
        last = min(until_s, path.end_s)  # past the path's end there is nothing to play
        for t in range(cursor, last + 1):
            self.push(SPOT_TOPIC, t * 1000, path.value(t), symbol)
            for lookback, topic in topics:
                if path.has_twap(t, lookback):
                    self.push(topic, t * 1000, path.twap(t, lookback), symbol)
        self._cursors[(symbol, id(path))] = (path, max(cursor, last + 1))

    def seed_path(
        self,
        path: SeededPath,
        a: int,
        b: int,
        lookbacks: Sequence[int] = (60, 30),
        symbol: str = DEFAULT_CHAINLINK,
    ) -> None:
        """Record the spot and TWAP points of seconds [a, b] into ``symbol``'s history without
        sending them; a later ``play`` of this path for this symbol starts after ``b``."""
        topics = [(lookback, twap_topic(lookback)) for lookback in lookbacks]
        for ts, value in path.spot_points(a, b):
            self._record(SPOT_TOPIC, ts, value, symbol)
        for lookback, topic in topics:
            for ts, value in path.twap_points(a, b, lookback):
                self._record(topic, ts, value, symbol)
        self._cursors[(symbol, id(path))] = (path, max(self._cursor(path, symbol), b + 1))

    def _cursor(self, path: SeededPath, symbol: str = DEFAULT_CHAINLINK) -> int:
        """The next second of ``path`` to play for ``symbol``."""
        return self._cursors.get((symbol, id(path)), (path, path.start_s))[1]

    def live(
        self,
        spot: Callable[[float], Decimal] | None = None,
        twap: Callable[[float], Decimal] | None = None,
        period_s: float = 0.2,
        history_s: int = 600,
        *,
        twap30: Callable[[float], Decimal] | None = None,
        seed: int | None = None,
        sigma: float = 1.2e-4,
        s0: float | None = None,
        symbol: str = DEFAULT_CHAINLINK,
    ) -> BrownianPath:
        """Real-time prices of ``symbol``: ``history_s`` of 1-second history, then a point on
        the spot and both TWAP topics every ``period_s``. By default the spot is a Brownian
        path (``seed``, ``sigma`` per sqrt-second, around ``s0``) and the TWAPs are the true
        means of its last 60 / 30 seconds. Returns that path (for exact answers).

        btc/usd's defaults are seed 0 around 100,000; another stream's are its rank in
        ``MARKETS`` (1, 2, 3: paths of their own) around its market's ``start_price``. Call
        it once per symbol to run several streams."""
        rank = CHAINLINK_SYMBOLS.index(symbol) if symbol in CHAINLINK_SYMBOLS else -1
        if rank < 0:
            raise ValueError(f"unknown Chainlink symbol {symbol!r}")
        market = list(MARKETS.values())[rank]
        if seed is None:
            seed = rank  # 0 for btc/usd
        if s0 is None:
            s0 = 100_000.0 if symbol == DEFAULT_CHAINLINK else market.start_price
        path = BrownianPath(seed, sigma, s0, *live_span(history_s))
        self.live_on(path, spot, twap, period_s, history_s, twap30=twap30, symbol=symbol)
        return path

    def live_on(
        self,
        path: SeededPath,
        spot: Callable[[float], Decimal] | None = None,
        twap: Callable[[float], Decimal] | None = None,
        period_s: float = 0.2,
        history_s: int = 600,
        *,
        twap30: Callable[[float], Decimal] | None = None,
        symbol: str = DEFAULT_CHAINLINK,
    ) -> None:
        """``live`` on a path of the caller's (any ``SeededPath``, e.g. a settlement-feed
        stand-in) that covers ``live_span(history_s)``: its values only, every ``period_s``
        (the path's arrival lags and gaps are the tapes' business)."""
        now = int(time.time())
        series: list[tuple[str, Callable[[float], Decimal]]] = [
            (SPOT_TOPIC, spot or (lambda t: path.value(int(t)))),
            (TWAP_TOPIC, twap or (lambda t: path.twap(int(t), 60))),
            (TWAP30_TOPIC, twap30 or (lambda t: path.twap(int(t), 30))),
        ]
        for t in range(now - history_s, now + 1):
            for topic, price in series:
                self._record(topic, t * 1000, price(t), symbol)

        def tick() -> None:
            t = time.time()
            ts = int(t * 1000)
            for topic, price in series:
                glitch = self.spot_glitch if topic == SPOT_TOPIC else None
                lag_s = self.spot_lag_s if topic == SPOT_TOPIC else 0.0
                if lag_s > 0:  # the wire carries an earlier second's point; the history, now's
                    self._record(topic, ts, price(t), symbol)
                    self.send_point(topic, int((t - lag_s) * 1000), price(t - lag_s), symbol)
                elif glitch is None:
                    self.push(topic, ts, price(t), symbol)
                else:  # the wire says what the glitch makes of it; the history, the truth
                    value = price(t)
                    self._record(topic, ts, value, symbol)
                    self.send_point(topic, ts, glitch(value), symbol)
            if not self.exchange_paused:
                self.send_exchange(ts, series[0][1](t), symbol)

        self.every(period_s, tick)


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
