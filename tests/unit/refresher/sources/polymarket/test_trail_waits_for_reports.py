"""A lie inside a move is not believed on the exchange's trail alone while the TWAP reports
arrive but cannot judge yet (the CI flake of ``test_a_spot_drifting_away_at_3_bp_a_second``,
docs/tests.md, d11ee15: under load the drift began just after a fall of the path, seconds
after the start, and its first second was believed on the exchange's trail).

The world of the fakes: the exchange price is the spot times a basis, in the same second, so
the witness's bound is its floor (0.02 bp). The spot's smoothing is not learnt (40 pairs:
about a minute), and the TWAP reports have arrived for a few seconds only: their shift (the
exact verdict) is not learnt either. The exchange falls 3 bp at second 31 and the spot says
1 bp above the true level: 1 bp off at its stamp (DISAGREES), inside the range of the
exchange's last 2.5 s (TRAILS). Before the fix, with the exact verdict NONE, TRAILS meant
AGREES: the drifted point was believed and a row showed it fresh. With the reports silent
(no report ever came, as in the honest-moves test with the reports paused), the trail's
lenience stays: a smoothed spot behind a fast move keeps the row fresh.

Clock-driven (a ``_Clock`` set by hand), no real seconds.
"""

from __future__ import annotations

import math

import pytest

from app.markets import MARKETS
from app.refresher.sources.polymarket.price_series import SPOT_HISTORY_S, PriceSeries
from app.refresher.sources.polymarket.smoothing import SmoothingKernel
from app.refresher.sources.polymarket.twap_witness import TwapWitness
from app.refresher.sources.polymarket.witness import ExchangeWitness, Verdict

T0 = 1_800_000_000
BTC = 100_000.0
BASIS = 0.9997  # exchange / spot, as the fakes send it
UNREACHED = 10**6  # pairs a smoothing needs before it is used: never, within a test
FALL = 3e-4  # the exchange's move at second 31: 3 bp, inside a second's honest range
LIE = 1e-4  # the spot's lie: 1 bp above the true level (the drift's first second)


class _Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def _ms(t: float) -> int:
    return int((T0 + t) * 1000)


def _walk(t: float) -> float:
    """A spot that moves every second: +-$7 around BTC, never the same value twice in a row."""
    return BTC + 7.0 * math.sin(t) + 0.01 * t


@pytest.mark.parametrize("reports", ["arriving", "silent"])
def test_a_lie_inside_a_move_waits_for_reports_that_arrive_but_cannot_judge_yet(
    reports: str,
) -> None:
    clock = _Clock(T0)
    witness = ExchangeWitness("btcusdt", clock, SmoothingKernel(min_rows=UNREACHED))
    twap = TwapWitness("crypto_prices_twap_sixty", 60, clock)
    series = PriceSeries(
        SPOT_HISTORY_S,
        clock,
        witness=witness,
        window_move=MARKETS["BTC"].window_move,
        twaps=(twap,),
    )

    def second(t: int, exchange: float, spot: float) -> None:
        """One second as the feed hands it over: the exchange price, the spot point, then
        (``arriving``) the 60 s report of that second: any plausible mean, it cannot judge
        before its shift is learnt."""
        clock.t = T0 + t
        witness.add(_ms(t), round(exchange * BASIS, 2))
        series.offer(_ms(t), spot)
        if reports == "arriving" and t >= 27:
            twap.report(_ms(t), BTC)
        series.settle()

    for t in range(31):  # the basis learnt on 31 true seconds; the reports for the last 4
        second(t, _walk(t), _walk(t))
    assert witness.learned
    assert twap.shift() is None  # the exact verdict is not learnt: NONE

    level = _walk(31) * (1 - FALL)  # the true spot of second 31: the exchange fell 3 bp
    clock.t = T0 + 31
    witness.add(_ms(31), round(level * BASIS, 2))
    lie = level * (1 + LIE)
    assert witness.judge(_ms(31), lie)[0] is Verdict.TRAILS  # the trail's lenience applies
    assert series.offer(_ms(31), lie) is None
    if reports == "arriving":
        twap.report(_ms(31), BTC)
    series.settle()

    if reports == "arriving":
        # The reports will judge: the lie waits for them (the row ages), never believed.
        assert series.latest() == (_ms(30), _walk(30))
        assert series.waiting() == 1
    else:
        # No report will ever speak: the trail's lenience (a smoothed spot behind a move).
        assert series.latest() == (_ms(31), lie)
