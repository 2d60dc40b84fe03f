"""The stand-in for RTDS, Polymarket's real-time data socket (``rtds``, WebSocket): the
Chainlink spot and TWAP prices of every market. Its protocol (topics, filters, history
snapshots, ``update`` messages) is ``harness.fake_polymarket.rtds_socket``; here, the prices
it plays and its faults of value.

``FakeRtds.play`` pushes a path (``BrownianPath``, or any ``harness.paths.SeededPath`` such
as the settlement-feed stand-in) up to a (virtual) time, ``seed_path`` puts it in the
history, ``live_on`` plays it on the real clock (``live``: on a Brownian path of its own).

Faults of value (off by default; off, they change nothing on the wire): ``send_point``
sends one update with any stamp and any raw value (a point from the future, ``"1.5"``,
``2``, ``"1e308"``), never recorded in the history; ``spot_glitch`` replaces the spot
``live()`` sends by what it returns (``+50 %``, junk) while the history keeps the true
value; ``flood_errors(per_s)`` sends that many error frames a second, each different (0
stops); ``send_history`` sends any history snapshot (several MB of points);
``drop_after(healthy_s, times)`` drops the connections each time one has been up
``healthy_s`` (``drops``, ``accepted_at`` give the reconnect delays); ``hole`` removes points
from the history, ``value_at`` reads the one in force at a time; ``twap_glitch`` (within
``twap_glitch_span``) replaces what both TWAP topics send, live and in their history
snapshots (``+1 %``), while the history keeps the truth.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

from app.markets import MARKETS
from harness.fake_polymarket.brownian import BrownianPath, live_span
from harness.fake_polymarket.rtds_faults import _RtdsConnectionFaults
from harness.fake_polymarket.wire import (
    CHAINLINK_SYMBOLS,
    DEFAULT_CHAINLINK,
    EXCHANGE_TOPIC,
    PAIR_OF_CHAINLINK,
    SPOT_HISTORY_TOPIC,
    SPOT_TOPIC,
    TWAP30_TOPIC,
    TWAP_TOPIC,
    twap_topic,
)
from harness.paths import SeededPath


class FakeRtds(_RtdsConnectionFaults):
    """The real-time data socket: ``crypto_prices_chainlink`` (spot) and the TWAP topics
    ``crypto_prices_twap_sixty`` / ``crypto_prices_twap_thirty``.

    Every market's Chainlink stream (``btc/usd``, ``eth/usd``, ``sol/usd``, ``xrp/usd``: the
    ``chainlink`` of ``app.markets.MARKETS``) is served on each topic: a subscription entry
    whose ``filters`` is that stream's compact string gets that stream only. The series are
    kept per (symbol, topic): ``history`` is btc/usd's, ``history_of(symbol)`` any one's.
    ``push``, ``seed``, ``play``, ``live``... take ``symbol`` (btc/usd by default) and their
    messages carry it as ``payload.symbol``. ``paused_symbols`` pauses those streams only.
    """

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
                topic,
                ts_ms,
                value,
                plain_full_accuracy=self.plain_full_accuracy,
                symbol=symbol,
                sent_ms=self.now_ms(),
            )
        else:
            payload = {"symbol": symbol, "timestamp": ts_ms, "value": value}
            message = {
                "topic": topic,
                "type": "update",
                "timestamp": self.now_ms(),
                "payload": payload,
            }
        if self._held(symbol):
            return
        self._deliver(topic, symbol, json.dumps(message))

    def send_exchange(self, ts_ms: int, spot: Decimal, symbol: str = DEFAULT_CHAINLINK) -> None:
        """The exchange price of ``symbol``'s coin at ``ts_ms``, as RTDS relays Binance's:
        ``spot`` times ``exchange_basis``, rounded to the pair's tick (a cent; XRP's 0.0001),
        then what ``exchange_glitch`` makes of it, under ``crypto_prices`` with the pair as
        ``payload.symbol``. Not recorded."""
        tick = Decimal("0.0001") if spot < 10 else Decimal("0.01")
        self.send_exchange_price(ts_ms, (spot * self.exchange_basis).quantize(tick), symbol)

    def send_exchange_price(
        self, ts_ms: int, value: Decimal, symbol: str = DEFAULT_CHAINLINK
    ) -> None:
        """The exchange price ``value`` of ``symbol``'s coin at ``ts_ms`` as it is given (an
        ``ExchangeView``'s), then what ``exchange_glitch`` makes of it, as ``send_exchange``."""
        pair = PAIR_OF_CHAINLINK[symbol]
        if self.exchange_glitch is not None:
            value = self.exchange_glitch(value)
        payload = {"symbol": pair, "timestamp": ts_ms, "value": float(value)}
        message = {
            "topic": EXCHANGE_TOPIC,
            "type": "update",
            "timestamp": self.now_ms(),
            "payload": payload,
        }
        if not self._held(symbol):
            self._deliver(EXCHANGE_TOPIC, symbol, json.dumps(message))

    def hold_history(self) -> None:
        """A fault of timing: hold every history snapshot from now until ``release_history()``."""
        with self._lock:
            if self._held_history is None:
                self._held_history = []

    def release_history(self) -> None:
        """Send the held history snapshots now (each with the points of now), and the later
        ones as before."""
        with self._lock:
            held, self._held_history = self._held_history or [], None
        for send in held:
            send()

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
        snapshot = self.first_message(
            topic, list(points), wire_topic=wire, symbol=symbol, sent_ms=self.now_ms()
        )
        self._deliver(topic, symbol, json.dumps(snapshot))

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
        path = BrownianPath(seed, sigma, s0, *live_span(history_s, self.clock()))
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
        exchange: Callable[[float], Decimal] | None = None,
    ) -> None:
        """``live`` on a path of the caller's (any ``SeededPath``, e.g. a settlement-feed
        stand-in) that covers ``live_span(history_s, now)``: its values only, every ``period_s``
        (the path's arrival lags and gaps are the tapes' business). ``exchange``: the
        exchange price at an instant (``harness.exchange_view.ExchangeView.value``); by
        default the spot times ``exchange_basis``."""
        now = int(self.clock())
        shift = self.twap_shift_s  # the real reports average up to 3 s before their stamp
        series: list[tuple[str, Callable[[float], Decimal]]] = [
            (SPOT_TOPIC, spot or (lambda t: path.value(int(t)))),
            (TWAP_TOPIC, twap or (lambda t: path.twap(int(t) - shift, 60))),
            (TWAP30_TOPIC, twap30 or (lambda t: path.twap(int(t) - shift, 30))),
        ]
        for t in range(now - history_s, now + 1):
            for topic, price in series:
                if topic == SPOT_TOPIC or path.has_twap(t - shift, 60):  # a shift starts later
                    self._record(topic, t * 1000, price(t), symbol)
        _register_exchange(self, symbol, path, exchange or _exchange_of(self, series[0][1]))

        def tick() -> None:
            t = self.clock()
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
            if exchange is not None and not self.exchange_paused:
                self.send_exchange_price(ts, exchange(t), symbol)
            elif not self.exchange_paused:
                self.send_exchange(ts, series[0][1](t), symbol)

        self.every(period_s, tick)


def _register_exchange(
    rtds: FakeRtds, symbol: str, path: SeededPath, price: Callable[[float], Decimal]
) -> None:
    """Keep ``symbol``'s exchange price at any instant for the fake Binance (``BTCUSDT``);
    before the path's first second, its first price (a fake started mid-hour still has a
    candle for that hour, its open the first price it knows)."""
    pair = PAIR_OF_CHAINLINK[symbol].upper()
    rtds.exchange_prices[pair] = lambda t: price(max(t, float(path.start_s)))


def _exchange_of(rtds: FakeRtds, spot: Callable[[float], Decimal]) -> Callable[[float], Decimal]:
    """The exchange price ``send_exchange`` sends for the spot ``spot`` (before glitches), at
    any instant: the spot times the fake's ``exchange_basis`` then, to the pair's tick."""

    def price(t: float) -> Decimal:
        value = spot(t)
        tick = Decimal("0.0001") if value < 10 else Decimal("0.01")
        return (value * rtds.exchange_basis).quantize(tick)

    return price
