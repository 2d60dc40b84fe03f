"""A simulated BTC market: a seeded random walk and a quoted UP/DOWN book around the model.

The walk advances in steps of at most one second and stops exactly on every window start,
so the price to beat is the price at ``T0`` as the real market latches it. The quotes are
the model probability plus a slowly wandering market disagreement, on a 0.01 tick.
"""

from __future__ import annotations

import hashlib
import math
import random

from app.markets import WINDOW_S, window_start
from app.refresher.model import SPOT, RealizedVolatility, percentages, probability_up

# About 50% annualised volatility: a realistic figure for BTC, per sqrt-second.
DEFAULT_SIGMA = 0.5 / math.sqrt(365 * 24 * 3600)
START_PRICE = 95_000.0
WARM_UP_S = 900.0  # history simulated before the first board, so the estimate is live
MAX_CATCH_UP_S = 3600.0  # after a longer pause (a suspended laptop), start afresh
TICK = 0.01


def token_id(seed: int, slot: int, outcome: str) -> str:
    """A 77-digit decimal token id, stable for (seed, slot, outcome), new each window."""
    digest = hashlib.sha256(f"probboard-sim:{seed}:{slot}:{outcome}".encode()).digest()
    return str(10**76 + int.from_bytes(digest, "big") % (9 * 10**76))


def _round_tick(value: float) -> float:
    return round(round(value / TICK) * TICK, 2)


class SimulatedSource:
    """Board rows from a simulated market; deterministic for a given seed and call times."""

    name = "simulated"

    def __init__(self, seed: int | None = None, sigma: float = DEFAULT_SIGMA) -> None:
        self._seed = seed if seed is not None else random.SystemRandom().randrange(2**32)
        self._rng = random.Random(self._seed)  # noqa: S311 - a simulation, not a secret
        self._sigma = sigma
        self._t: float | None = None
        self._price = START_PRICE
        self._window = 0
        self._price_to_beat = START_PRICE
        self._gap = 0.0  # market's disagreement with the model, in probability
        self._vol = RealizedVolatility(fallback=sigma)
        self.model_p_up: float | None = None

    def _step(self, dt: float) -> None:
        shock = self._rng.gauss(0.0, self._sigma * math.sqrt(dt))
        self._price *= math.exp(shock - 0.5 * self._sigma**2 * dt)
        self._gap = self._gap * math.exp(-dt / 20.0) + self._rng.gauss(0.0, 0.006 * math.sqrt(dt))
        self._gap = max(-0.08, min(0.08, self._gap))

    def _advance(self, now: float) -> None:
        if self._t is None or now - self._t > MAX_CATCH_UP_S or now < self._t:
            self._t = now - WARM_UP_S
            self._window = window_start(self._t)
            self._price_to_beat = self._price
            self._vol = RealizedVolatility(fallback=self._sigma)
            self._vol.add(self._t, self._price)
        t = self._t
        while t < now:
            boundary = self._window + WINDOW_S
            target = min(now, t + 1.0, boundary)
            self._step(target - t)
            t = target
            if t >= boundary:
                self._window = boundary
                self._price_to_beat = self._price  # latched at the window start
            self._vol.add(t, self._price)
        self._t = now

    def winners(self) -> dict[str, bool]:
        """None: a simulated window settles by its own path (the next price to beat)."""
        return {}

    def rows(self, now: float) -> list[dict[str, object]]:
        """The BTC row at ``now`` (unix seconds)."""
        self._advance(now)
        t0 = self._window
        slot = t0 // WINDOW_S
        rem = max(0.0, t0 + WINDOW_S - now)
        p_up = probability_up(self._price, self._price_to_beat, rem, self._vol.sigma(), SPOT)
        self.model_p_up = p_up
        up_pct, down_pct = percentages(p_up)
        fair = min(0.985, max(0.015, p_up + self._gap))
        up_bid = min(0.98, max(0.01, _round_tick(fair - TICK / 2)))
        up_ask = round(up_bid + TICK, 2)
        return [
            {
                "symbol": "BTC",
                "slot": slot,
                "p_up_pct": up_pct,
                "p_down_pct": down_pct,
                "up_bid": up_bid,
                "up_ask": up_ask,
                "down_bid": round(1.0 - up_ask, 2),
                "down_ask": round(1.0 - up_bid, 2),
                "up_token_id": token_id(self._seed, slot, "up"),
                "down_token_id": token_id(self._seed, slot, "down"),
                "rem_secs": round(rem, 3),
                "ts": int(now * 1000),
                "windowStart": t0,
                "windowEnd": t0 + WINDOW_S,
                "price": round(self._price, 2),
                "priceToBeat": round(self._price_to_beat, 2),
                "sigma": self._vol.sigma(),
                "settlement": SPOT,
                "source": self.name,
            }
        ]
