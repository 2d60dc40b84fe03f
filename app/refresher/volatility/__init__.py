"""The spot's volatility per sqrt-second, and the horizon scale measured on the feed itself.

``sigma_1s`` is the realised volatility of the last ``SIGMA_WINDOW_S`` seconds of 1-second log
returns (on a 1-second grid, the price in force at each whole second, so a point that arrives
late or out of order is simply part of the grid next time).

Whether 1-second variance, times the seconds left, is the variance over a 5-minute horizon
depends on how the returns are autocorrelated (microstructure, the oracle's update rule). So
the scale is measured: the ratio of the realised variance of overlapping ``HORIZON_S`` returns
(per second) to that of 1-second returns, over the whole history kept (hours). With little
history that ratio is noise, so it is shrunk toward 1 as if ``PRIOR_HORIZONS`` intervals of
ratio 1 had been seen: ``scale = (m * ratio + k) / (m + k)``, ``m`` the history's length in
horizons. On a Brownian path the true scale is exactly 1.

Real 1-second returns are not Gaussian (docs/model.md): they come with jumps, and their size
comes in regimes. So the history also gives, once a minute (``history``):

- jumps: a 1-second return larger than ``JUMP_SIGMAS`` times the volatility of the
  ``SIGMA_WINDOW_S`` before it is a jump; their rate per second and mean square size are the
  jump part of the model (compound Poisson), and they are left out of the diffusion's
  variance;
- the vol of vol: over blocks of ``BLOCK_S`` seconds, the realised variance against what
  the estimate at the block's start predicted. Its dispersion beyond what sampling alone gives
  on a Brownian path (``2 / BLOCK_S``) is how uncertain the variance is; the variance used is
  inflated by it (``inflation``, at most ``INFLATION_CAP``). On a Brownian path the jump rate
  is nearly 0 and the inflation 1: the model is the plain digital option again.

The diffusion's variance follows the regime: that of the last ``SIGMA_WINDOW_S`` seconds, or
of the last ``FAST_WINDOW_S`` when it is clearly higher, jumps left out, so it rises within a
minute of a jumpy spell and falls back when it ends.

The settlement feed is smoothed (docs/model.md): its 1-second returns are autocorrelated
(+0.2 to +0.3 at lag 1 on real days), so the variance per second grows with the horizon and
the last seconds' move continues. ``history`` measures the autocorrelation of the 1-second
returns at lags 1 to ``LAGS`` on the feed itself (the last ``RHO_WINDOW_S``), each kept only
beyond ``RHO_ERRORS`` of its own (heteroskedasticity-robust) standard error, so a Brownian
path's are 0 and the model is the exact one there. From them the model takes the variance over
the time left up to ``LAGS`` seconds and the expected continuation of the last return
(``app.refresher.model``); beyond, the variance ratio measured at ``LONG_HORIZONS``.

The settlement's own spread (``settlement_factors``): the block inflation above measures how
uncertain the 1-second variance is, but on a fat-tailed feed it counts each second's tails,
which the settlement's horizon averages out (on the settlement-feed stand-in and on real
exchange days the model's variance was about twice what scored best). So ``history`` also
replays the model on the feed's own past: pseudo-windows ending every ``PSEUDO_STEP_S``
seconds, for each TWAP settlement rule (``RULES``; a spot settlement keeps the inflation,
see there) and horizon (``FACTOR_HORIZONS``), the
settlement's standardised miss ``z`` (what it came to, less the model's centre, over the
model's spread without the inflation) and the standardised distance ``d`` of the centre from
the price to beat. The factor at a horizon is the variance multiplier ``k`` whose digital
answers ``Phi(d / sqrt(k))`` score the best log loss over every pair of a distance and a
miss seen (``k`` within ``FACTOR_RANGE``): the settlement's own horizon and rule judge it, and
on a Brownian path it is 1 (in a TWAP's last seconds, the discrete average's own variance,
which the continuous formula misses by up to a third). Under ``MIN_PSEUDO_S`` seconds of
pseudo-windows the block inflation stands; each horizon's factor is shrunk (in log) toward
the shorter horizon's (the first toward the inflation) as if ``PRIOR_SPANS`` spans of it had
said so. A longer kind's time left beyond them (its ``Span.factor_horizons``) is measured
on 15-minute pseudo-windows, only when such windows are served (``history``'s ``windows``).

Where each part lives: ``sigma`` (the 1-second grid, sigma and the horizon scale), ``regimes``
(jumps, the regime's variance and the block inflation), ``autocorrelation`` (the returns'
autocorrelations), ``settlement`` (the settlement factors, replayed on pseudo-windows) and
``estimator`` (``history`` once a minute, ``estimate`` per new point, and what they return).
Every public name is importable from here, as before the split.
"""

from __future__ import annotations

from app.refresher.volatility.autocorrelation import (
    LAGS,
    LONG_HORIZONS,
    RHO_ERRORS,
    RHO_WINDOW_S,
    autocorrelations,
)
from app.refresher.volatility.estimator import History, Volatility, estimate, history
from app.refresher.volatility.regimes import (
    BLOCK_S,
    FAST_SIGNIFICANCE,
    FAST_WINDOW_S,
    INFLATION_CAP,
    JUMP_SIGMAS,
    PRIOR_BLOCKS,
    U_CAP,
)
from app.refresher.volatility.settlement import (
    DISTANCE_QUANTILES,
    FACTOR_HORIZONS,
    FACTOR_RANGE,
    FACTOR_TOLERANCE,
    MIN_PSEUDO_S,
    PRIOR_SPANS,
    PSEUDO_STEP_S,
    RULES,
    SHORTEST,
    Factors,
    factor_at,
    factor_history_s,
    settlement_factors,
)
from app.refresher.volatility.sigma import (
    HORIZON_S,
    MIN_RETURNS,
    PRIOR_HORIZONS,
    SCALE_BOUNDS,
    SIGMA_WINDOW_S,
    SecondGrid,
    horizon_scale,
    second_grid,
    sigma_one_second,
)

__all__ = [
    "BLOCK_S",
    "DISTANCE_QUANTILES",
    "FACTOR_HORIZONS",
    "FACTOR_RANGE",
    "FACTOR_TOLERANCE",
    "FAST_SIGNIFICANCE",
    "FAST_WINDOW_S",
    "HORIZON_S",
    "INFLATION_CAP",
    "JUMP_SIGMAS",
    "LAGS",
    "LONG_HORIZONS",
    "MIN_PSEUDO_S",
    "MIN_RETURNS",
    "PRIOR_BLOCKS",
    "PRIOR_HORIZONS",
    "PRIOR_SPANS",
    "PSEUDO_STEP_S",
    "RHO_ERRORS",
    "RHO_WINDOW_S",
    "RULES",
    "SCALE_BOUNDS",
    "SHORTEST",
    "SIGMA_WINDOW_S",
    "U_CAP",
    "Factors",
    "History",
    "SecondGrid",
    "Volatility",
    "autocorrelations",
    "estimate",
    "factor_at",
    "factor_history_s",
    "history",
    "horizon_scale",
    "second_grid",
    "settlement_factors",
    "sigma_one_second",
]
