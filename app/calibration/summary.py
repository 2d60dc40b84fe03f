"""Scores of a set of windows: per time left, and the model's reliability.

``per_window`` is a list of ``{"outcome": "up" | "down" | None, "checkpoints": [{"remS",
"pUp", "marketMid"}, ...]}``; windows without an outcome are not scored.
"""

from __future__ import annotations

from typing import Any

from app.calibration import outcomes, scores
from app.calibration.checkpoints import REMS


def summarize(per_window: list[dict[str, Any]], rems: tuple[int, ...] = REMS) -> dict[str, Any]:
    """``buckets`` (per time left, at ``rems``: the window length's checkpoints), ``overall``
    (``scores.overall``), ``reliability`` (of the model) and ``reliabilityMarket`` (of the
    market's UP mid, at the same checkpoints)."""
    table = buckets(per_window, rems)
    return {
        "buckets": table,
        "overall": scores.overall(table),
        "reliability": scores.reliability(pairs(per_window, "pUp", rems)),
        "reliabilityMarket": scores.reliability(pairs(per_window, "marketMid", rems)),
    }


def _points(per_window: list[dict[str, Any]], rem: int) -> list[tuple[dict[str, Any], int]]:
    found: list[tuple[dict[str, Any], int]] = []
    for window in per_window:
        if window["outcome"] is None:
            continue
        o = 1 if window["outcome"] == outcomes.UP else 0
        found.extend((c, o) for c in window["checkpoints"] if c["remS"] == rem)
    return found


def buckets(per_window: list[dict[str, Any]], rems: tuple[int, ...] = REMS) -> list[dict[str, Any]]:
    """Per rem of ``rems``: the model's and the market's scores, and the model's minus the
    market's over the windows that have both."""
    table = []
    for rem in rems:
        points = _points(per_window, rem)
        model = [(c["pUp"], o) for c, o in points if c["pUp"] is not None]
        market = [(c["marketMid"], o) for c, o in points if c["marketMid"] is not None]
        both = [(c, o) for c, o in points if c["pUp"] is not None and c["marketMid"] is not None]
        m = scores.mean_scores([(c["pUp"], o) for c, o in both])
        k = scores.mean_scores([(c["marketMid"], o) for c, o in both])
        difference: dict[str, float | None] = {}
        for name in ("brier", "logLoss"):
            mine, theirs = m[name], k[name]
            difference[name] = mine - theirs if mine is not None and theirs is not None else None
        table.append(
            {
                "remS": rem,
                "n": len(model),
                "model": scores.mean_scores(model),
                "nMarket": len(market),
                "market": scores.mean_scores(market),
                "difference": {**difference, "n": len(both)},
                "both": {"n": len(both), "model": m, "market": k},
            }
        )
    return table


def pairs(
    per_window: list[dict[str, Any]], field: str, rems: tuple[int, ...] = REMS
) -> list[tuple[float, int]]:
    """(``field``: ``pUp`` or ``marketMid``, outcome) at every checkpoint (of ``rems``) of
    every window with an outcome, where it has a value."""
    return [
        (c[field], o) for rem in rems for c, o in _points(per_window, rem) if c[field] is not None
    ]
