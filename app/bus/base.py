"""What every bus backend offers: the ``BoardBus`` protocol and its listeners."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from app.board.snapshot import Snapshot

Listener = Callable[[Snapshot], None]
# How long a bus keeps the boards it published, for streams that reconnect (Last-Event-ID).
HISTORY_MS = 120_000


class PublishRefusedError(Exception):
    """The bus refused a fenced publish: the lease is not the publisher's (``reason`` "lease"),
    or the board's ``seq`` is not above the last one published (``reason`` "seq"; ``bus_seq``
    says where the bus is)."""

    def __init__(self, reason: str, bus_seq: int = 0) -> None:
        super().__init__(f"publish refused ({reason}); the bus is at seq {bus_seq}")
        self.reason = reason
        self.bus_seq = bus_seq


class BoardBus(Protocol):
    """What the refresher and the web workers need from a bus backend."""

    embedded: bool

    def publish(self, board_json: str, fence: str | None = None) -> None:
        """Store ``board_json`` as the latest board and announce it (refresher side).

        With ``fence`` (the leader's lease token), only if that lease is held and the
        board's seq is above the last one published, checked atomically with the write;
        ``PublishRefusedError`` otherwise."""

    def latest(self) -> Snapshot | None:
        """The newest validated board this process holds, or None before any arrives."""

    def add_listener(self, listener: Listener) -> None:
        """Call ``listener`` with every new snapshot this process receives."""

    def history(self, after_seq: int, count: int | None = None) -> list[Snapshot] | None:
        """The boards published after the one numbered ``after_seq``, oldest first, when that
        one is still in the history (``HISTORY_MS``); None when it is not. With ``count``,
        only the first ``count`` of them (a stream's replay reads no more than its cap)."""

    def sampled(self, since_seq: int, until_seq: int, step_ms: int) -> list[Snapshot]:
        """Boards of the history published from ``since_seq`` to ``until_seq``, oldest first,
        at most one per ``step_ms`` (the first of each step); [] when it cannot be read."""

    def status(self) -> tuple[bool, str]:
        """Readiness of the backend and a short human-readable status text."""

    def start(self) -> None:
        """Begin receiving boards (idempotent; called lazily, after fork)."""

    def close(self) -> None:
        """Stop receiving and release connections."""
