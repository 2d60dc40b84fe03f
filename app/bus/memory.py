"""The embedded bus: one process, no server; the refresher runs inside the web process."""

from __future__ import annotations

from app.board.snapshot import Snapshot
from app.bus.base import Listener
from app.bus.receiver import SnapshotHolder

STATUS = "embedded: in-process board bus (memory://), no Redis in use"


class MemoryBoardBus:
    """Boards are handed over in memory; the same validation as the Redis path applies."""

    embedded = True

    def __init__(self) -> None:
        self._holder = SnapshotHolder()

    def publish(self, board_json: str) -> None:
        """Validate and keep the board, as a worker receiving it from Redis would."""
        self._holder.accept(board_json)

    def latest(self) -> Snapshot | None:
        """The newest board published in this process."""
        return self._holder.snapshot

    def add_listener(self, listener: Listener) -> None:
        """Call ``listener`` with every new board."""
        self._holder.add_listener(listener)

    def status(self) -> tuple[bool, str]:
        """Always ready: there is nothing to connect to."""
        return True, STATUS

    def start(self) -> None:
        """Nothing to start."""

    def close(self) -> None:
        """Nothing to release."""
