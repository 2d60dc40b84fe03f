"""Seeded 1-second spot paths with their exact TWAPs: what the fakes, tapes and benches play.

``SeededPath`` holds what every path shares (Decimal values quantized to 1e-8, exact TWAP
sums, lazy generation under a lock); a subclass only says how the next second moves
(``_next_log``). The two kinds: ``harness.fake_polymarket.BrownianPath`` (i.i.d. Gaussian
steps) and ``harness.settlement_feed.SettlementFeedPath`` (the settlement feed's smoothed,
fat-tailed moves). Whoever takes a path takes a ``SeededPath``, so either will do.
"""

from __future__ import annotations

import math
import threading
from decimal import Decimal, localcontext

SPOT_QUANTUM = Decimal("1e-8")
TWAP_QUANTUM = Decimal("1e-18")


class SeededPath:
    """A seeded spot path on whole seconds [start_s, start_s + seconds], starting at ``s0``.

    ``sigma`` is the volatility per sqrt-second over long horizons (what a 5-minute outcome
    feels). Seconds are generated on first use (a path can be long and cost only what is
    read); reads are safe from several threads.
    """

    def __init__(
        self, seed: int, sigma: float, s0: float | Decimal | str, start_s: int, seconds: int
    ) -> None:
        if seconds < 0:
            raise ValueError("seconds must be >= 0")
        self.seed = seed
        self.sigma = sigma
        self.s0 = Decimal(str(s0))
        self.start_s = start_s
        self.seconds = seconds
        self._s0 = float(self.s0)
        self._values: list[Decimal] = [self.s0.quantize(SPOT_QUANTUM)]
        # _sums[i] = the sum of the first i values: a TWAP is a difference of two, exactly.
        self._sums: list[Decimal] = [Decimal(0), self._values[0]]
        self._lock = threading.Lock()  # generation is lazy; live() reads from a ticker thread

    def _next_log(self) -> float:
        """log(value / s0) at the next second (called in order, under the lock)."""
        raise NotImplementedError

    @property
    def end_s(self) -> int:
        """The last second of the path."""
        return self.start_s + self.seconds

    def _index(self, t: int) -> int:
        if not self.start_s <= t <= self.end_s:
            raise ValueError(f"second {t} is outside the path [{self.start_s}, {self.end_s}]")
        index = t - self.start_s
        with self._lock:
            while len(self._values) <= index:
                value = Decimal(self._s0 * math.exp(self._next_log())).quantize(SPOT_QUANTUM)
                self._values.append(value)
                self._sums.append(self._sums[-1] + value)
        return index

    def value(self, t: int) -> Decimal:
        """The spot at whole second ``t``."""
        return self._values[self._index(t)]

    def has_twap(self, t: int, lookback: int) -> bool:
        """Whether the path has the ``lookback`` seconds up to ``t`` that a TWAP needs."""
        return lookback >= 1 and self.start_s + lookback - 1 <= t <= self.end_s

    def twap(self, t: int, lookback: int) -> Decimal:
        """The mean spot of seconds ``t - lookback + 1`` .. ``t``, quantized to 1e-18."""
        if not self.has_twap(t, lookback):
            raise ValueError(f"no {lookback} s TWAP at {t}: the path starts at {self.start_s}")
        end = self._index(t) + 1
        with localcontext() as context:
            context.prec = 60  # the mean to 18 decimals without an intermediate rounding
            mean = (self._sums[end] - self._sums[end - lookback]) / lookback
            return mean.quantize(TWAP_QUANTUM)

    def spot_points(self, a: int, b: int) -> list[tuple[int, Decimal]]:
        """(epoch ms, spot) for every whole second in [a, b]."""
        return [(t * 1000, self.value(t)) for t in range(a, b + 1)]

    def twap_points(self, a: int, b: int, lookback: int) -> list[tuple[int, Decimal]]:
        """(epoch ms, TWAP) for every whole second in [a, b] that has a full lookback (the
        first ``lookback - 1`` seconds of the path have none)."""
        first = max(a, self.start_s + lookback - 1)
        return [(t * 1000, self.twap(t, lookback)) for t in range(first, b + 1)]
