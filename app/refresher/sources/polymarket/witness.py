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
import math
import threading
import time
from collections.abc import Callable

from app.refresher.sources.polymarket.points import newest_in_second

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


class Verdict(enum.Enum):
    """What the witness says of one spot point."""

    AGREES = "agrees"
    DISAGREES = "disagrees"
    WAIT = "wait"  # the exchange has not spoken for the point's second yet
    NONE = "none"  # silent, or the basis not learned yet: no verdict


class _Ratios:
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


class _Witness:
    """What both witnesses share: their recent prices in time order, when the newest was
    received, and the ratios their basis is measured on; thread-safe."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._times: list[int] = []
        self._values: list[float] = []
        self._ratios = _Ratios()
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

    def _silent(self) -> bool:
        return self._clock() - self._received_at > SILENT_S


class ExchangeWitness(_Witness):
    """One coin's exchange price and the basis of the spot to it; thread-safe."""

    def __init__(self, pair: str, clock: Callable[[], float] = time.time) -> None:
        super().__init__(clock)
        self.pair = pair  # ``btcusdt``: shown in the reasons
        self._outvoted: set[int] = set()  # seconds the TWAP reports sided with the spot

    def outvoted(self, ts_ms: int) -> None:
        """It contradicted a spot point the TWAP reports confirm: two sources against one.
        Over ``RELEARN_AFTER_S`` distinct seconds in a row its basis is forgotten and learnt
        again on the points believed from then on (a basis that moved for good: a de-peg)."""
        with self._lock:
            self._outvoted.add(ts_ms // 1000)
            if len(self._outvoted) >= RELEARN_AFTER_S:
                self._ratios = _Ratios()
                self._outvoted.clear()

    def add(self, ts_ms: int, value: float) -> None:
        """Take an exchange price (finite and positive, not stamped in the future: the feed
        checked both)."""
        with self._lock:
            self._insert(ts_ms, value)

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
            if verdict is Verdict.AGREES:
                self._outvoted.clear()  # a run of outvoted seconds is over
        return verdict, (f"the spot {value:.8g} is {why}" if why else "")

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


def _basis_and_bound(ratios: list[float]) -> tuple[float, float]:
    """(median, ``BOUND_SPREADS`` robust standard deviations, at least ``BOUND_FLOOR``) of
    sorted ``ratios``."""
    basis = _median(ratios)
    spread = 1.4826 * _median(sorted(abs(r - basis) for r in ratios))
    return basis, max(BOUND_FLOOR, BOUND_SPREADS * spread)


def _median(values: list[float]) -> float:
    n = len(values)
    return values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2


# (after_ms, until_ms) -> the believed spot's mean over (after, until], None when its points
# do not cover the span.
# The spot's mean over (after, until] and its carried seconds' uncertainty, in 1-second
# volatilities (``PriceSeries.mean_and_carry``); None when the span is not covered.
SpotMean = Callable[[int, int], "tuple[float, float] | None"]
# A whole second -> the believed spot's newest point stamped within it (None: none).
SpotInSecond = Callable[[int], "float | None"]
CARRY_SIGMAS = 4.0  # the mean's own uncertainty widens the bound by this many of it


class TwapWitness(_Witness):
    """The spot's second witness: the settlement stream's own TWAP reports of one lookback.

    A report stamped ``r`` is Chainlink's mean of the spot over about (r - L, r]; its exact
    window is not published (public replays say it stops averaging about 3 s before its stamp),
    so the offset is part of the basis, measured like the exchange's: the log-ratio of each
    report to our mean of the believed spot over (r - L, r]. It judges the spot's MEAN, so it
    is a row's witness, not a point's: while the exchange price has no verdict, a row whose
    spot's mean the newest report contradicts is stale (``RtdsFeed.twap_doubt``). A point
    moves the mean by 1/N of its error (N the points in the lookback): a level is seen at
    once, a drift or a freeze once it shows in the mean. Thread-safe.
    """

    def __init__(self, topic: str, lookback_s: int, clock: Callable[[], float] = time.time) -> None:
        super().__init__(clock)
        self.topic = topic  # shown in the reasons
        self._lookback_ms = lookback_s * 1000
        self._unlearned: list[tuple[int, float]] = []  # reports the spot did not cover yet
        # The exact witness's reports reach EXACT_DEPTH lookbacks back; its distances from the
        # believed points measure its own basis and bound.
        self._kept_ms = EXACT_DEPTH * self._lookback_ms + 2_000
        self._exact = _Ratios()
        # The last report judged: (its stamp, the spot's newest stamp and sigma then, the
        # verdict's why).
        self._judged: tuple[int, int, float | None, str | None] | None = None

    def report(self, ts_ms: int, value: float) -> None:
        """A believed TWAP report."""
        with self._lock:
            self._insert(ts_ms, value)
            self._unlearned = [*self._unlearned[1 - MAX_PENDING :], (ts_ms, value)]

    def learn(self, mean: SpotMean, newest_spot_ms: int) -> None:
        """Measure the basis on the reports whose span the believed spot now covers."""
        with self._lock:
            ready = [p for p in self._unlearned if p[0] <= newest_spot_ms]
            self._unlearned = [p for p in self._unlearned if p[0] > newest_spot_ms]
        for ts_ms, value in ready:
            found = mean(ts_ms - self._lookback_ms, ts_ms)
            if found is None or found[1] > 0:  # the basis is learnt on exact means only
                continue
            ratio = math.log(value / found[0])
            with self._lock:
                unknown = self._ratios.basis is None
                if unknown or self._ratios.verdict(ratio, "")[0] is Verdict.AGREES:
                    self._ratios.learn(ratio)

    def doubt(self, mean: SpotMean, newest_spot_ms: int, sigma: float | None = None) -> str | None:
        """Why the newest report whose span the spot reaches disagrees with the spot's mean
        there (None: it agrees, or there is none to judge by: silent, not learned, a span
        not covered). Seconds the spot carried (no point of their own) widen the bound by
        ``CARRY_SIGMAS`` of the uncertainty they give the mean at the spot's 1-second
        volatility ``sigma``; without ``sigma`` such a span is not judged. Judged once per
        report and newest spot point."""
        with self._lock:
            if self._silent() or self._ratios.basis is None:
                return None
            i = bisect.bisect_right(self._times, newest_spot_ms)
            if not i:
                return None
            report_ms, report = self._times[i - 1], self._values[i - 1]
            judged = self._judged
        if judged is not None and judged[:3] == (report_ms, newest_spot_ms, sigma):
            return judged[3]
        found = mean(report_ms - self._lookback_ms, report_ms)
        why = None
        if found is not None and (found[1] == 0 or sigma is not None):
            spot_mean, carry = found
            slack = CARRY_SIGMAS * (sigma or 0.0) * carry
            with self._lock:
                verdict, off = self._ratios.verdict(
                    math.log(report / spot_mean), f"the {self.topic} report", slack
                )
            if verdict is Verdict.DISAGREES:
                why = f"the spot's mean {spot_mean:.8g} over the report's span is {off}"
        with self._lock:
            self._judged = (report_ms, newest_spot_ms, sigma, why)
        return why

    # -- the exact witness: each second's spot, from consecutive reports -----------------
    def exact_verdict(self, ts_ms: int, value: float, spot_in: SpotInSecond) -> tuple[Verdict, str]:
        """The reports' word on one spot point. Consecutive reports of an L-second mean
        differ by (S(s) - S(s - L)) / L, so with the spot of second s - L (believed, or over
        a hole the one the reports give, up to ``EXACT_DEPTH`` lookbacks back) they give the
        spot of the point's second s. WAIT until a report of its second has come; NONE when
        silent, not learned, or a report of s or s - 1 is missing."""
        with self._lock:
            if self._silent() or self._exact.basis is None or not self._times:
                return Verdict.NONE, ""
            if self._times[-1] < ts_ms:
                return Verdict.WAIT, ""
        implied = self._implied(ts_ms // 1000, spot_in, EXACT_DEPTH)
        if implied is None or implied <= 0:
            return Verdict.NONE, ""
        with self._lock:
            verdict, why = self._exact.verdict(
                math.log(value / implied), f"the spot the {self.topic} reports give"
            )
        return verdict, (f"the spot {value:.8g} is {why}" if why else "")

    def learn_point(self, ts_ms: int, value: float, spot_in: SpotInSecond) -> None:
        """A believed spot point: its distance from the spot the reports give is learnt."""
        implied = self._implied(ts_ms // 1000, spot_in, 0)
        if implied is not None and implied > 0:
            with self._lock:
                self._exact.learn(math.log(value / implied))

    def _report_in(self, second: int) -> float | None:
        """The newest report stamped within ``second``."""
        with self._lock:
            return newest_in_second(self._times, self._values, second)

    def _implied(self, second: int, spot_in: SpotInSecond, depth: int) -> float | None:
        """The spot of ``second`` as the reports give it (None where they cannot)."""
        now, before = self._report_in(second), self._report_in(second - 1)
        if now is None or before is None:
            return None
        lookback_s = self._lookback_ms // 1000
        earlier = spot_in(second - lookback_s)
        if earlier is None and depth > 0:
            earlier = self._implied(second - lookback_s, spot_in, depth - 1)
        return None if earlier is None else earlier + lookback_s * (now - before)
