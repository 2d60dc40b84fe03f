"""The spot's second witness: the settlement stream's own TWAP reports (``TwapWitness``).

Split from ``witness.py`` (the exchange price's witness and what both share): a report judges
the spot's mean over its lookback, and consecutive reports give each second's spot exactly
(``TwapWitness.exact_verdict``).
"""

from __future__ import annotations

import bisect
import collections
import math
import time
from collections.abc import Callable

from app.refresher.sources.polymarket.points import newest_in_second
from app.refresher.sources.polymarket.witness import (
    EXACT_DEPTH,
    MAX_PENDING,
    Verdict,
    Witness,
    WitnessRatios,
)

SHIFTS = range(6)  # seconds a report's stamp may be after the spot second it gives (real: 3)

# The spot's mean over (after, until] and its carried seconds' uncertainty, in 1-second
# volatilities (``PriceSeries.mean_and_carry``); None when the span is not covered.
SpotMean = Callable[[int, int], "tuple[float, float] | None"]
# A whole second -> the believed spot's newest point stamped within it (None: none).
SpotInSecond = Callable[[int], "float | None"]
CARRY_SIGMAS = 4.0  # the mean's own uncertainty widens the bound by this many of it


class TwapWitness(Witness):
    """The spot's second witness: the settlement stream's own TWAP reports of one lookback.

    A report stamped ``r`` is Chainlink's mean of the spot over (r - k - L, r - k], k the
    shift the exact witness learns (``shift``: public replays say about 3 s, the fakes 0);
    what offset remains is part of the basis, measured like the exchange's: the log-ratio of
    each report to our mean of the believed spot over that span. It judges the spot's MEAN, so it
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
        # One basis and bound per shift: the report at t gives the spot of t - shift (the real
        # reports average up to 3 s before their stamp; the fakes', up to it): the shift whose
        # bound is tightest is the reports' own. Points are learnt once the reports of their
        # second plus every shift have come (``_to_learn``).
        self._exacts = [WitnessRatios() for _ in SHIFTS]
        self._to_learn: collections.deque[tuple[int, float]] = collections.deque(maxlen=256)
        self._spot_in: SpotInSecond | None = None
        self._shift: int | None = None  # learnt from ``_exacts`` (``_learn_points``)
        # The last report judged: (its stamp, the spot's newest stamp and sigma then, the
        # verdict's why).
        self._judged: tuple[int, int, float | None, str | None] | None = None

    def report(self, ts_ms: int, value: float) -> None:
        """A believed TWAP report."""
        with self._lock:
            self._insert(ts_ms, value)
            self._unlearned = [*self._unlearned[1 - MAX_PENDING :], (ts_ms, value)]
        self._learn_points()

    def learn(self, mean: SpotMean, newest_spot_ms: int) -> None:
        """Measure the basis on the reports whose span the believed spot now covers."""
        with self._lock:
            ready = [p for p in self._unlearned if p[0] <= newest_spot_ms]
            self._unlearned = [p for p in self._unlearned if p[0] > newest_spot_ms]
        for ts_ms, value in ready:
            found = mean(*self._span(ts_ms))
            if found is None or found[1] > 0:  # the basis is learnt on exact means only
                continue
            ratio = math.log(value / found[0])
            with self._lock:
                unknown = self._ratios.basis is None
                if unknown or self._ratios.verdict(ratio, "")[0] is Verdict.AGREES:
                    self._ratios.learn(ratio)

    def _span(self, report_ms: int) -> tuple[int, int]:
        """The spot's span a report averages, (after, until] in ms: its lookback up to the
        learnt shift before its stamp."""
        until = report_ms - 1000 * (self.shift() or 0)
        return until - self._lookback_ms, until

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
        found = mean(*self._span(report_ms))
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
        spot of the point's second s, from the reports of s + k and s + k - 1 (k the shift
        learnt). WAIT until a report of s + k has come; NONE when silent, not learned, or a
        report is missing."""
        shift = self.shift()
        with self._lock:
            if self._silent() or shift is None or not self._times:
                return Verdict.NONE, ""
            if self._times[-1] < ts_ms + 1000 * shift:
                return Verdict.WAIT, ""
        implied = self._implied(ts_ms // 1000, spot_in, EXACT_DEPTH, shift)
        if implied is None or implied <= 0:
            return Verdict.NONE, ""
        with self._lock:
            verdict, why = self._exacts[shift].verdict(
                math.log(value / implied), f"the spot the {self.topic} reports give"
            )
        return verdict, (f"the spot {value:.8g} is {why}" if why else "")

    @property
    def learning(self) -> bool:
        """Whether its reports arrive but give no second's spot yet (no shift learnt)."""
        with self._lock:
            return self._shift is None and bool(self._times) and not self._silent()

    def shift(self) -> int | None:
        """The seconds between a report's stamp and the spot second it gives (None before it
        is learnt: ``_learn_points``)."""
        with self._lock:
            return self._shift

    def learn_point(self, ts_ms: int, value: float, spot_in: SpotInSecond) -> None:
        """A believed spot point: its distance from the spot the reports give, at every
        shift, is learnt once their reports have come."""
        with self._lock:
            self._to_learn.append((ts_ms, value))
            self._spot_in = spot_in
        self._learn_points()

    def _learn_points(self) -> None:
        """Learn the waiting points whose second the reports now cover at every shift (those
        too old for them to come are dropped)."""
        with self._lock:
            if not self._times or self._spot_in is None:
                return
            newest = self._times[-1] // 1000
            ready = []
            while self._to_learn and self._to_learn[0][0] // 1000 + SHIFTS[-1] <= newest:
                ready.append(self._to_learn.popleft())
            spot_in = self._spot_in
        for ts_ms, value in ready:
            for shift in SHIFTS:
                implied = self._implied(ts_ms // 1000, spot_in, 0, shift)
                if implied is not None and implied > 0:
                    with self._lock:
                        self._exacts[shift].learn(math.log(value / implied))
        if ready:
            self._choose_shift()

    def _choose_shift(self) -> None:
        """Once every shift is learnt, the one with the tightest bound; before, 0 once it is
        learnt (the points at the edge of the reports' history reach the larger shifts
        first), else None. A new shift forgets the mean's basis (learnt on the old spans)."""
        with self._lock:
            bases = [ratios.basis for ratios in self._exacts]
            shift: int | None
            if all(bases):
                shift = min((basis[1], k) for k, basis in enumerate(bases) if basis)[1]
            else:
                shift = 0 if bases[0] else None
            if (shift or 0) != (self._shift or 0):
                self._ratios = WitnessRatios()
            self._shift = shift

    def _report_in(self, second: int) -> float | None:
        """The newest report stamped within ``second``."""
        with self._lock:
            return newest_in_second(self._times, self._values, second)

    def _implied(self, second: int, spot_in: SpotInSecond, depth: int, shift: int) -> float | None:
        """The spot of ``second`` as the reports ``shift`` seconds later give it (None where
        they cannot)."""
        now, before = self._report_in(second + shift), self._report_in(second + shift - 1)
        if now is None or before is None:
            return None
        lookback_s = self._lookback_ms // 1000
        earlier = spot_in(second - lookback_s)
        if earlier is None and depth > 0:
            earlier = self._implied(second - lookback_s, spot_in, depth - 1, shift)
        return None if earlier is None else earlier + lookback_s * (now - before)
