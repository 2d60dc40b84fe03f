"""The track record's headline (issue 50, point 2): the model's and the market's scores over
the same checkpoints (those with both a P(up) and a mid), and which did better; the same from
the scores summed in SQL (``totals.score``) equal these (test_calibration_kept.py)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from app.calibration import scores
from app.calibration.summary import summarize

REMS = (240, 60)


def _window(outcome: str, *points: tuple[int, float | None, float | None]) -> dict[str, Any]:
    checkpoints = [{"remS": r, "pUp": p, "marketMid": m} for r, p, m in points]
    return {"outcome": outcome, "checkpoints": checkpoints}


def test_overall_compares_on_the_checkpoints_with_both() -> None:
    windows = [
        _window("up", (240, 0.6, 0.5), (60, 0.9, 0.7)),
        _window("down", (240, 0.3, None), (60, 0.2, 0.4)),  # 240 s: no mid, not compared
        _window("up", (240, None, 0.55)),  # no P(up): not compared
        {"outcome": None, "checkpoints": [{"remS": 60, "pUp": 0.99, "marketMid": 0.01}]},
    ]
    found = summarize(windows, REMS)["overall"]
    pairs = [(0.6, 0.5, 1), (0.9, 0.7, 1), (0.2, 0.4, 0)]
    assert found["n"] == 3
    model = scores.mean_scores([(p, o) for p, _, o in pairs])
    market = scores.mean_scores([(m, o) for _, m, o in pairs])
    for name in ("brier", "logLoss"):
        assert found["model"][name] == pytest.approx(model[name], rel=1e-12)
        assert found["market"][name] == pytest.approx(market[name], rel=1e-12)
    assert found["better"] == "model"  # nearer the outcome at every compared checkpoint


def test_nothing_to_compare_names_no_winner() -> None:
    found = summarize([_window("up", (60, 0.7, None))], REMS)["overall"]
    assert found == {
        "n": 0,
        "model": {"brier": None, "logLoss": None},
        "market": {"brier": None, "logLoss": None},
        "better": None,
    }


def test_the_market_can_win() -> None:
    found = summarize([_window("down", (60, 0.8, 0.3))], REMS)["overall"]
    assert found["better"] == "market"
    assert found["market"]["logLoss"] == pytest.approx(-math.log(0.7))
