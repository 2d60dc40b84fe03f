"""The spot's witness: the coin's exchange price, relayed by RTDS on the same socket.

RTDS carries Binance's price of each coin (topic ``crypto_prices``, symbol ``btcusdt``...)
beside the Chainlink stream that settles the market. It is never shown and never the
settlement value; it only says whether a spot point is believable. The two differ by a basis
(tens of dollars for BTC) that moves slowly, and by their own noise (Chainlink is an
aggregate, smoothed, and may trail the exchange by a second). Both are measured on the feed:

- the basis is the median of the log-ratios spot / exchange of the last ``BASIS_POINTS``
  believed spot points, each against the exchange price in force at the spot point's stamp;
- the bound is ``BOUND_SPREADS`` robust standard deviations of those ratios (1.4826 times
  their median absolute deviation), never under ``BOUND_FLOOR``.

A spot point whose ratio is further than the bound from the basis DISAGREES: it is not
believed, however long it persists (a frozen value while the exchange moves, a walk that
starts off the level, another coin's price, a drift). A value repeated while the exchange
price moved further than the bound is frozen (``moved_since``): it is as old as the first
point that carried it, even where the world comes back to it. A point stamped after the newest
exchange price WAITS until the exchange has spoken for its second. While the witness is
silent (nothing for ``SILENT_S``) or has not learned its basis yet (``MIN_POINTS`` ratios),
it has no verdict (NONE) and the spot is judged by its own plausibility alone
(``price_series.PriceSeries.offer``), as on a tape recorded without the exchange topic.
"""

from __future__ import annotations

import bisect
import collections
import enum
import logging
import math
import threading
import time
from collections.abc import Callable

from app.refresher.sources.polymarket.smoothing import HORIZON, SmoothingKernel

log = logging.getLogger(__name__)

BASIS_POINTS = 300  # the ratios the basis and the bound are measured on (5 min at 1 Hz)
MIN_POINTS = 20  # ratios learned before the witness judges
BOUND_SPREADS = 8.0
# 0.02 bp, 2 cents on BTC: a price rounded to the cent is no finer (BTC's 1 s moves are
# 0.35-0.67 bp); the bound measured on the real feed is many times this.
BOUND_FLOOR = 2e-6
MAX_BASIS = 0.02  # a ratio further from 1 than 2 % is no basis: never learned
HISTORY_MS = 120_000  # exchange prices kept (the pending spot points are seconds old)
SILENT_S = 5.0  # no exchange price received for this long: the witness is silent
MAX_PENDING = 64  # spot points waiting for the exchange (the oldest go first)
RELEARN_AFTER_S = 10  # seconds outvoted by the spot and the TWAP reports: the basis relearnt
EXACT_DEPTH = 8  # lookbacks chained back to a believed spot second, at most
# Until the spot's smoothing is learnt (``smoothing.SmoothingKernel``), the spot may sit at
# any exchange price of this long before its stamp: Chainlink's feed is a smoothed aggregate
# trailing the exchange (most of a move within 2 s, upstream.md); the board's fresh promise
# is a true price of the last 3 s anyway (STALE_THRESHOLD_MS).
TRAIL_MS = 2_500
PAIR_SLACK_MS = 250  # two believed spot points this much over a second apart still pair


class Verdict(enum.Enum):
    """What the witness says of one spot point."""

    AGREES = "agrees"
    DISAGREES = "disagrees"
    WAIT = "wait"  # the exchange has not spoken for the point's second yet
    # Outside the bound of the price at its stamp, within it of the exchange's path as the
    # spot smooths it (or, before that is learnt, of a price of the trail before): a spot
    # behind a fast move, or a lie inside the move (the reports then decide).
    TRAILS = "trails"
    NONE = "none"  # silent, or the basis not learned yet: no verdict


class WitnessRatios:
    """The last ``BASIS_POINTS`` log-ratios of a witness: their median (the basis) and the
    bound around it, once ``MIN_POINTS`` are known (not thread-safe: its owner locks)."""

    def __init__(self) -> None:
        self._ratios: collections.deque[float] = collections.deque(maxlen=BASIS_POINTS)
        self.basis: tuple[float, float] | None = None  # (basis, bound), None: not learned

    def learn(self, ratio: float) -> None:
        """One more ratio of a believed point (further than ``MAX_BASIS`` from 0: ignored)."""
        if abs(ratio) > MAX_BASIS:
            return
        self._ratios.append(ratio)
        if len(self._ratios) >= MIN_POINTS:
            self.basis = _basis_and_bound(sorted(self._ratios))

    def verdict(self, ratio: float, what: str, slack: float = 0.0) -> tuple[Verdict, str]:
        """AGREES when ``ratio`` is within the bound of the basis (plus ``slack``, what the
        compared value's own uncertainty allows), else DISAGREES and why (``what``: the
        witness, as the reason names it)."""
        assert self.basis is not None
        basis, bound = self.basis
        bound += slack
        off = ratio - basis
        if abs(off) <= bound:
            return Verdict.AGREES, ""
        return Verdict.DISAGREES, f"{off * 1e4:+.1f} bp from {what} (bound {bound * 1e4:.2f} bp)"


class Witness:
    """What both witnesses share: their recent prices in time order, when the newest was
    received, and the ratios their basis is measured on; thread-safe."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._times: list[int] = []
        self._values: list[float] = []
        self._ratios = WitnessRatios()
        self._received_at = -math.inf
        self._lock = threading.Lock()
        self._kept_ms = HISTORY_MS

    def _insert(self, ts_ms: int, value: float) -> None:
        """Keep a price of the last ``_kept_ms`` (the caller holds the lock)."""
        i = bisect.bisect_right(self._times, ts_ms)
        self._times.insert(i, ts_ms)
        self._values.insert(i, value)
        cut = bisect.bisect_left(self._times, self._times[-1] - self._kept_ms)
        if cut:
            del self._times[:cut], self._values[:cut]
        self._received_at = self._clock()

    @property
    def learned(self) -> bool:
        """Whether the basis is measured."""
        with self._lock:
            return self._ratios.basis is not None

    @property
    def judging(self) -> bool:
        """Whether it judges now: its basis learned and not silent."""
        with self._lock:
            return self._ratios.basis is not None and not self._silent()

    def newest_ms(self) -> int | None:
        """The stamp of the newest price (None before the first)."""
        with self._lock:
            return self._times[-1] if self._times else None

    def newest(self) -> tuple[int, float] | None:
        """The newest (stamp ms, price), None before the first."""
        with self._lock:
            return (self._times[-1], self._values[-1]) if self._times else None

    def between(self, a_ms: int, b_ms: int) -> list[tuple[int, float]]:
        """The (stamp ms, price) within [a_ms, b_ms] and the one in force at a_ms."""
        with self._lock:
            i = max(0, bisect.bisect_right(self._times, a_ms) - 1)
            j = bisect.bisect_right(self._times, b_ms)
            return list(zip(self._times[i:j], self._values[i:j], strict=True))

    def received_ms(self) -> int | None:
        """When the newest price was received (ms on our clock), None before the first."""
        with self._lock:
            return int(self._received_at * 1000) if self._times else None

    def in_force_at(self, ts_ms: int) -> tuple[int, float] | None:
        """The last (stamp ms, price) at or before ``ts_ms``, None when none is kept."""
        with self._lock:
            i = bisect.bisect_right(self._times, ts_ms)
            return (self._times[i - 1], self._values[i - 1]) if i else None

    def first_from(self, ts_ms: int, within_ms: int) -> tuple[int, float] | None:
        """The first (stamp ms, price) at or after ``ts_ms`` and at most ``within_ms`` after
        it, None when none was kept."""
        with self._lock:
            i = bisect.bisect_left(self._times, ts_ms)
            if i < len(self._times) and self._times[i] - ts_ms <= within_ms:
                return self._times[i], self._values[i]
            return None

    def _silent(self) -> bool:
        return self._clock() - self._received_at > SILENT_S


class ExchangeWitness(Witness):
    """One coin's exchange price and the basis of the spot to it; thread-safe."""

    def __init__(
        self,
        pair: str,
        clock: Callable[[], float] = time.time,
        smoothing: SmoothingKernel | None = None,
    ) -> None:
        super().__init__(clock)
        self.pair = pair  # ``btcusdt``: shown in the reasons
        self._outvoted: set[int] = set()  # seconds the TWAP reports sided with the spot
        self._smoothing = smoothing or SmoothingKernel()  # learnt from the believed points
        self._last_learnt: tuple[int, float] | None = None  # (stamp, log value) of a spot point

    def outvoted(self, ts_ms: int) -> None:
        """It contradicted a spot point the TWAP reports confirm: two sources against one.
        Over ``RELEARN_AFTER_S`` distinct seconds in a row its basis is forgotten and learnt
        again on the points believed from then on (a basis that moved for good: a de-peg)."""
        with self._lock:
            self._outvoted.add(ts_ms // 1000)
            if len(self._outvoted) >= RELEARN_AFTER_S:
                self._ratios = WitnessRatios()
                self._outvoted.clear()

    def add(self, ts_ms: int, value: float) -> None:
        """Take an exchange price (finite and positive, not stamped in the future: the feed
        checked both)."""
        with self._lock:
            self._insert(ts_ms, value)

    def contradicted_by(self, spot: tuple[int, float] | None) -> str | None:
        """Why the exchange price is not believed as a price of its own (the hourly row's):
        the Chainlink spot point ``spot`` lies outside the learnt basis of the exchange price
        in force at its stamp; None when they agree or nothing can tell (``judge`` is the
        spot's own check). Stricter: a spot that merely trails a move has not confirmed it
        (an honest move costs a second or two of staleness; a lie would hide in a trail)."""
        if spot is None:
            return None
        ts_ms, value = spot
        with self._lock:
            if self._silent() or self._ratios.basis is None:
                return None
            ratio = self._ratio(ts_ms, value)
            if ratio is None:
                return None
            verdict, why = self._ratios.verdict(ratio, f"the exchange price ({self.pair})")
        if verdict is not Verdict.DISAGREES:
            return None
        return f"the Chainlink spot {value:.8g} is {why}: not confirmed, or one of them is wrong"

    def _ratio(self, ts_ms: int, value: float) -> float | None:
        """log(value / the exchange price in force at ``ts_ms``) (the caller holds the lock)."""
        i = bisect.bisect_right(self._times, ts_ms)
        if not i:
            return None
        return math.log(value / self._values[i - 1])

    def judge(self, ts_ms: int, value: float) -> tuple[Verdict, str]:
        """The verdict on a spot point, and why (for a disagreement: how far, the bound)."""
        with self._lock:
            if self._silent() or self._ratios.basis is None or not self._times:
                return Verdict.NONE, ""
            if self._times[-1] < ts_ms:
                return Verdict.WAIT, ""
            ratio = self._ratio(ts_ms, value)
            if ratio is None:  # older than every exchange price kept: no verdict
                return Verdict.NONE, ""
            verdict, why = self._ratios.verdict(ratio, f"the exchange price ({self.pair})")
            if verdict is Verdict.DISAGREES and self._trailed(ts_ms, value):
                verdict, why = Verdict.TRAILS, ""
            if verdict is Verdict.AGREES:
                self._outvoted.clear()  # a run of outvoted seconds is over
        return verdict, (f"the spot {value:.8g} is {why}" if why else "")

    def _trailed(self, ts_ms: int, value: float) -> bool:
        """Whether ``value`` is within the bound of the exchange's path smoothed as the spot
        smooths it, or before that is learnt, of an exchange price in force during the
        ``TRAIL_MS`` before ``ts_ms`` (the caller holds the lock; the basis is known).
        Chainlink's value is an aggregate smoothed over the last seconds: through a fast
        honest move it sits between the exchange's recent prices, not at the newest."""
        assert self._ratios.basis is not None
        basis, bound = self._ratios.basis
        fitted = self._smoothing.fitted
        if fitted is not None:
            smoothed = fitted.smoothed(self._logs_back(ts_ms, HORIZON))
            return abs(math.log(value) - smoothed - basis) <= bound
        first = max(0, bisect.bisect_right(self._times, ts_ms - TRAIL_MS) - 1)
        last = bisect.bisect_right(self._times, ts_ms)
        recent = self._values[first:last]
        if not recent:
            return False
        # The spot's ratios to the recent prices span [low, high]: one within the bound?
        low, high = math.log(value / max(recent)), math.log(value / min(recent))
        return low - bound <= basis <= high + bound

    def moved_since(self, ts_ms: int) -> bool:
        """Whether the exchange price moved further than the bound since ``ts_ms`` (between
        the price in force then and any since): a spot value repeated meanwhile is frozen."""
        with self._lock:
            if self._ratios.basis is None:
                return False
            i = max(0, bisect.bisect_right(self._times, ts_ms) - 1)
            since = self._values[i:]
            bound = self._ratios.basis[1]
        return bool(since) and math.log(max(since) / min(since)) > bound

    def learn(self, ts_ms: int, value: float) -> None:
        """A believed spot point: its ratio to the exchange price measures the basis."""
        with self._lock:
            if self._silent():
                return
            ratio = self._ratio(ts_ms, value)
            if ratio is not None:
                self._ratios.learn(ratio)
            self._learn_smoothing(ts_ms, math.log(value))

    @property
    def mean_lag_s(self) -> float | None:
        """The learnt smoothing's mean lag in seconds (None before it is learnt)."""
        with self._lock:
            return self._smoothing.mean_lag_s

    def _learn_smoothing(self, ts_ms: int, log_value: float) -> None:
        """A believed spot point a second after the last one learnt (to ``PAIR_SLACK_MS``):
        its return and the exchange's of the ``HORIZON`` seconds before fit the smoothing (the
        caller locks). Points less than a second after the last are skipped: the real feed
        stamps one a second, a faster one (the fakes') is paired a second apart too."""
        last = self._last_learnt
        if last is not None and ts_ms - last[0] < 1000:
            return
        self._last_learnt = (ts_ms, log_value)
        if last is None or ts_ms - last[0] >= 1000 + PAIR_SLACK_MS:
            return
        logs = self._logs_back(ts_ms, HORIZON + 1)
        first = self._smoothing.fitted is None
        returns = tuple(logs[k] - logs[k + 1] for k in range(len(logs) - 1))
        self._smoothing.learn(log_value - last[1], returns)
        learnt = self._smoothing.fitted
        if first and learnt is not None:
            log.info(
                "the spot's smoothing of %s learnt: %.0f %% at once, the rest decaying by"
                " %.2f a second (mean lag %.2f s)",
                self.pair,
                learnt.direct * 100,
                learnt.decay,
                learnt.mean_lag_s,
            )

    def _logs_back(self, ts_ms: int, count: int) -> tuple[float, ...]:
        """The log exchange prices in force at ``ts_ms`` and each second before it, newest
        first: ``count`` of them, fewer where the history does not reach back that far
        (the caller holds the lock and knows one is in force at ``ts_ms``)."""
        logs = []
        for k in range(count):
            i = bisect.bisect_right(self._times, ts_ms - 1000 * k)
            if not i:
                break
            logs.append(math.log(self._values[i - 1]))
        return tuple(logs)


def _basis_and_bound(ratios: list[float]) -> tuple[float, float]:
    """(median, ``BOUND_SPREADS`` robust standard deviations, at least ``BOUND_FLOOR``) of
    sorted ``ratios``."""
    basis = _median(ratios)
    spread = 1.4826 * _median(sorted(abs(r - basis) for r in ratios))
    return basis, max(BOUND_FLOOR, BOUND_SPREADS * spread)


def _median(values: list[float]) -> float:
    n = len(values)
    return values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2
