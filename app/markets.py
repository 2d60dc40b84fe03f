"""The markets' domain: the 5-minute window every up/down market settles over.

It imports nothing of the package, so the web app, the refresher, calibration and the backtest
all import it downwards.
"""

from __future__ import annotations

import math

WINDOW_S = 300


def window_start(t: float) -> int:
    """Start (unix seconds) of the 5-minute window containing ``t``: floor, never ceil."""
    return math.floor(t / WINDOW_S) * WINDOW_S
