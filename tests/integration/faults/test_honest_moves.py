"""Honest fast moves on a realistic world (issue 48, points 3 and 6): the board stays fresh
through them, whichever witness is silent.

The stage is ``staged(feed=True)``: the Chainlink spot is the settlement-feed stand-in
(smoothed, trailing its latent price by a second or two, as the real feed trails Binance),
its TWAP reports honest, and the exchange price the LATENT price at once, at a wandering
basis with noise of its own (``harness.exchange_view``). Three honest moves of 0.3 % within
2 s each are played, 5 s apart; through them the spot and the exchange price part by up to about ten
basis points for a few seconds while the feed catches up. Sampled four times a second:
never fresh and wrong, fresh and right on at least ``FRESH_SHARE`` of the samples, and
fresh and right within 10 s after. With every source, with the TWAP reports silent (the
exchange judges alone) and with the exchange silent (the reports judge alone).
"""

from __future__ import annotations

import pytest

from tests.support.upstream_faults import budget, staged

FRESH_SHARE = 0.8  # the target through honest fast moves
MOVE = 0.003  # 0.3 %, over two seconds
JUMPS = {2: MOVE, 7: -MOVE, 12: MOVE}  # seconds after the warm-up -> the move
WATCH_S = 16.0  # through the three moves and 3 s after the last (each test within 30 s)
START_S = 20.0  # a silent exchange leaves warm_up nothing to learn: fresh within this
RECOVERY_S = 10.0  # the bound after a fault's end


@pytest.mark.parametrize("silent", ["none", "twap-reports", "exchange"])
def test_honest_fast_moves_keep_the_row_fresh(silent: str) -> None:
    """The issue saw 7 % stale and 2 fresh-and-wrong samples through three such moves (a
    move across a hole of refused points read as one second's return)."""
    with staged(budget(WATCH_S), feed=True) as stage:
        stage.start_with_silent(silent, START_S)
        stage.play_jumps(JUMPS)
        samples = stage.hold(WATCH_S, f"honest moves of 0.3 % in 2 s, {silent} silent")
        fresh = sum(s.fresh_and_right for s in samples) / len(samples)
        assert fresh >= FRESH_SHARE, f"fresh and right {fresh:.0%} of {len(samples)} samples"
        stage.recovers("the moves over", RECOVERY_S)
