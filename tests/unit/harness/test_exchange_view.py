"""The exchange view beside a settlement-feed stand-in is seeded like its path: the same seed
gives the same prices at the same place in the path, whenever the path starts (a test's
world is set on the wall clock, and its outcome must not depend on the hour it runs)."""

from __future__ import annotations

from harness.exchange_view import ExchangeView
from harness.settlement_feed import SettlementFeedPath

START = 1_796_000_000  # a minute's start: the path's busier seconds fall alike below


def _view(start_s: int) -> ExchangeView:
    return ExchangeView(SettlementFeedPath(5, 7.5e-5, 100_000, start_s, 900), seed=5)


def test_the_same_seed_gives_the_same_prices_wherever_the_path_starts() -> None:
    early, late = _view(START), _view(START + 3_600)
    offsets = [0.0, 0.25, 0.5, 1.75, 59.9, 300.0, 600.5]
    assert [early.value(START + x) for x in offsets] == [
        late.value(START + 3_600 + x) for x in offsets
    ]


def test_each_quarter_second_has_noise_of_its_own() -> None:
    view = _view(START)
    assert len({view.value(START + 10 + q / 4) for q in range(4)}) > 1
