"""Scores of probabilities against outcomes: Brier score, log loss, reliability bins."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

CLIP = 1e-4
BINS = 10


def brier(p: float, o: int) -> float:
    """(p - o)², o = 1 for UP."""
    return (p - o) ** 2


def log_loss(p: float, o: int) -> float:
    """-log of the probability given to what happened (natural log, p clipped)."""
    p = min(max(p, CLIP), 1 - CLIP)
    return -math.log(p if o == 1 else 1 - p)


def mean_scores(pairs: Sequence[tuple[float, int]]) -> dict[str, float | None]:
    """Mean Brier score and log loss of (p, o) pairs (None for none)."""
    if not pairs:
        return {"brier": None, "logLoss": None}
    n = len(pairs)
    return {
        "brier": math.fsum(brier(p, o) for p, o in pairs) / n,
        "logLoss": math.fsum(log_loss(p, o) for p, o in pairs) / n,
    }


def reliability(pairs: Sequence[tuple[float, int]], bins: int = BINS) -> list[dict[str, Any]]:
    """``bins`` equal bins of p over [0, 1] (the last includes 1): count, mean p, observed
    frequency of UP (None in an empty bin)."""
    members: list[list[tuple[float, int]]] = [[] for _ in range(bins)]
    for p, o in pairs:
        members[min(int(p * bins), bins - 1)].append((p, o))
    table = []
    for i, inside in enumerate(members):
        n = len(inside)
        table.append(
            {
                "lo": i / bins,
                "hi": (i + 1) / bins,
                "n": n,
                "meanP": math.fsum(p for p, _ in inside) / n if n else None,
                "observed": sum(o for _, o in inside) / n if n else None,
            }
        )
    return table


def overall(buckets: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The model's and the market's mean scores over every checkpoint that has both (each
    bucket's ``both``: the same checkpoints, so the two compare), and which did better by
    log loss (``model``, ``market``, or None with nothing to compare or a tie)."""
    n = sum(b["both"]["n"] for b in buckets)
    found: dict[str, Any] = {"n": n}
    for side in ("model", "market"):
        found[side] = {
            name: (
                math.fsum(b["both"][side][name] * b["both"]["n"] for b in buckets if b["both"]["n"])
                / n
                if n
                else None
            )
            for name in ("brier", "logLoss")
        }
    model, market = found["model"]["logLoss"], found["market"]["logLoss"]
    found["better"] = None
    if model is not None and market is not None and model != market:
        found["better"] = "model" if model < market else "market"
    return found
