"""A stand-in for the settlement feed: Chainlink BTC/USD, one point a second, as RTDS relays it.

Unlike an exchange's trades the real feed is SMOOTHED (../shared/upstream.md, "The BTC
price and the price to beat"): its 1-second returns are positively autocorrelated at lags
1-3, its variance per second nearly doubles from 1 s to 60 s, its tails are fat, some seconds
do not move, and its points arrive 1.3-1.6 s late with about 2 % of the seconds missing.

``SettlementFeedPath`` reproduces that from a seed, in three layers (docs/model.md, "The
settlement-feed stand-in", states each parameter and the figure it reproduces):

1. a latent log-price: Gaussian steps under a stochastic volatility (two log-normal
   Ornstein-Uhlenbeck factors: hours-long and minutes-long regimes), busier seconds just after
   each minute's turn, and compound-Poisson Gaussian jumps;
2. the feed: a mix of the latent price and two exponential moving averages of it (one of
   about a second, one of about twenty), which gives the lag 1-3 autocorrelation and the
   growth of the variance ratio; now and then the feed repeats its last value for a few
   seconds and then catches up;
3. the relay: each second's point arrives after a log-normal lag, or not at all (gaps: mostly
   single seconds, about 100 a day of 3 s or more, heavy-tailed).

Values (layer 2) behave like ``BrownianPath``'s: Decimals quantized to 1e-8, exact TWAPs,
generated lazily, the same seed giving the same path; layer 3 is read with ``arrival_lag``,
``missing`` and ``arrivals`` and never changes the values.

    python -m harness.settlement_feed [--days 3] [--seed 1]   # the figures against the targets
"""

from __future__ import annotations

import math
import random
import threading
from dataclasses import dataclass
from decimal import Decimal

from harness.paths import SeededPath

FEED_SIGMA = 7.5e-5  # per sqrt-second over minutes: a 1 s sd of about 0.5 bp times sqrt(2.15)


@dataclass(frozen=True)
class FeedParams:
    """The stand-in's parameters; the defaults are fitted to the measured real days."""

    # Layer 2, the smoothing: feed = direct * latent + fast * EMA_fast + (rest) * EMA_slow,
    # each EMA of the latent up to the previous second (weights sum to 1, so the long-run
    # variance is the latent's: ``sigma``).
    direct: float = 0.62
    fast_weight: float = 0.29
    fast_decay: float = 0.40  # per second: a mean lag of 0.7 s
    slow_decay: float = 0.94  # per second: a mean lag of 16 s
    # Layer 1, the volatility: exp of two OU factors (sd of the log, time constant).
    vol_slow_sd: float = 0.25
    vol_slow_s: float = 6 * 3600.0
    vol_fast_sd: float = 0.32
    vol_fast_s: float = 600.0
    # Jumps: a Poisson rate per second and their share of the latent's variance.
    jump_rate: float = 0.0035
    jump_share: float = 0.22
    # Seconds of the minute whose latent moves are ``minute_boost`` times as large (sd).
    minute_seconds: tuple[int, ...] = (1, 2, 3)
    minute_boost: float = 1.45
    # Repeats: a run of repeated values starts with this chance a second, goes on with the next.
    hold_start: float = 0.04
    hold_continue: float = 0.30
    # Layer 3, the relay: lag = median * exp(log_sd * N(0, 1)), seconds after the stamp.
    lag_median_s: float = 1.45
    lag_log_sd: float = 0.20
    # Gaps: a gap starts with this chance a second; a share are long (3 s or more: Pareto).
    gap_start: float = 0.012
    gap_long_share: float = 0.09
    gap_pareto_alpha: float = 1.5
    gap_max_s: int = 600

    def __post_init__(self) -> None:
        smooth = 1 - self.direct - self.fast_weight
        if min(self.direct, self.fast_weight, smooth) < 0:
            raise ValueError("direct and fast_weight must be >= 0 and add up to at most 1")
        if not 0 < self.jump_rate <= 1 or not 0 <= self.jump_share < 1:
            raise ValueError("jump_rate must be in (0, 1] and jump_share in [0, 1)")


class SettlementFeedPath(SeededPath):
    """A seeded settlement-feed path on whole seconds [start_s, start_s + seconds].

    ``sigma`` is the long-horizon volatility per sqrt-second (the 1-second returns have about
    ``sigma / sqrt(2.15)``); ``params`` the stand-in's parameters; ``moves``: log moves of the
    latent added at given epoch seconds (honest jumps a test plays; the feed follows them
    over the next seconds). The same arguments give the same path, values and arrivals
    alike; reads are thread safe.
    """

    def __init__(
        self,
        seed: int,
        sigma: float,
        s0: float | Decimal | str,
        start_s: int,
        seconds: int,
        params: FeedParams = FeedParams(),
        moves: dict[int, float] | None = None,
    ) -> None:
        super().__init__(seed, sigma, s0, start_s, seconds)
        self.params = params
        # Moves put in by hand (a test's honest jumps): epoch second -> log move of the latent.
        self._moves = dict(moves or {})
        self._random = random.Random(seed)  # reproducible by design: the seed is the path
        p = params
        boosted = len(p.minute_seconds)
        # Scales so that the mean variance per second of the latent is sigma^2 over a minute.
        minute_mean = (boosted * p.minute_boost**2 + 60 - boosted) / 60
        diffusion = sigma**2 * (1 - p.jump_share) / minute_mean
        self._diffusion_sd = math.sqrt(diffusion)
        self._boost_sd = p.minute_boost * self._diffusion_sd
        # The jumps' sd, so that they carry ``jump_share`` of the variance.
        self._jump_scale = sigma * math.sqrt(p.jump_share / p.jump_rate)
        self._vol_mean_log = -(p.vol_slow_sd**2 + p.vol_fast_sd**2)  # E[exp(2 v)] = 1
        self._slow_keep = math.exp(-1 / p.vol_slow_s)
        self._fast_keep = math.exp(-1 / p.vol_fast_s)
        # AR(1) shocks that keep each factor's stationary sd at its parameter.
        self._slow_shock = p.vol_slow_sd * math.sqrt(1 - self._slow_keep**2)
        self._fast_shock = p.vol_fast_sd * math.sqrt(1 - self._fast_keep**2)
        self._slow = self._random.gauss(0.0, p.vol_slow_sd)  # start in a stationary state
        self._fast = self._random.gauss(0.0, p.vol_fast_sd)
        self._latent = 0.0
        self._ema_fast = 0.0
        self._ema_slow = 0.0
        self._shown = 0.0  # the feed's log value at the last generated second
        self._latents = [0.0]  # the latent log price of each generated second: what leads
        self._holding = False
        self._arrivals = _Arrivals(random.Random(f"{seed}:arrivals"), p)

    def _next_log(self) -> float:
        p, rng = self.params, self._random
        second = (self.start_s + len(self._values)) % 60
        self._slow = self._slow_keep * self._slow + rng.gauss(0.0, self._slow_shock)
        self._fast = self._fast_keep * self._fast + rng.gauss(0.0, self._fast_shock)
        sd = self._boost_sd if second in p.minute_seconds else self._diffusion_sd
        vol = math.exp(self._slow + self._fast + self._vol_mean_log)
        step = rng.gauss(0.0, sd * vol) + self._moves.get(self.start_s + len(self._values), 0.0)
        if rng.random() < p.jump_rate:
            # Scaled by the slow (day-level) factor only: a day's kurtosis then stays near the
            # measured 36-68 (scaled by both factors, or Laplace-sized, it swung from 40 to 260).
            step += rng.gauss(0.0, self._jump_scale * math.exp(self._slow - p.vol_slow_sd**2))
        # The EMAs hold the latent up to the previous second: the feed trails the latent.
        self._ema_fast = p.fast_decay * self._ema_fast + (1 - p.fast_decay) * self._latent
        self._ema_slow = p.slow_decay * self._ema_slow + (1 - p.slow_decay) * self._latent
        self._latent += step
        self._latents.append(self._latent)
        smooth = 1 - p.direct - p.fast_weight
        feed = p.direct * self._latent + p.fast_weight * self._ema_fast + smooth * self._ema_slow
        chance = p.hold_continue if self._holding else p.hold_start
        self._holding = rng.random() < chance
        if not self._holding:  # a repeat keeps the last value; the next second catches up
            self._shown = feed
        return self._shown

    def add_move(self, t: int, log_move: float) -> None:
        """Move the latent by ``log_move`` at epoch second ``t`` (an honest jump a test
        plays), which must not be generated yet."""
        with self._lock:
            if t - self.start_s < len(self._values):
                raise ValueError(f"second {t} is already generated: too late to move it")
            self._moves[t] = self._moves.get(t, 0.0) + log_move

    def latent(self, t: int) -> Decimal:
        """The latent price at second ``t``, before the feed smooths it: what an exchange
        shows at once (the feed follows it over the next seconds)."""
        index = self._index(t)
        return Decimal(self._s0 * math.exp(self._latents[index])).quantize(Decimal("1e-8"))

    def log_values(self, a: int, b: int) -> list[float]:
        """log(value / s0) of every second in [a, b], as floats (for statistics)."""
        self._index(b)
        first = self._index(a)
        return [math.log(float(v) / self._s0) for v in self._values[first : first + b - a + 1]]

    def realised_sigma(self, a: int, b: int, horizon: int = 60) -> float:
        """The volatility per sqrt-second the path had over [a, b], from its ``horizon``-second
        moves (60 s: where the smoothing no longer hides variance, unlike 1 s moves)."""
        logs = self.log_values(a, b)
        moves = [y - x for x, y in zip(logs[::horizon], logs[horizon::horizon], strict=False)]
        if not moves:
            raise ValueError(f"[{a}, {b}] is shorter than one {horizon} s move")
        return math.sqrt(math.fsum(m * m for m in moves) / len(moves) / horizon)

    def arrival_lag(self, t: int) -> float | None:
        """Seconds from second ``t``'s stamp to its point's arrival on RTDS; None when RTDS
        relays no point of that second (a gap)."""
        self._index(t)  # the bounds are the path's
        return self._arrivals.lag(t - self.start_s)

    def missing(self, t: int) -> bool:
        """Whether RTDS relays no point of second ``t``."""
        return self.arrival_lag(t) is None

    def arrivals(self, a: int, b: int) -> list[tuple[int, float, Decimal]]:
        """(stamp in epoch ms, arrival in epoch s, value) of every point relayed for the
        seconds in [a, b], in stamp order (arrivals may cross: sort by arrival to replay)."""
        out = []
        for t in range(a, b + 1):
            lag = self.arrival_lag(t)
            if lag is not None:
                out.append((t * 1000, t + lag, self.value(t)))
        return out


class _Arrivals:
    """Layer 3, lazily per second: a lag, or None for a second RTDS never relays."""

    def __init__(self, rng: random.Random, params: FeedParams) -> None:
        self._random = rng
        self._params = params
        self._lags: list[float | None] = []
        self._gap_left = 0  # seconds still missing in the gap under way
        self._lock = threading.Lock()

    def lag(self, index: int) -> float | None:
        """The lag of the ``index``-th second of the path (generated up to it on first use)."""
        with self._lock:
            while len(self._lags) <= index:
                self._lags.append(self._next())
            return self._lags[index]

    def _next(self) -> float | None:
        p, rng = self._params, self._random
        if self._gap_left == 0 and rng.random() < p.gap_start:
            if rng.random() < p.gap_long_share:
                # Heavy-tailed outages: most a few seconds, some minutes (387 s was seen).
                extra = int(2 * (rng.paretovariate(p.gap_pareto_alpha) - 1))
                self._gap_left = min(p.gap_max_s, 3 + extra)
            else:
                self._gap_left = 1 if rng.random() < 0.8 else 2
        if self._gap_left > 0:
            self._gap_left -= 1
            return None
        return p.lag_median_s * math.exp(p.lag_log_sd * rng.gauss(0.0, 1.0))


DAY_S = 86_400


def measure_day(path: SettlementFeedPath, first_s: int) -> dict[str, float]:
    """Every figure of ``feed_stats.TARGETS`` on the day of ``path`` from second ``first_s``,
    measured as on the real days (points as relayed, the last one carried forward)."""
    from harness import feed_stats

    last = first_s + DAY_S - 1
    lags = [path.arrival_lag(t) for t in range(first_s, last + 1)]
    grid = feed_stats.carried(path.log_values(first_s, last), [lag is not None for lag in lags])
    return feed_stats.day_figures(grid, first_s) | feed_stats.arrival_figures(lags)


def main(argv: list[str] | None = None) -> int:
    """Print each figure of ``--days`` generated days beside its measured range."""
    import argparse

    from harness.feed_stats import TARGETS

    parser = argparse.ArgumentParser(
        prog="python -m harness.settlement_feed", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--days", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--sigma", type=float, default=FEED_SIGMA)
    args = parser.parse_args(argv)
    start = 1_800_000_000 - 1_800_000_000 % DAY_S
    path = SettlementFeedPath(args.seed, args.sigma, 100_000, start, args.days * DAY_S)
    days = [measure_day(path, start + d * DAY_S) for d in range(args.days)]
    head = " ".join(f"{'day ' + str(d + 1):>8}" for d in range(args.days))
    print(f"{'figure':<16} {'measured':>13} {head} {'mean':>8}  days in range")
    for name, (low, high) in TARGETS.items():
        values = [day[name] for day in days]
        inside = sum(low <= v <= high for v in values)
        cells = " ".join(f"{v:>8.3f}" for v in values)
        mean = sum(values) / len(values)
        print(f"{name:<16} {low:>6.3g}-{high:<6.3g} {cells} {mean:>8.3f}  {inside}/{args.days}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
