"""A source's signal that an input which changes the board has arrived.

The feeds call ``notify`` (a new top of book on either side, a new price point, a new market
or price to beat); the refresher waits on it to publish at once instead of at the next tick
(``app.refresher.loop``). ``newest_ms`` is when the newest such input arrived (the service's
wall clock, ``app.board.timefmt.now_ms``, epoch ms): every board carries it, so a client can
measure the service's own delay.
"""

from __future__ import annotations

import threading

from app.board.timefmt import now_ms


class Changes:
    """Set by any thread that brings a change; waited on and cleared by the refresher."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self.newest_ms: int | None = None

    def notify(self) -> None:
        """An input that changes the board has just arrived."""
        self.newest_ms = now_ms()
        self._event.set()

    @property
    def pending(self) -> bool:
        """Whether a change has arrived since the last ``clear``."""
        return self._event.is_set()

    def wait(self, timeout: float) -> bool:
        """True as soon as a change is pending (at most ``timeout`` seconds)."""
        return self._event.wait(max(0.0, timeout))

    def clear(self) -> None:
        """Everything notified so far is about to be in a board."""
        self._event.clear()
