"""What every bus backend offers: the ``BoardBus`` protocol and its listeners."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from app.board.snapshot import Snapshot

Listener = Callable[[Snapshot], None]
# How long a bus keeps the boards it published, for streams that reconnect (Last-Event-ID).
HISTORY_MS = 120_000


class BoardBus(Protocol):
    """What the refresher and the web workers need from a bus backend."""

    embedded: bool

    def publish(self, board_json: str) -> None:
        """Store ``board_json`` as the latest board and announce it (refresher side)."""

    def latest(self) -> Snapshot | None:
        """The newest validated board this process holds, or None before any arrives."""

    def add_listener(self, listener: Listener) -> None:
        """Call ``listener`` with every new snapshot this process receives."""

    def history(self, after_seq: int) -> list[Snapshot] | None:
        """The boards published after the one numbered ``after_seq``, oldest first, when that
        one is still in the history (``HISTORY_MS``); None when it is not."""

    def status(self) -> tuple[bool, str]:
        """Readiness of the backend and a short human-readable status text."""

    def start(self) -> None:
        """Begin receiving boards (idempotent; called lazily, after fork)."""

    def close(self) -> None:
        """Stop receiving and release connections."""
