"""The exchange's price beside a settlement-feed stand-in, as RTDS relays Binance's.

The real Chainlink stream is a smoothed aggregate that trails Binance by a second or two: a
fast move shows on Binance at once and on Chainlink over the next seconds (issue 48). So this
view is the stand-in's LATENT price (``SettlementFeedPath.latent``, what the feed follows),
not the feed's own value, times a basis that wanders, with a little noise of its own:

- the basis: an Ornstein-Uhlenbeck walk of the log-ratio around ``basis`` (-5 bp: BTC's
  Binance price about $50 under Chainlink's at 100,000), ``basis_sd`` its stationary sd,
  ``basis_s`` its time constant, one step a second;
- the noise: ``noise_sd`` (0.3 bp) of Gaussian noise per quarter second (Binance's own
  trades around the aggregate), the same for the same quarter of the path (counted from its
  start, as the path's own seconds are);
- rounded to the pair's tick, a cent (0.0001 under $10).

Seeded and lazy like the path: the same arguments give the same prices, and reads are
thread safe.
"""

from __future__ import annotations

import math
import random
import threading
from decimal import Decimal

from harness.settlement_feed import SettlementFeedPath


class ExchangeView:
    """Binance's price of the coin whose settlement feed is ``path``, at any instant."""

    def __init__(
        self,
        path: SettlementFeedPath,
        seed: int = 0,
        basis: float = -5e-4,
        basis_sd: float = 1e-4,
        basis_s: float = 600.0,
        noise_sd: float = 3e-5,
    ) -> None:
        self.path = path
        self._seed = seed
        self._basis = basis
        self._keep = math.exp(-1 / basis_s)
        self._shock = basis_sd * math.sqrt(1 - self._keep**2)
        self._noise_sd = noise_sd
        self._random = random.Random(f"{seed}:basis")  # reproducible by design: a seeded path
        self._walk = [self._random.gauss(0.0, basis_sd)]  # the basis's offset, per second
        self._lock = threading.Lock()

    def basis_at(self, t: int) -> float:
        """The log-ratio exchange / latent at second ``t`` (without the noise)."""
        index = t - self.path.start_s
        if index < 0:
            raise ValueError(f"second {t} is before the path's start {self.path.start_s}")
        with self._lock:
            while len(self._walk) <= index:
                self._walk.append(self._keep * self._walk[-1] + self._random.gauss(0, self._shock))
            return self._basis + self._walk[index]

    def value(self, t: float) -> Decimal:
        """The exchange price at instant ``t`` (epoch s): the latent of its second, the
        basis of that second and the noise of its quarter second, rounded to the tick."""
        second = math.floor(t)
        latent = float(self.path.latent(second))
        # One draw per quarter second, counted from the path's start: keyed by the epoch's
        # quarter, a world set on the wall clock drew other noise at every hour it ran.
        index = math.floor((t - self.path.start_s) * 4)
        quarter = random.Random(f"{self._seed}:{index}")
        value = latent * math.exp(self.basis_at(second) + quarter.gauss(0.0, self._noise_sd))
        tick = Decimal("0.0001") if value < 10 else Decimal("0.01")
        return Decimal(str(value)).quantize(tick)
