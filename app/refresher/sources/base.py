"""What every source shares: the 5-minute window and the ``Source`` protocol."""

from __future__ import annotations

import math
from typing import Protocol

WINDOW_S = 300


def window_start(t: float) -> int:
    """Start (unix seconds) of the 5-minute window containing ``t``: floor, never ceil."""
    return math.floor(t / WINDOW_S) * WINDOW_S


class Source(Protocol):
    """A producer of board rows."""

    name: str
    model_p_up: float | None  # the model's own P(up) behind the last row (not rounded)

    def winners(self) -> dict[str, bool]:
        """Token id -> won, for the markets whose resolution the source has seen."""

    def rows(self, now: float) -> list[dict[str, object]]:
        """The board rows as of ``now`` (unix seconds), each with its own ``ts`` (epoch ms)."""
