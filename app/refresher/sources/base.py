"""What every source shares: the ``Source`` protocol.

The window (``WINDOW_S``, ``window_start``) is ``app.markets``'; it is re-exported here for the
imports that still name this module.
"""

from __future__ import annotations

from typing import Protocol

from app.board.row import BoardRow
from app.markets import WINDOW_S, window_start

__all__ = ["WINDOW_S", "Source", "window_start"]


class Source(Protocol):
    """A producer of board rows."""

    name: str

    def winners(self) -> dict[str, bool]:
        """Token id -> won, for the markets whose resolution the source has seen."""

    def rows(self, now: float) -> list[BoardRow]:
        """The board rows as of ``now`` (unix seconds), one per market in ``SYMBOLS`` order,
        each with its own ``ts`` (epoch ms)."""
