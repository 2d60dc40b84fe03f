"""What the whole history says (``history``, about once a minute) and the estimate the model
uses (``estimate``, per new point; on the hot path: one pass over the last ``SIGMA_WINDOW_S``)."""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field

from app.refresher.model import ratio_from_autocorrelations
from app.refresher.volatility.autocorrelation import LONG_HORIZONS, RHO_WINDOW_S, autocorrelations
from app.refresher.volatility.regimes import (
    JUMP_SIGMAS,
    block_inflation,
    jump_flags,
    regime_variance,
    regime_variances,
)
from app.refresher.volatility.settlement import (
    Factors,
    factor_at,
    settlement_factors,
)
from app.refresher.volatility.sigma import (
    MIN_RETURNS,
    SIGMA_WINDOW_S,
    one_second_returns,
    scale_of,
    second_grid,
)

# The last return is one second's move only when it rests on points at most this far apart:
# Chainlink's are about 1 s apart; a missing second (2 % of them) or a hole (points missing,
# or refused by the witnesses) makes it the move of many seconds, which does not continue.
RETURN_GAP_MS = 1_500


def last_one_second_return(times_ms: Sequence[int], returns: Sequence[float]) -> float:
    """The grid's last return (``returns``, of the grid ending at the newest point's
    second), or 0 when the points it rests on are further apart than ``RETURN_GAP_MS``."""
    if not returns:
        return 0.0
    last_s = times_ms[-1] // 1000
    now = bisect.bisect_right(times_ms, last_s * 1000) - 1
    before = bisect.bisect_right(times_ms, (last_s - 1) * 1000) - 1
    if before >= 0 and now != before and times_ms[now] - times_ms[before] > RETURN_GAP_MS:
        return 0.0
    return returns[-1]


@dataclass(frozen=True)
class History:
    """What the whole history says (recomputed about once a minute)."""

    scale: float = 1.0  # variance scale of the 5-minute horizon against 1-second returns
    history_s: int = 0  # seconds of history behind it
    jump_rate: float = 0.0  # jumps per second
    jump_var: float = 0.0  # mean square log size of a jump
    inflation: float = 1.0  # variance inflation for the variance's own uncertainty
    # Autocorrelations of 1-second returns at lags 1..LAGS (0 where not significant).
    rho: tuple[float, ...] = ()
    # (horizon, its variance ratio to 1-second returns, shrunk) beyond the lags' reach.
    ratios: tuple[tuple[int, float], ...] = ()
    # ``settlement_factors``; empty: the block inflation at every horizon.
    factors: Factors = ()


@dataclass(frozen=True)
class Volatility:
    """One estimate: what the model uses and what it rests on."""

    sigma: float  # 1-second diffusion, per sqrt-second: sqrt(regime variance * inflation)
    sigma_1s: float  # plain realised volatility of the last SIGMA_WINDOW_S, jumps included
    scale: float  # the 5-minute against 1-second variance ratio measured (a check: the model
    # scales by the autocorrelations, ``model.horizon_ratio``)
    returns: int  # 1-second returns behind sigma_1s
    history_s: int  # seconds of history behind the scale
    jump_rate: float = 0.0  # jumps per second
    jump_var: float = 0.0  # a jump's mean square log size, scaled as the diffusion is
    inflation: float = 1.0
    rho: tuple[float, ...] = ()  # the history's autocorrelations (``History.rho``)
    ratios: tuple[tuple[int, float], ...] = ()  # ``History.ratios``
    last_return: float = 0.0  # the last 1-second log return: what may continue
    # The point it ends at (stamp ms, value): the price its last return continues from.
    newest: tuple[int, float] | None = None
    factors: Factors = field(default=(), repr=False)

    def factor(self, rule: str, lookback_s: int | None, tau_s: float, window_s: int) -> float:
        """The variance factor at ``tau_s`` seconds left for a settlement of ``rule`` (and
        ``lookback_s``) in a ``window_s``-second window: measured on the settlement's own
        horizon and rule, else the block inflation."""
        return factor_at(self.factors, rule, lookback_s, tau_s, self.inflation, window_s)

    def spread(
        self, rule: str, lookback_s: int | None, tau_s: float, window_s: int
    ) -> tuple[float, float]:
        """(sigma, a jump's mean square size) for the model at ``tau_s`` left under ``rule``
        in a ``window_s``-second window: the diffusion and the jumps times the settlement's
        own factor."""
        # sigma and jump_var carry the inflation: the factor takes its place.
        share = self.factor(rule, lookback_s, tau_s, window_s) / self.inflation
        return self.sigma * math.sqrt(share), self.jump_var * share


def history(
    times_ms: Sequence[int],
    values: Sequence[float],
    windows: Collection[int],
    factors: Factors | None = None,
) -> History:
    """The horizon scale, the jumps, the variance's inflation, the autocorrelations and the
    settlement factors over the whole history, for windows of ``windows`` seconds (those
    served: the long horizons cost a replay of their own); ``factors`` given are kept
    instead of measured again (they move over hours, and cost as much as the rest
    together)."""
    if not times_ms:
        return History()
    grid = second_grid(times_ms, values, times_ms[0] // 1000)
    scale, history_s = scale_of(grid)
    returns = one_second_returns(grid)
    flags = jump_flags(returns)
    jumps = [r * r for r, jump in zip(returns, flags, strict=True) if jump]
    rate = len(jumps) / len(returns) if returns else 0.0
    jump_var = math.fsum(jumps) / len(jumps) if jumps else 0.0
    diffusion = [0.0 if jump else r * r for r, jump in zip(returns, flags, strict=True)]
    regimes = regime_variances(diffusion)
    inflation = block_inflation(returns, regimes, rate * jump_var)
    rho = autocorrelations(returns[-RHO_WINDOW_S:])
    # Each long horizon's ratio is shrunk toward what the autocorrelations alone imply (1 on a
    # Brownian path), not toward 1: a smoothed or a noisy feed's short structure is known well.
    horizons = tuple(
        (h, scale_of(grid, h, ratio_from_autocorrelations(rho, h))[0]) for h in LONG_HORIZONS
    )
    if factors is None:
        factors = settlement_factors(
            grid, regimes, rate * jump_var, rho, horizons, inflation, windows
        )
    return History(scale, history_s, rate, jump_var, inflation, rho, horizons, factors)


def estimate(
    times_ms: Sequence[int],
    values: Sequence[float],
    past: History,
    grid: Callable[[Sequence[int], Sequence[float], int], list[float]] = second_grid,
) -> Volatility | None:
    """The estimate from the spot's points and what ``history`` found; None while there are
    fewer than ``MIN_RETURNS`` returns. ``grid``: ``second_grid``, or a series' own
    ``SecondGrid`` (the same grid, only its new seconds computed)."""
    if not times_ms:
        return None
    start = times_ms[-1] // 1000 - SIGMA_WINDOW_S
    returns = one_second_returns(grid(times_ms, values, start))
    n = len(returns)
    if n < MIN_RETURNS:
        return None
    squares = [r * r for r in returns]
    total = math.fsum(squares)
    sigma_1s = math.sqrt(total / n)
    if not math.isfinite(sigma_1s):
        return None
    limit = JUMP_SIGMAS * JUMP_SIGMAS * total / n
    diffusion = [0.0 if q > limit else q for q in squares]
    # The horizon's scale is the model's, from the autocorrelations (``model.horizon_ratio``):
    # sigma here is the 1-second diffusion, inflated for its own uncertainty.
    factor = past.inflation
    return Volatility(
        sigma=math.sqrt(regime_variance(diffusion, n) * factor),
        sigma_1s=sigma_1s,
        scale=past.scale,
        returns=n,
        history_s=past.history_s,
        jump_rate=past.jump_rate,
        jump_var=past.jump_var * factor,
        inflation=past.inflation,
        rho=past.rho,
        ratios=past.ratios,
        last_return=last_one_second_return(times_ms, returns),
        newest=(times_ms[-1], values[-1]),
        factors=past.factors,
    )
