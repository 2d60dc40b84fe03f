"""Simulated markets: for each, a seeded random walk and a quoted UP/DOWN book around the model.

Each market (``SYMBOLS``) walks on its own, seeded by the source's seed and its symbol. The
walk advances in steps of at most one second and stops exactly on every window start, so the
price to beat is the price at ``T0`` as the real market latches it. The quotes are the model
probability plus a slowly wandering market disagreement, on a 0.01 tick.
"""

from __future__ import annotations

import hashlib
import math
import random

from app.board.row import BoardRow
from app.markets import DEFAULT_SPAN, Market, Span
from app.refresher.model import SPOT, RealizedVolatility, percentages, probability_up

SECONDS_PER_YEAR = 365 * 24 * 3600
# The first simulated market: its token ids and walk keep the form they had before there were
# others (the same seed gives the same ids and path as it always did), as do the first kind's.
UNSALTED_SYMBOL = "BTC"
UNSALTED_SPAN = "5m"
WARM_UP_S = 900.0  # history simulated before the first board, so the estimate is live
MAX_CATCH_UP_S = 3600.0  # after a longer pause (a suspended laptop), start afresh
TICK = 0.01


def token_id(seed: int, slot: int, outcome: str, symbol: str, span: Span) -> str:
    """A 77-digit decimal token id, stable for (seed, symbol, span, window, outcome), new each
    window (``slot``: the window's start, over the span's length for the first kinds)."""
    name = f"probboard-sim:{seed}:{slot}:{outcome}"
    if symbol != UNSALTED_SYMBOL:
        name = f"{name}:{symbol}"
    if span.name != UNSALTED_SPAN:
        name = f"{name}:{span.name}"
    digest = hashlib.sha256(name.encode()).digest()
    return str(10**76 + int.from_bytes(digest, "big") % (9 * 10**76))


def _round_tick(value: float) -> float:
    return round(round(value / TICK) * TICK, 2)


class _Walk:
    """One market's simulated price path, its window and its quotes' disagreement."""

    def __init__(self, market: Market, seed: int, sigma: float | None) -> None:
        self.market = market
        salt = seed if market.symbol == UNSALTED_SYMBOL else f"{seed}:{market.symbol}"
        self.rng = random.Random(salt)  # noqa: S311 - a simulation, not a secret
        self.sigma = sigma or market.sigma_per_year / math.sqrt(SECONDS_PER_YEAR)
        self.t: float | None = None
        self.price = market.start_price
        # Each span's current window: (start, its price to beat), by the span's name; the
        # walk stops on each window's end, where the next one's price to beat is latched.
        self.latched: dict[str, tuple[int, float]] = {}
        self.spans: tuple[Span, ...] = ()
        self.gap = 0.0  # market's disagreement with the model, in probability
        self.vol = RealizedVolatility(fallback=self.sigma)

    def _step(self, dt: float) -> None:
        shock = self.rng.gauss(0.0, self.sigma * math.sqrt(dt))
        self.price *= math.exp(shock - 0.5 * self.sigma**2 * dt)
        self.gap = self.gap * math.exp(-dt / 20.0) + self.rng.gauss(0.0, 0.006 * math.sqrt(dt))
        self.gap = max(-0.08, min(0.08, self.gap))

    def advance(self, now: float) -> None:
        """Walk up to ``now`` (afresh after a long pause or a step back in time)."""
        if self.t is None or now - self.t > MAX_CATCH_UP_S or now < self.t:
            self.t = now - WARM_UP_S
            self.latched = {s.name: (s.start(self.t), self.price) for s in self.spans}
            self.vol = RealizedVolatility(fallback=self.sigma)
            self.vol.add(self.t, self.price)
        t = self.t
        while t < now:
            ends = {s.name: s.end(self.latched[s.name][0]) for s in self.spans}
            # Also on the 5-minute grid, served or not: a seed's path stays what it was.
            grid = DEFAULT_SPAN.end(DEFAULT_SPAN.start(t))
            boundary = min(grid, *ends.values())
            target = min(now, t + 1.0, boundary)
            self._step(target - t)
            t = target
            if t >= boundary:
                for name, end in ends.items():  # latched at each window's start
                    if end == boundary:
                        self.latched[name] = (boundary, self.price)
            self.vol.add(t, self.price)
        self.t = now


class SimulatedSource:
    """Board rows from simulated markets; deterministic for a given seed and call times."""

    name = "simulated"

    def __init__(
        self,
        markets: tuple[Market, ...],
        seed: int | None = None,
        sigma: float | None = None,
        spans: tuple[Span, ...] = (DEFAULT_SPAN,),
    ) -> None:
        if not markets or not spans:
            raise ValueError("a source serves at least one market and one window")
        self._seed = seed if seed is not None else random.SystemRandom().randrange(2**32)
        self._walks = [_Walk(market, self._seed, sigma) for market in markets]
        self._spans = spans
        for walk in self._walks:
            walk.spans = spans

    def winners(self) -> dict[str, bool]:
        """None: a simulated window settles by its own path (the next price to beat)."""
        return {}

    def advance(self, now: float) -> None:
        """Walk every market up to ``now`` without building rows (as ``rows(now)`` does
        first): a caller that skips boards keeps the path a seed gives at its instants."""
        for walk in self._walks:
            walk.advance(now)

    def rows(self, now: float) -> list[BoardRow]:
        """One row per (span, market) at ``now`` (unix seconds): span by span, markets in
        ``SYMBOLS`` order."""
        return [self._row(walk, span, now) for span in self._spans for walk in self._walks]

    def _row(self, walk: _Walk, span: Span, now: float) -> BoardRow:
        walk.advance(now)
        t0, price_to_beat = walk.latched[span.name]
        end = span.end(t0)
        rem = max(0.0, end - now)
        # The window's number on a fixed grid; a start off it (an Eastern 4-hour block) itself.
        slot = t0 // span.seconds if t0 % span.seconds == 0 else t0
        p_up = probability_up(walk.price, price_to_beat, rem, walk.vol.sigma(), SPOT)
        up_pct, down_pct = percentages(p_up)
        fair = min(0.985, max(0.015, p_up + walk.gap))
        up_bid = min(0.98, max(0.01, _round_tick(fair - TICK / 2)))
        up_ask = round(up_bid + TICK, 2)
        symbol = walk.market.symbol
        return BoardRow(
            symbol=symbol,
            slot=t0,
            p_up_pct=up_pct,
            p_down_pct=down_pct,
            up_bid=up_bid,
            up_ask=up_ask,
            down_bid=round(1.0 - up_ask, 2),
            down_ask=round(1.0 - up_bid, 2),
            up_token_id=token_id(self._seed, slot, "up", symbol, span),
            down_token_id=token_id(self._seed, slot, "down", symbol, span),
            rem_secs=round(rem, 3),
            ts=int(now * 1000),
            window_start=t0,
            window_end=end,
            price=_price(walk.price),
            price_to_beat=_price(price_to_beat),
            sigma=walk.vol.sigma(),
            settlement=SPOT,
            source=self.name,
            model_p_up=p_up,
            window=span.name,
        )


def _price(value: float) -> float:
    """A simulated price as shown: cents, or 6 significant digits for a coin under $10."""
    return round(value, 2) if value >= 10 else float(f"{value:.6g}")
