"""The spot's smoothing of the exchange price, learnt live (issue 48, point 3:
``app/refresher/sources/polymarket/smoothing.py`` and its use in ``witness.py``).

Exact answers first: a spot made from an exchange walk by a known smoothing (a share at
once, the rest through an exponential average) gives that smoothing back. Then the witness:
once learnt, an honest spot behind a fast move trails (as long as its average lasts, past
the fixed 2.5 s trail), while a spot frozen at the old level or a lie of the move's size
inside it disagrees.
"""

from __future__ import annotations

import math
import random

import pytest

from app.refresher.sources.polymarket.smoothing import DECAYS, MIN_ROWS, Smoothing, SmoothingKernel
from app.refresher.sources.polymarket.witness import ExchangeWitness, Verdict

T0 = 1_800_000_000
BASIS = -3e-4  # log spot / exchange: the exchange $30 under a $100,000 spot
MOVE = 0.003  # the honest fast move, 0.3 %
QUICK = Smoothing(0.6, 0.4)  # mean lag 0.67 s
SLOW = Smoothing(0.15, 0.8)  # mean lag 4.25 s: most of a move after 2.5 s
PAST = 60  # exchange returns a pair carries (``smoothing.HORIZON``)


def _walk(seconds: int, seed: int, sd: float = 1e-4) -> list[float]:
    """An exchange log price a second (1 bp steps around log 100,000)."""
    rng = random.Random(seed)
    logs = [math.log(100_000.0)]
    for _ in range(seconds - 1):
        logs.append(logs[-1] + rng.gauss(0.0, sd))
    return logs


def _smoothed(ex: list[float], smoothing: Smoothing) -> list[float]:
    """The spot's log (without the basis) each second: ``direct`` of the exchange's, the
    rest its exponential average up to the second before."""
    average, out = ex[0], []
    for t, x in enumerate(ex):
        if t:
            average = smoothing.decay * average + (1 - smoothing.decay) * ex[t - 1]
        out.append(smoothing.direct * x + (1 - smoothing.direct) * average)
    return out


def _returns(logs: list[float], t: int) -> tuple[float, ...]:
    return tuple(logs[t - k] - logs[t - k - 1] for k in range(min(PAST, t)))


def _fitted(smoothing: Smoothing, noise_sd: float, seconds: int = 400) -> SmoothingKernel:
    """A kernel fed the returns of a spot smoothing an exchange walk, the exchange's own
    seen with noise of ``noise_sd`` a second."""
    ex = _walk(seconds, seed=1)
    spot = _smoothed(ex, smoothing)
    rng = random.Random(2)
    seen = [x + rng.gauss(0.0, noise_sd) for x in ex]
    kernel = SmoothingKernel()
    for t in range(PAST + 1, seconds):
        kernel.learn(spot[t] - spot[t - 1], _returns(seen, t))
    return kernel


@pytest.mark.parametrize("smoothing", [QUICK, SLOW], ids=["quick", "slow"])
def test_an_exact_smoothing_is_found(smoothing: Smoothing) -> None:
    kernel = _fitted(smoothing, noise_sd=0.0)
    assert kernel.fitted is not None
    assert kernel.fitted.decay == smoothing.decay
    assert kernel.fitted.direct == pytest.approx(smoothing.direct, abs=1e-6)
    assert kernel.mean_lag_s == pytest.approx(smoothing.mean_lag_s, rel=1e-4)


@pytest.mark.parametrize("smoothing", [QUICK, SLOW], ids=["quick", "slow"])
def test_noise_on_the_exchange_shrinks_the_weights_alike_and_their_sum_restores_them(
    smoothing: Smoothing,
) -> None:
    """0.3 bp of noise on 1 bp steps: scaled to sum to one, the share at once is within 0.05
    of the truth (the noise leans a little toward smoothing) and the decay its neighbour on
    the grid at most."""
    kernel = _fitted(smoothing, noise_sd=3e-5, seconds=660)
    assert kernel.fitted is not None
    assert kernel.fitted.direct == pytest.approx(smoothing.direct, abs=0.05)
    grid = DECAYS.index(smoothing.decay)
    assert kernel.fitted.decay in DECAYS[grid - 1 : grid + 2]


def test_none_before_min_rows_nor_without_a_link_nor_on_a_flat_exchange() -> None:
    ex = _walk(MIN_ROWS + PAST + 2, seed=3)
    rows = [_returns(ex, t) for t in range(PAST + 1, len(ex))]
    kernel = SmoothingKernel()
    for r in rows[: MIN_ROWS - 1]:
        kernel.learn(r[0], r)  # the spot moves as the exchange at once
    assert kernel.fitted is None and kernel.mean_lag_s is None  # one pair short
    kernel.learn(rows[MIN_ROWS - 1][0], rows[MIN_ROWS - 1])
    assert kernel.fitted is not None and kernel.fitted.direct == pytest.approx(1.0)
    unlinked = SmoothingKernel()
    spot = _walk(len(ex), seed=4)  # a walk of its own: no link to the exchange
    for t, r in enumerate(rows, start=PAST + 1):
        unlinked.learn(spot[t] - spot[t - 1], r)
    assert unlinked.fitted is None
    flat = SmoothingKernel()
    for _ in range(MIN_ROWS * 2):
        flat.learn(1e-5, (0.0,) * PAST)
    flat.learn(1e-5, (math.nan,) + (0.0,) * (PAST - 1))  # not finite: ignored
    flat.learn(1e-5, (1e-5,))  # one second of the exchange: nothing to fit on
    assert flat.fitted is None


def _learnt_witness(
    smoothing: Smoothing, learn: bool = True
) -> tuple[ExchangeWitness, list[float], list[float]]:
    """A witness whose basis (and smoothing, if ``learn``) is learnt on 180 s of a spot
    smoothing the exchange walk; returns it, the exchange's and the spot's logs so far."""
    ex = _walk(180, seed=5)
    now = [float(T0)]
    kernel = SmoothingKernel(min_rows=MIN_ROWS if learn else 10**6)
    witness = ExchangeWitness("btcusdt", lambda: now[0], kernel)
    spot = [BASIS + x for x in _smoothed(ex, smoothing)]
    for t, x in enumerate(ex):
        now[0] = T0 + t
        witness.add((T0 + t) * 1000, math.exp(x))
        witness.learn((T0 + t) * 1000, math.exp(spot[t]))
    assert witness.learned and (witness.mean_lag_s is not None) is learn
    return witness, ex, spot


def _stepped(
    witness: ExchangeWitness, ex: list[float], smoothing: Smoothing, move: float, hold: int
) -> tuple[int, list[float]]:
    """The exchange steps by ``move`` and holds for ``hold`` seconds; returns the step's
    index and the spot's logs (the smoothing's, with the basis) through it."""
    start = len(ex)
    for t in range(start, start + hold):
        ex.append(ex[start - 1] + move)
        witness.add((T0 + t) * 1000, math.exp(ex[t]))
    return start, [BASIS + x for x in _smoothed(ex, smoothing)]


@pytest.mark.parametrize("smoothing", [QUICK, SLOW], ids=["quick", "slow"])
@pytest.mark.parametrize("move", [MOVE, -MOVE], ids=["up", "down"])
def test_through_a_fast_move_the_honest_spot_trails_and_a_frozen_or_lying_one_does_not(
    smoothing: Smoothing, move: float
) -> None:
    """The exchange steps 0.3 % and holds 10 s. The spot as the learnt smoothing makes it
    trails (or agrees) every second; a spot frozen at the old level is refused every second
    the honest one has moved half the step (the quick smoothing's: within a second, where the
    fixed trail believed it for 2.5 s), and a lie of the step's size on the honest spot
    always, with the reason."""
    witness, ex, _ = _learnt_witness(smoothing)
    start, spot = _stepped(witness, ex, smoothing, move, hold=10)
    frozen_refused = []
    for t in range(start, len(ex)):
        ms = (T0 + t) * 1000
        verdict = witness.judge(ms, math.exp(spot[t]))[0]
        assert verdict in (Verdict.TRAILS, Verdict.AGREES), (t - start, verdict)
        if abs(spot[t] - spot[start - 1]) >= abs(move) / 2:
            frozen, why = witness.judge(ms, math.exp(spot[start - 1]))
            assert frozen is Verdict.DISAGREES and "btcusdt" in why, (t - start, frozen)
            frozen_refused.append(t - start)
        lie, why = witness.judge(ms, math.exp(spot[t] - move))
        assert lie is Verdict.DISAGREES and "bp from the exchange price" in why, (t - start, lie)
    # Refused from some second on, for good; the quick one's within the fixed trail.
    assert frozen_refused == list(range(frozen_refused[0], 10)), frozen_refused
    assert smoothing is SLOW or frozen_refused[0] <= 1, frozen_refused


@pytest.mark.parametrize("learn", [True, False], ids=["learnt", "fixed-trail"])
def test_a_slow_smoothing_learnt_keeps_a_big_move_believed_past_the_fixed_trail(
    learn: bool,
) -> None:
    """A 1 % step under the slow smoothing: 3 and 8 s after, the honest spot still has 47 %
    and 15 % of it to go (the bound here is about 11 bp). With the smoothing learnt it
    trails; before it is learnt the fixed 2.5 s trail has run out and it is refused."""
    witness, ex, _ = _learnt_witness(SLOW, learn)
    start, spot = _stepped(witness, ex, SLOW, 0.01, hold=10)
    for after in (3, 8):
        verdict = witness.judge((T0 + start + after) * 1000, math.exp(spot[start + after]))[0]
        assert verdict is (Verdict.TRAILS if learn else Verdict.DISAGREES), after
