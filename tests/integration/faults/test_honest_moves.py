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

import dataclasses

import pytest

from tests.support.upstream_faults import STEADY, Sample, budget, describe, staged

FRESH_SHARE = 0.8  # the target through honest fast moves
MOVE = 0.003  # 0.3 %, over two seconds
JUMPS = {2: MOVE, 7: -MOVE, 12: MOVE}  # seconds after the warm-up -> the move
WATCH_S = 16.0  # through the three moves and 3 s after the last (each test within 30 s)
START_S = 20.0  # a silent exchange leaves warm_up nothing to learn: fresh within this
RECOVERY_S = 10.0  # the bound after a fault's end
# A feed that smooths more: 15 % of the latent at once, 80 % through an average of mean lag
# 2.4 s (the stand-in fitted to the real days: 62 % at once, mean lag 0.7 s).
SLOW_FEED = dataclasses.replace(STEADY, direct=0.15, fast_weight=0.8, fast_decay=0.75)
LEARN_S = 60.0  # the smoothing is learnt on 40 pairs of believed points a second apart
SLOW_FEED_SHARE = 0.88  # between the fixed trail's 80 % and the learnt smoothing's 92-95 %


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


def _price_problems(sample: Sample) -> list[str]:
    """What is wrong with a sample but its P(up): the exact model the stage checks against
    assumes the fitted feed's small continuation, and a feed that trails more has more (its
    returns go on for seconds after a move, which the board's continuation term reads): the
    row's model is right or wrong there by a standard the stage does not have."""
    return [p for p in sample.problems if not p.startswith("P(up)")]


def test_a_slower_feeds_smoothing_is_learnt_live_and_keeps_the_row_fresh() -> None:
    """The exchange judges alone (TWAP reports silent) a feed that trails more than the fixed
    2.5 s trail allows for, through three honest moves of 1 % in 2 s. Once its smoothing is
    learnt the row is fresh with a true price, the books and the market right (P(up):
    ``_price_problems``) on at least ``SLOW_FEED_SHARE`` of the samples (92-95 %), never fresh
    with a wrong one. The fixed trail alone gave 80 %, a smoothing of six free weights 51 %
    (the average's tail beyond six seconds read as over)."""
    move = 0.01
    with staged(budget(LEARN_S, WATCH_S), feed=True, feed_params=SLOW_FEED) as stage:
        stage.start_with_silent("twap-reports", START_S)
        lags = stage.learns_smoothing(LEARN_S)
        stage.play_jumps({s: m / MOVE * move for s, m in JUMPS.items()})
        samples = stage.watch(WATCH_S)
        wrong = [s for s in samples if s.fresh and _price_problems(s)]
        assert not wrong, [describe(s, stage.began) for s in wrong[:2]]
        fresh = sum(s.fresh for s in samples) / len(samples)
        assert fresh >= SLOW_FEED_SHARE, f"fresh {fresh:.0%} of {len(samples)} (lags {lags})"
        back = stage.watch(RECOVERY_S, until=lambda newest: newest.fresh)
        assert back[-1].fresh and not _price_problems(back[-1]), describe(back[-1], stage.began)
