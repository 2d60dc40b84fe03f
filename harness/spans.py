"""The contract's 5-minute window, by the names the stand-ins, tests and benches use.

The service itself reads every window kind from ``app.markets.SPANS``; these are its default
kind's figures for code that plays or checks 5-minute windows only.
"""

from __future__ import annotations

from app.markets import DEFAULT_SPAN, SPANS

FIVE_MINUTES = DEFAULT_SPAN
WINDOW_S = DEFAULT_SPAN.seconds


def window_start(t: float) -> int:
    """Start (unix seconds) of the 5-minute window containing ``t``: floor, never ceil."""
    return DEFAULT_SPAN.start(t)


# The checkpoints of every kind served, by its name (``Span.rems``).
REMS_OF_WINDOW = {name: span.rems for name, span in SPANS.items() if span.served}
