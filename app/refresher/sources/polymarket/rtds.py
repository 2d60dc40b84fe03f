"""The real-time data socket: a coin's Chainlink spot and its 60- and 30-second TWAP reports.

The spot topic (``crypto_prices_chainlink``) is the model's price and its volatility; a TWAP
topic only gives a TWAP market its price to beat. Updates carry ``payload: {symbol,
timestamp (ms), value}``; the TWAP topics add ``full_accuracy_value`` (a decimal string scaled
by 1e18 today, announced to become a plain decimal: it is cross-checked against ``value``).
After subscribing, a history snapshot arrives (``type: "subscribe"``, ``payload.data:
[{timestamp, value}, ...]``); the spot's comes under the topic ``crypto_prices``, possibly
after live points. Every point is merged into its series in time order, so a back-fill after
a reconnect repairs the history (and the latch at T0). Error frames
(``{statusCode, body: {message}}``) are counted and logged at most once per kind a minute.

Nothing is believed unheard (docs/reliability.md): a point stamped ahead of our clock by more
than ``MAX_SKEW_MS`` is dropped, and a value is judged against the believed point nearest in
time (``PriceSeries.offer``): a move larger than real markets make (``JUMP_BASE`` plus
``JUMP_PER_ROOT_S`` per square root of the seconds between them) is held as suspect, so a
stray value never becomes the price, the price to beat or the volatility. A suspect run that
stays self-consistent for ``RELEARN_S`` is believed (the old level was the wrong one, or the
world moved; the old points stay in the history); a
TWAP series with nothing believed yet is judged by the spot, and a spot series with nothing
believed yet waits for ``CONFIRM_POINTS`` points that agree.
"""

from __future__ import annotations

import bisect
import collections
import json
import math
import threading
import time
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any

from app.markets import DEFAULT_SYMBOLS, MARKETS, Market
from app.refresher import clocks, volatility
from app.refresher.sources.polymarket.feed import Feed, each
from app.refresher.sources.polymarket.suspects import Suspects
from app.refresher.sources.polymarket.witness import (
    MAX_PENDING,
    ExchangeWitness,
    TwapWitness,
    Verdict,
)

SPOT_KEY = "spot"
# Series keys by TWAP lookback (seconds): the markets say which lookback settles them.
TWAP_KEYS = {60: "twap60", 30: "twap30"}
TOPICS = {
    SPOT_KEY: "crypto_prices_chainlink",
    "twap60": "crypto_prices_twap_sixty",
    "twap30": "crypto_prices_twap_thirty",
}
SPOT_HISTORY_TOPIC = "crypto_prices"  # where the spot's history snapshot has been seen
# The exchanges' prices (Binance's, ``payload.symbol`` a pair: ``btcusdt``): the spot's
# witness. The same name as the spot's history, told apart by the symbol's form.
EXCHANGE_TOPIC = "crypto_prices"
SPOT_HISTORY_S = 4 * 3600  # hours of spot: the volatility's horizon scale is measured on it
TWAP_HISTORY_S = 1800
SCALE_EVERY_S = 60.0  # the scale is about hours of data: recomputing it once a minute is plenty
# The settlement factors (volatility.settlement_factors) move over hours and cost as much as
# the rest of the history: measured again every 5 minutes (at once when a snapshot arrives
# after a start whose history was too short for them).
FACTORS_EVERY_S = 300.0
EXACT_TOLERANCE = 0.01  # full_accuracy_value may differ from value by rounding, not by 1 %
SCALE = Decimal(10**18)
# A series never holds more points than this (4 h of the spot at 1 Hz is 14,400): a flood of
# points (a huge history frame) drops the oldest, so memory is bounded by points, not time.
MAX_POINTS = 20_000
# A point stamped further ahead of our clock is not believed: real Chainlink points arrive
# 1.3-1.6 s AFTER their stamp, never before; 2 s allows for our clock's own error.
MAX_SKEW_MS = 2_000
# A price's age counts from its own stamp plus the feed's normal arrival lag, measured live
# (the median of the last LAG_SAMPLES newest points' lags) but never more than this: real
# Chainlink points arrive 1.3-1.6 s after their stamp, p95 about 2 s. A feed later than this
# is as old as its information: a steady 9 s lag makes the row stale at the stale threshold.
MAX_NORMAL_LAG_MS = 2_000
LAG_SAMPLES = 31
# The largest move believed between two points dt seconds apart, in log terms:
# JUMP_BASE + JUMP_PER_ROOT_S * sqrt(dt). Set from BTC's real 1 s data (docs/reliability.md):
# about 3x its largest real second (34 bp), far below a stray price.
JUMP_BASE = 0.01
JUMP_PER_ROOT_S = 0.002
CONFIRM_POINTS = 2  # a series with nothing believed yet: this many points that agree
# Without a witness only (a TWAP series; a spot whose exchange price is silent, or a tape
# recorded without it): a self-consistent suspect run this long (and RELEARN_POINTS) is
# believed. With a witness, persistence proves nothing: the witness decides.
RELEARN_S = 30.0
RELEARN_POINTS = 10
WINDOW_MS = 300_000  # a window: the unit of ``Market.window_move``
MEAN_GAP_MS = 3_000  # a mean the TWAP witness compares covers its span with no longer gap


def _number(raw: Any) -> float | None:
    if isinstance(raw, bool) or not isinstance(raw, int | float | str):
        return None
    try:
        value = float(raw)
    except ValueError:
        return None
    return value if math.isfinite(value) and value > 0 else None


def point_value(point: dict[str, Any]) -> float | None:
    """The price of one point: ``full_accuracy_value`` when it agrees with ``value``
    (read as scaled by 1e18 or as a plain decimal, whichever agrees), else ``value``;
    None when they disagree by more than 1 % (a garbage exact value is never a price)."""
    value = _number(point.get("value"))
    exact = point.get("full_accuracy_value")
    if exact is None:
        return value
    if value is None or not isinstance(exact, str):
        return None
    try:
        raw = Decimal(exact)
    except (InvalidOperation, ValueError):
        return None
    if not raw.is_finite() or raw <= 0:
        return None
    for candidate in (float(raw / SCALE), float(raw)):
        if abs(candidate - value) <= EXACT_TOLERANCE * value:
            return candidate
    return None


def allowed_move(dt_ms: int, base: float = JUMP_BASE) -> float:
    """The largest |log return| believed between two points ``dt_ms`` apart (``base``: the
    market's own, ``Market.jump_base``)."""
    return base + JUMP_PER_ROOT_S * math.sqrt(max(1.0, abs(dt_ms) / 1000))


def _agrees(reference: tuple[int, float], point: tuple[int, float], base: float) -> bool:
    return abs(math.log(point[1] / reference[1])) <= allowed_move(point[0] - reference[0], base)


class PriceSeries:
    """Recent points of one topic, in time order: latest, history, means, volatility."""

    def __init__(
        self,
        history_s: int = TWAP_HISTORY_S,
        clock: Callable[[], float] = time.time,
        anchor: PriceSeries | None = None,
        jump_base: float = JUMP_BASE,
        witness: ExchangeWitness | None = None,
        window_move: float | None = None,
        twaps: tuple[TwapWitness, ...] = (),
    ) -> None:
        self._jump_base = jump_base
        # The spot's: the exchange price that must agree with each point (``witness.py``),
        # the TWAP reports a point waits for while the exchange has no verdict (so no row
        # shows it before they can contradict its mean), and the largest move believed
        # within a window, whatever agrees with it.
        self._witness = witness
        self._twaps = twaps
        self._window_move = window_move
        self._pending: list[tuple[int, float]] = []  # waiting for the witness's verdict
        # The newest point the witness contradicted (stamp, why), until a believed point at
        # or after its stamp: the row is stale meanwhile (its price disagrees).
        self._doubt: tuple[int, str] | None = None
        # The stamp of the first believed point carrying the newest value, and whether the
        # witness moved since: then the value is frozen, as old as that first point.
        self._same_since = 0
        self._frozen = False
        self._times: list[int] = []
        self._values: list[float] = []
        self._history_ms = history_s * 1000
        self._clock = clock  # the source's wall clock (tape time in a replay)
        # Another series of the same asset (a TWAP's: the spot) that judges this one's points
        # while it has nothing believed of its own.
        self._anchor = anchor
        # When (on ``clock``) the NEWEST point was received (-inf: none yet), and how late
        # the recent newest points arrived after their stamps (ms): the feed's normal lag.
        self.received_at = -math.inf
        self._lags_ms: collections.deque[int] = collections.deque(maxlen=LAG_SAMPLES)
        # Points not believed yet: a suspect run, or the first points of an empty series.
        self._run: list[tuple[int, float]] = []
        self._version = 0
        self._vol_version = -1
        self._vol: volatility.Volatility | None = None
        self._history = volatility.History()
        self._scale_at = -math.inf
        self._scale_points = 0  # how many points the scale was measured on
        self._factors_at = -math.inf
        # Spans the feed may have missed (a reconnect): [last point before, first after or
        # None]; a history snapshot that spans one repairs it.
        self._gaps: list[tuple[int, int | None]] = []
        self._lock = threading.Lock()

    def connection_lost(self) -> None:
        """The feed reconnected: points after the newest one may have been missed."""
        with self._lock:
            if self._times:
                self._gaps = [*self._gaps[-7:], (self._times[-1], None)]

    def merge(self, points: list[tuple[int, float]]) -> list[str]:
        """Merge a history snapshot, each point judged as by ``offer``; a gap it spans is
        repaired. Returns the suspect kinds of the points not believed."""
        verdicts = [self.offer(ts_ms, value) for ts_ms, value in sorted(points)]
        suspect = [kind for kind in verdicts if kind is not None]
        if points:
            first, last = min(t for t, _ in points), max(t for t, _ in points)
            with self._lock:
                self._gaps = [
                    (start, end)
                    for start, end in self._gaps
                    if not (first <= start and last >= (start if end is None else end))
                ]
        return suspect

    def has_gap(self, start_ms: int, end_ms: int) -> bool:
        """True when a span the feed may have missed meets (start, end)."""
        with self._lock:
            return any(
                start < end_ms and (end is None or end > start_ms) for start, end in self._gaps
            )

    @property
    def version(self) -> int:
        """Grows with every point taken in."""
        return self._version

    def offer(self, ts_ms: int, value: float) -> str | None:
        """Take a point if it is believable. Returns None when taken (or waiting: for the
        witness's verdict, or in a series with nothing believed yet for ``CONFIRM_POINTS``
        that agree), else the suspect kind: ``out_of_range`` (a level no window reaches),
        ``disagrees`` (the witness contradicts it) or ``jump`` (judged alone: too far from
        the believed point nearest in time, ``allowed_move``)."""
        if not self._reachable(ts_ms, value):
            return "out_of_range"
        verdict, why = self._verdict(ts_ms, value)
        if verdict is Verdict.WAIT:
            with self._lock:
                self._pending = [*self._pending[1 - MAX_PENDING :], (ts_ms, value)]
            return None
        if verdict is Verdict.DISAGREES:
            with self._lock:
                self._run = []  # never part of a run that persistence could make believed
                if self._doubt is None or ts_ms >= self._doubt[0]:
                    self._doubt = (ts_ms, why)
            return "disagrees"
        if verdict is Verdict.AGREES:
            with self._lock:
                self._run = []
                self._add(ts_ms, value)
                same_since, frozen = self._same_since, self._frozen
            believed = [(ts_ms, value)]
            suspect = None
            if not frozen and self._witness is not None and self._witness.moved_since(same_since):
                with self._lock:
                    self._frozen = self._same_since == same_since
        else:
            suspect, believed = self._offer_alone(ts_ms, value)
        if self._witness is not None:
            for point in believed:
                self._witness.learn(*point)
        return suspect

    def _verdict(self, ts_ms: int, value: float) -> tuple[Verdict, str]:
        """The exchange price's verdict; without one, WAIT while every TWAP topic that speaks
        has no report for the point's second yet (then NONE: judged alone)."""
        verdict, why = self._witness.judge(ts_ms, value) if self._witness else (Verdict.NONE, "")
        if verdict is Verdict.NONE:
            reports = [t.newest_ms() for t in self._twaps if t.judging]
            if reports and all(r is None or r < ts_ms for r in reports):
                return Verdict.WAIT, ""
        return verdict, why

    def settle(self) -> list[str]:
        """A witness has spoken for more seconds: judge the points waiting for one (those
        still ahead of it wait on). Returns the suspect kinds found."""
        with self._lock:
            waiting, self._pending = self._pending, []
        kinds = (self.offer(ts_ms, value) for ts_ms, value in waiting)
        return [kind for kind in kinds if kind is not None]

    def covered_mean(self, after_ms: int, until_ms: int) -> float | None:
        """The mean over the whole seconds of (after, until] of each second's price (its last
        believed point at or before ``until``, a second without one carrying the last
        before, as the settlement's own average does); None when a second has no point
        within ``MEAN_GAP_MS`` before it."""
        found = self.mean_and_carry(after_ms, until_ms)
        return None if found is None else found[0]

    def mean_and_carry(self, after_ms: int, until_ms: int) -> tuple[float, float] | None:
        """``covered_mean`` and how uncertain the carried seconds make it, in 1-second
        volatilities: ``sum sqrt(k) / N`` over the seconds carried from a point ``k`` seconds
        before them (0 when every second has its own point). A settlement feed leaves about
        2 % of its seconds without a point: the true mean differs from ours by about that."""
        first_s, last_s = after_ms // 1000 + 1, until_ms // 1000
        if last_s < first_s:
            return None
        with self._lock:
            i = bisect.bisect_left(self._times, first_s * 1000 - MEAN_GAP_MS)
            j = bisect.bisect_right(self._times, until_ms)
            points = list(zip(self._times[i:j], self._values[i:j], strict=True))
        by_second: dict[int, tuple[int, float]] = {}
        for ts_ms, value in points:  # in time order: the last of each second stays
            by_second[ts_ms // 1000] = (ts_ms, value)
        before = [p for p in points if p[0] < first_s * 1000]
        carried = before[-1] if before else None
        total = carry = 0.0
        for second in range(first_s, last_s + 1):
            carried = by_second.get(second, carried)
            if carried is None or second * 1000 - carried[0] > MEAN_GAP_MS:
                return None
            total += carried[1]
            carry += math.sqrt(second - carried[0] // 1000)
        count = last_s - first_s + 1
        return total / count, carry / count

    def doubt(self) -> str | None:
        """Why the newest point offered is not believed, when the witness contradicted it
        (None when a believed point has come since)."""
        with self._lock:
            return self._doubt[1] if self._doubt else None

    def _reachable(self, ts_ms: int, value: float) -> bool:
        """Within ``window_move`` (per square root of the windows between them, at least
        one) of the believed point nearest in time: a level no window reaches is never
        believed."""
        if self._window_move is None:
            return True
        with self._lock:
            nearest = self._nearest(ts_ms)
        if nearest is None:
            return True
        reference_ms, reference = nearest
        windows = max(1.0, abs(ts_ms - reference_ms) / WINDOW_MS)
        return abs(math.log(value / reference)) <= self._window_move * math.sqrt(windows)

    def _offer_alone(self, ts_ms: int, value: float) -> tuple[str | None, list[tuple[int, float]]]:
        """``offer`` without a witness: within ``allowed_move`` of the believed point nearest
        in time, else a suspect run believed after ``RELEARN_S`` (or, in a series with
        nothing believed yet, ``CONFIRM_POINTS`` that agree). Returns (the suspect kind or
        None, the points believed)."""
        point = (ts_ms, value)
        # The anchor (another series' lock, taken before ours: never nested) only matters
        # while this series has nothing believed of its own.
        anchored = None
        if self._anchor is not None and not self._times:
            anchored = self._anchor.nearest(ts_ms)
        with self._lock:
            reference = self._nearest(ts_ms) or anchored
            if reference is not None and _agrees(reference, point, self._jump_base):
                self._run = []  # a believed point ends a suspect run
                believed = [point]
            else:
                run = self._run
                joins = (
                    bool(run) and run[-1][0] != ts_ms and _agrees(run[-1], point, self._jump_base)
                )
                displaced = bool(run) and not joins
                self._run = run = [*run, point] if joins else [point]
                cold = reference is None and len(run) >= CONFIRM_POINTS
                relearn = len(run) >= RELEARN_POINTS and run[-1][0] - run[0][0] >= (
                    RELEARN_S * 1000
                )
                if not (cold or relearn):
                    return (None if reference is None and not displaced else "jump"), []
                believed, self._run = run, []
            for believed_point in believed:
                self._add(*believed_point)
        return None, believed

    def nearest(self, ts_ms: int) -> tuple[int, float] | None:
        """The believed point nearest in time to ``ts_ms``."""
        with self._lock:
            return self._nearest(ts_ms)

    def _nearest(self, ts_ms: int) -> tuple[int, float] | None:
        """The believed point nearest in time to ``ts_ms`` (the caller holds the lock)."""
        i = bisect.bisect_left(self._times, ts_ms)
        candidates = [j for j in (i - 1, i) if 0 <= j < len(self._times)]
        if not candidates:
            return None
        j = min(candidates, key=lambda k: abs(self._times[k] - ts_ms))
        return self._times[j], self._values[j]

    def add(self, ts_ms: int, value: float) -> None:
        """Merge a believed point in time order (a duplicate timestamp keeps the first value;
        past ``MAX_POINTS`` the oldest go)."""
        with self._lock:
            self._add(ts_ms, value)

    def _add(self, ts_ms: int, value: float) -> None:
        """``add`` (the caller holds the lock)."""
        # The first point after a reconnect closes its span.
        self._gaps = [
            (start, ts_ms if end is None and ts_ms > start else end) for start, end in self._gaps
        ]
        if self._doubt is not None and ts_ms >= self._doubt[0]:
            self._doubt = None  # a believed point as new as the contradicted one
        i = bisect.bisect_left(self._times, ts_ms)
        if i < len(self._times) and self._times[i] == ts_ms:
            return
        if self._times and ts_ms < self._times[-1] - self._history_ms:
            return  # older than the history kept
        newest = i == len(self._times)
        if newest and not (self._values and self._values[-1] == value):
            self._same_since, self._frozen = ts_ms, False  # a new value: not frozen
        self._times.insert(i, ts_ms)
        self._values.insert(i, value)
        if newest:
            self.received_at = self._clock()
            self._lags_ms.append(int(self.received_at * 1000) - ts_ms)
        self._version += 1
        cut = bisect.bisect_left(self._times, self._times[-1] - self._history_ms)
        cut = max(cut, len(self._times) - MAX_POINTS)
        if cut:
            del self._times[:cut], self._values[:cut]

    def information_ms(self) -> int | None:
        """When the newest point's information was true, for its age: its own stamp plus the
        feed's normal arrival lag (the median of the recent newest points' lags, at most
        ``MAX_NORMAL_LAG_MS``), never later than its receipt on our clock (a stamp from the
        future cannot keep a row fresh). None before the first point.

        A feed that stamps and sends its points 9 s late is 9 s old however freshly each point
        arrives: only the lag a healthy feed shows is forgiven. A value repeated while the
        witness moved is frozen: as old as the first point that carried it."""
        with self._lock:
            if not self._times:
                return None
            lags = sorted(self._lags_ms)
            normal = min(max(0, lags[len(lags) // 2]), MAX_NORMAL_LAG_MS) if lags else 0
            stamp = self._same_since if self._frozen else self._times[-1]
            return min(int(self.received_at * 1000), stamp + normal)

    def latest(self) -> tuple[int, float] | None:
        """The newest (ts_ms, value)."""
        with self._lock:
            return (self._times[-1], self._values[-1]) if self._times else None

    def at(self, ts_ms: int, tolerance_ms: int) -> float | None:
        """The value in force at ``ts_ms``: the last point at or before it, else the first after
        it, within ``tolerance_ms``."""
        with self._lock:
            i = bisect.bisect_right(self._times, ts_ms)
            if i and ts_ms - self._times[i - 1] <= tolerance_ms:
                return self._values[i - 1]
            if i < len(self._times) and self._times[i] - ts_ms <= tolerance_ms:
                return self._values[i]
            return None

    def around(self, ts_ms: int) -> tuple[tuple[int, float] | None, tuple[int, float] | None]:
        """(the last point at or before ``ts_ms``, the first point after it)."""
        with self._lock:
            i = bisect.bisect_right(self._times, ts_ms)
            before = (self._times[i - 1], self._values[i - 1]) if i else None
            after = (self._times[i], self._values[i]) if i < len(self._times) else None
            return before, after

    def covered(self, start_ms: int, end_ms: int, max_gap_ms: int) -> bool:
        """True when the points leave no gap longer than ``max_gap_ms`` from ``start_ms`` up to a
        point at or after ``end_ms`` (so no point in between can still be missing), and no
        reconnect left a span unrepaired there."""
        if self.has_gap(start_ms - max_gap_ms, end_ms):
            return False
        with self._lock:
            i = bisect.bisect_right(self._times, start_ms - max_gap_ms)
            if i == len(self._times) or self._times[i] > start_ms + max_gap_ms:
                return False
            previous = self._times[i]
            for t in self._times[i:]:
                if t - previous > max_gap_ms:
                    return False
                if t >= end_ms:
                    return True
                previous = t
            return False

    def mean(self, after_ms: int, until_ms: int) -> float | None:
        """The mean of the points with ``after_ms < ts <= until_ms`` (None when there are none)."""
        with self._lock:
            i = bisect.bisect_right(self._times, after_ms)
            j = bisect.bisect_right(self._times, until_ms)
            if j <= i:
                return None
            return math.fsum(self._values[i:j]) / (j - i)

    def volatility(self) -> volatility.Volatility | None:
        """The volatility estimate of this series (cached until a point arrives; what the
        whole history says (scale, jumps, inflation) is recomputed at most every
        ``SCALE_EVERY_S``, its settlement factors every ``FACTORS_EVERY_S``)."""
        with self._lock:
            if self._vol_version == self._version:
                return self._vol
            version = self._version
            # Once a minute, or at once when the history has grown a lot (a history
            # snapshot has just arrived).
            grown = len(self._times) > 2 * self._scale_points + 60
            recompute_scale = grown or clocks.monotonic() - self._scale_at >= SCALE_EVERY_S
            if recompute_scale:
                times, values = list(self._times), list(self._values)
            else:  # the last SIGMA_WINDOW_S seconds (and the point in force before them)
                newest = self._times[-1] if self._times else 0
                edge = newest - (volatility.SIGMA_WINDOW_S + 2) * 1000
                start = max(0, bisect.bisect_left(self._times, edge) - 1)
                times, values = self._times[start:], self._values[start:]
        if recompute_scale:
            now = clocks.monotonic()
            # A snapshot that has just arrived makes them worth measuring at once only if
            # the last ones rested on too short a history to be measured at all.
            short = self._history.history_s < volatility.FACTOR_HISTORY_S
            again = (grown and short) or now - self._factors_at >= FACTORS_EVERY_S
            kept = None if again else self._history.factors
            self._history = volatility.history(times, values, kept)
            self._scale_at, self._scale_points = now, len(times)
            if again:
                self._factors_at = now
        estimate = volatility.estimate(times, values, self._history)
        with self._lock:
            self._vol, self._vol_version = estimate, version
        return estimate


def _series_of(
    market: Market,
    clock: Callable[[], float],
    witness: ExchangeWitness,
    twaps: tuple[TwapWitness, ...],
) -> dict[str, PriceSeries]:
    """A market's spot (witnessed by its exchange price and its TWAP reports) and TWAP
    series, judged by its own jump bound and window move."""
    base, move = market.jump_base, market.window_move
    spot = PriceSeries(
        SPOT_HISTORY_S, clock, jump_base=base, witness=witness, window_move=move, twaps=twaps
    )
    return {
        key: spot
        if key == SPOT_KEY
        else PriceSeries(TWAP_HISTORY_S, clock, anchor=spot, jump_base=base, window_move=move)
        for key in TOPICS
    }


class RtdsFeed(Feed):
    """Subscribes to the spot and both TWAP topics of each market's Chainlink stream, on one
    socket; each stream has series of its own."""

    name_for_logs = "rtds"
    tape_src = "rtds"
    ping_every_s = 5.0

    def __init__(
        self,
        url: str,
        stop: threading.Event,
        clock: Callable[[], float] = time.time,
        markets: tuple[Market, ...] = (MARKETS[DEFAULT_SYMBOLS],),
    ) -> None:
        super().__init__(url, stop)
        self._clock = clock  # our wall clock: a point stamped ahead of it is not believed
        self.suspects = Suspects(self.name_for_logs)
        self._markets = markets
        # Exchange pair (``btcusdt``) -> the witness of that coin's spot.
        self.witnesses = {
            market.exchange: ExchangeWitness(market.exchange, clock) for market in markets
        }
        # Chainlink symbol -> key -> series; a TWAP report is judged by its own coin's spot
        # until its series has points.
        # (Chainlink symbol, TWAP key) -> that topic's reports as the spot's second witness.
        self._twap_witnesses = {
            (market.chainlink, key): TwapWitness(TOPICS[key], lookback, clock)
            for market in markets
            for lookback, key in TWAP_KEYS.items()
        }
        self._by_symbol = {
            market.chainlink: _series_of(
                market,
                clock,
                self.witnesses[market.exchange],
                tuple(self._twap_witnesses[market.chainlink, key] for key in TWAP_KEYS.values()),
            )
            for market in markets
        }
        self._spot_of_pair = {
            market.exchange: self._by_symbol[market.chainlink][SPOT_KEY] for market in markets
        }
        # The first market's series (what a one-market caller, and the tests, read).
        self.series = self._by_symbol[markets[0].chainlink]
        self._key_of_topic = {topic: key for key, topic in TOPICS.items()}
        self._key_of_topic[SPOT_HISTORY_TOPIC] = SPOT_KEY
        self.on_change: Callable[[], None] | None = None  # a series took a new point

    def of(self, market: Market) -> dict[str, PriceSeries]:
        """``market``'s series, by key (``SPOT_KEY``, ``TWAP_KEYS``)."""
        return self._by_symbol[market.chainlink]

    def subscription(self) -> list[str] | None:
        """One subscribe message for every topic of every market, each with the documented
        compact filter (no spaces) naming its Chainlink symbol, and the exchange prices of
        every market's coin (``crypto_prices``: the filter is the pairs, comma-separated)."""
        subscriptions = [
            {
                "topic": topic,
                "type": "*",
                "filters": json.dumps({"symbol": market.chainlink}, separators=(",", ":")),
            }
            for market in self._markets
            for topic in TOPICS.values()
        ]
        pairs = ",".join(market.exchange for market in self._markets)
        subscriptions.append({"topic": EXCHANGE_TOPIC, "type": "update", "filters": pairs})
        return [json.dumps({"action": "subscribe", "subscriptions": subscriptions})]

    def handle(self, message: Any) -> None:
        """Merge the points of an update or a history snapshot; log an error frame once;
        ``on_change`` when any series took a new point."""
        before = self._versions()
        self._handle(message)
        if self.on_change is not None and before != self._versions():
            self.on_change()

    def _versions(self) -> list[int]:
        return [s.version for table in self._by_symbol.values() for s in table.values()]

    def _handle(self, message: Any) -> None:
        for item in each(message):
            if "statusCode" in item and "topic" not in item:
                self._error(item)
                continue
            key = self._key_of_topic.get(str(item.get("topic", "")))
            payload = item.get("payload")
            if key is None or not isinstance(payload, dict):
                continue
            symbol = payload.get("symbol")
            if isinstance(symbol, str) and symbol.lower() in self._spot_of_pair:
                self._witnessed(symbol.lower(), payload)
                continue
            # A payload without a symbol can only be the one market's.
            if isinstance(symbol, str):
                chainlink = symbol.lower()
            elif len(self._markets) == 1:
                chainlink = self._markets[0].chainlink
            else:
                continue
            table = self._by_symbol.get(chainlink)
            if table is None:
                continue
            series = table[key]
            data = payload.get("data")
            points = self._believable(each(data if isinstance(data, list) else [payload]))
            if isinstance(data, list):
                kinds = series.merge(points)
            else:
                verdicts = [(point, series.offer(*point)) for point in points]
                kinds = [kind for _, kind in verdicts if kind is not None]
                twap = self._twap_witnesses.get((chainlink, key))
                if twap is not None:
                    self._reported(twap, table[SPOT_KEY], [p for p, k in verdicts if k is None])
            self._note_kinds(kinds, series)

    def _reported(
        self, twap: TwapWitness, spot: PriceSeries, reports: list[tuple[int, float]]
    ) -> None:
        """TWAP reports its series took: the spot points that waited for them are judged, and
        the spot's second witness learns from them."""
        for report in reports:
            twap.report(*report)
        self._note_kinds(spot.settle(), spot)
        newest = spot.latest()
        if newest is not None:
            twap.learn(spot.mean_and_carry, newest[0])

    def _witnessed(self, pair: str, payload: dict[str, Any]) -> None:
        """Exchange prices of ``pair`` (an update, or a history's ``data``): the witness takes
        them, and the spot points that waited for them are judged."""
        data = payload.get("data")
        witness = self.witnesses[pair]
        for ts_ms, value in self._believable(each(data if isinstance(data, list) else [payload])):
            witness.add(ts_ms, value)
        spot = self._spot_of_pair[pair]
        self._note_kinds(spot.settle(), spot)

    def twap_doubt(self, market: Market) -> str | None:
        """Why ``market``'s spot is not believed by its TWAP reports (the newest whose span
        the spot covers, against its mean there), while its exchange price has no verdict;
        None when they agree, or cannot tell."""
        if self.witnesses[market.exchange].judging:
            return None  # the exchange price judges every point: a TWAP at odds is the suspect
        spot = self.of(market)[SPOT_KEY]
        newest = spot.latest()
        if newest is None:
            return None
        vol = spot.volatility()
        sigma = vol.sigma_1s if vol is not None else None
        for key in TWAP_KEYS.values():
            witness = self._twap_witnesses[market.chainlink, key]
            doubt = witness.doubt(spot.mean_and_carry, newest[0], sigma)
            if doubt is not None:
                return doubt
        return None

    def _note_kinds(self, kinds: list[str], series: PriceSeries) -> None:
        """Count the points not believed, by kind (one log line per kind a minute at most)."""
        if not kinds:
            return  # the usual case, on every message: nothing to build
        why = {
            "jump": "too far from the series' own",
            "out_of_range": "at a level no window reaches",
            "disagrees": f"contradicted by the exchange price: {series.doubt()}",
        }
        for kind in sorted(set(kinds)):
            self.suspects.note(kind, f"{kinds.count(kind)} point(s) {why.get(kind, kind)}")

    def _believable(self, items: list[dict[str, Any]]) -> list[tuple[int, float]]:
        """(ts_ms, value) of the points that are numbers and not stamped in the future."""
        horizon_ms = self._clock() * 1000 + MAX_SKEW_MS
        points, bad, future = [], 0, 0
        for point in items:
            ts, value = _number(point.get("timestamp")), point_value(point)
            if ts is None or value is None or isinstance(point.get("timestamp"), str):
                bad += 1
            elif ts > horizon_ms:
                future += 1
            else:
                points.append((int(ts), value))
        if bad:
            self.suspects.note("out_of_range", f"{bad} point(s) without a usable time or value")
        if future:
            self.suspects.note("future_stamp", f"{future} point(s) stamped ahead of our clock")
        return points

    def on_connect(self) -> None:
        """After a reconnect, what was missed is a gap until a history snapshot repairs it."""
        for table in self._by_symbol.values():
            for series in table.values():
                series.connection_lost()

    def _error(self, item: dict[str, Any]) -> None:
        body = item.get("body")
        message = body.get("message") if isinstance(body, dict) else body
        self.suspects.note("error_frame", f"{item.get('statusCode')}: {str(message)[:200]}")
