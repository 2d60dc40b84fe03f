"""What every source shares: the ``Source`` protocol (the window is ``app.markets``')."""

from __future__ import annotations

from typing import Protocol

from app.board.row import BoardRow

__all__ = ["Source"]


class Source(Protocol):
    """A producer of board rows."""

    name: str

    def winners(self) -> dict[str, bool]:
        """Token id -> won, for the markets whose resolution the source has seen."""

    def rows(self, now: float) -> list[BoardRow]:
        """The board rows as of ``now`` (unix seconds), one per market in ``SYMBOLS`` order,
        each with its own ``ts`` (epoch ms)."""
