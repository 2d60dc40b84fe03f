"""The protocol of the RTDS stand-in (``harness.fake_polymarket.rtds``): what it takes as
subscriptions, what it records, what it sends.

- Topics ``crypto_prices_chainlink`` (spot), ``crypto_prices_twap_sixty`` and
  ``crypto_prices_twap_thirty``; any other topic answers ``{"statusCode": 400, "body":
  {"message": "Invalid topic: <topic>"}}``.
- ``filters`` must be exactly the compact string ``{"symbol":"btc/usd"}`` (or another
  market's stream: ``eth/usd``, ``sol/usd``, ``xrp/usd``): the real filter is a string
  match, so ``{"symbol": "btc/usd"}`` (with a space) matches nothing
  (``bad_subscriptions``). A connection gets the symbols it subscribed, each in messages
  whose ``payload.symbol`` is its own; the methods take ``symbol`` (btc/usd).
- After subscribing to the spot topic, the symbol's history snapshot arrives under the topic
  ``crypto_prices`` (``type: "subscribe"``, ``payload.data``), ``history_delay_s`` late if
  set (live updates may come first), or held from ``hold_history()`` until
  ``release_history()``. The TWAP topics have none unless ``twap_history``.
- ``update`` messages; the TWAP topics add ``full_accuracy_value`` (scaled by 1e18, or a
  plain decimal string with ``plain_full_accuracy``, the announced successor) and
  ``window_s``. ``paused = True`` keeps recording pushes into the history without
  delivering them (a gap to repair from the snapshot); ``send_error`` sends an error frame.

The messages' shapes and what a subscription entry asks for are ``rtds_messages``'s.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from harness.fake_polymarket.rtds_messages import (
    first_message,
    misfiltered,
    served,
    symbol_of,
    update,
)
from harness.fake_polymarket.wire import (
    CHAINLINK_OF_PAIR,
    CHAINLINK_SYMBOLS,
    DEFAULT_CHAINLINK,
    EXCHANGE_BASIS,
    EXCHANGE_TOPIC,
    RTDS_TOPICS,
    SPOT_HISTORY_TOPIC,
    SPOT_TOPIC,
    WINDOW_S_OF_TOPIC,
)
from harness.fake_polymarket.ws_server import _Client, _WsFake
from harness.paths import SeededPath


class _RtdsSocket(_WsFake):
    """What ``FakeRtds`` is built on: the subscriptions, the recorded series per (symbol,
    topic), the history snapshots and the ``update`` messages. All of the stand-in's state
    is set here, its fault switches included; the faults' own methods and the paths it
    plays are ``FakeRtds``'s (``harness.fake_polymarket.rtds``)."""

    path = ""
    # The message shapes and the subscription rules, kept reachable where tests and tapes
    # have always found them (``FakeRtds.update``, ``FakeRtds.first_message``).
    first_message = staticmethod(first_message)
    update = staticmethod(update)
    served = staticmethod(served)
    symbol_of = staticmethod(symbol_of)

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
        self.twap_shift_s = 0  # live(): a report at t averages up to t - shift (the real: 3)
        self.history_delay_s = 0.0  # > 0: the snapshot comes that long after the subscription
        self._held_history: list[Callable[[], None]] | None = None  # held snapshots, when held
        self.plain_full_accuracy = False  # the successor format: a plain decimal string
        self.paused = False  # pushes go into the history but are not delivered (a gap)
        self.paused_topics: set[str] = set()  # these topics' pushes likewise (a silent topic)
        # A fault: live() sends what this returns instead of the true spot (kept in history).
        self.spot_glitch: Callable[[Decimal], Any] | None = None
        # A fault: live() sends each spot point this many seconds late (history: on time).
        self.spot_lag_s = 0.0
        # The exchange price live() sends beside the spot (``EXCHANGE_TOPIC``): the true spot
        # times ``exchange_basis``, rounded to the pair's tick; ``exchange_paused`` holds it.
        self.exchange_basis = EXCHANGE_BASIS
        self.exchange_paused = False
        # What the exchange price becomes on the wire (a frozen value, another coin's: a lying
        # witness); each live pair's true one at t (the fake Binance's candles, binance.py).
        self.exchange_glitch: Callable[[Decimal], Decimal] | None = None
        self.exchange_prices: dict[str, Callable[[float], Decimal]] = {}
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
        wrong_filter = False
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
                wrong_filter |= misfiltered(sub["filters"])
        if wrong_filter:
            self.bad_subscriptions.append(message)
        for topic in invalid:
            self._error(client, 400, f"Invalid topic: {topic}")
        client.streams |= set(streams)
        for topic, symbol in streams:
            if topic == SPOT_TOPIC or (self.twap_history and topic in RTDS_TOPICS):
                self._history_to(client, topic, symbol)

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
                snapshot = self.first_message(
                    topic, points, wire_topic=wire, symbol=symbol, sent_ms=self.now_ms()
                )
                client.send(json.dumps(snapshot))

        with self._lock:
            if self._held_history is not None:
                self._held_history.append(send)
                return
        if self.history_delay_s > 0:
            self.later(self.history_delay_s, send)
        else:
            send()

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
        ``topic`` for ``symbol`` (only recorded while ``paused``, the symbol is in
        ``paused_symbols`` or the topic in ``paused_topics``)."""
        amount = Decimal(str(value))
        self._record(topic, ts_ms, amount, symbol)
        if self._held(symbol) or topic in self.paused_topics:
            return
        sent = self._on_wire(topic, ts_ms, amount)
        message = self.update(
            topic,
            ts_ms,
            sent,
            plain_full_accuracy=self.plain_full_accuracy,
            symbol=symbol,
            sent_ms=self.now_ms(),
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

    def _error(self, client: _Client, status: int, message: str) -> None:
        frame = {"statusCode": status, "body": {"message": message}}
        if self.deliverable(client):
            self.errors_sent.append(frame)
            client.send(json.dumps(frame))
