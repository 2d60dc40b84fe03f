"""The price paths the RTDS stand-in plays: ``BrownianPath``, a seeded 1-second geometric
Brownian spot path with its exact TWAPs (the model tests' and the benchmarks' path),
``live_span`` (the seconds a live path covers) and ``wave_price`` (a smooth path).

The shared part of every seeded path (values, exact TWAPs, lazy generation) is
``harness.paths.SeededPath``; ``FakeRtds.play`` / ``live_on`` push any such path.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from decimal import Decimal

from harness.fake_polymarket.wire import TWAP_TOPICS
from harness.paths import SeededPath

LIVE_S = 30 * 86400  # how long live() can run on its path: generated lazily, so it costs nothing


def live_span(history_s: int, now_s: float | None = None) -> tuple[int, int]:
    """(start_s, seconds) of a path for ``live`` starting at ``now_s`` (default: now on the
    real clock): early enough for a full TWAP at the oldest history point, and a month
    ahead."""
    now = time.time() if now_s is None else now_s
    return int(now) - history_s - max(TWAP_TOPICS), history_s + LIVE_S


def wave_price(base: Decimal, amplitude: Decimal, period_s: float) -> Callable[[float], Decimal]:
    """A smooth price path (18 decimals, as the TWAP's full accuracy carries)."""

    def price(t: float) -> Decimal:
        wave = Decimal(repr(math.sin(2 * math.pi * t / period_s)))
        return (base + amplitude * wave).quantize(Decimal("1e-18"))

    return price


class BrownianPath(SeededPath):
    """A seeded geometric Brownian spot path on whole seconds [start_s, start_s + seconds].

    Log-price increments are N(0, sigma^2) per second (``sigma`` per sqrt-second, e.g.
    1.2e-4), drawn with ``random.Random(seed).gauss``; values are Decimals quantized to 1e-8.
    The same arguments give the same path. Seconds are generated on first use (a path can
    be long and cost only what is read); no threads. The TWAPs and points: ``SeededPath``.
    """

    def __init__(
        self, seed: int, sigma: float, s0: float | Decimal | str, start_s: int, seconds: int
    ) -> None:
        super().__init__(seed, sigma, s0, start_s, seconds)
        self._random = random.Random(seed)  # reproducible by design: the seed is the path
        self._log = 0.0  # log(value / s0) at the last generated second

    def _next_log(self) -> float:
        self._log += self._random.gauss(0.0, self.sigma)
        return self._log
