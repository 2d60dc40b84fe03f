"""The embedded bus: one process, no server; the refresher runs inside the web process."""

from __future__ import annotations

from collections import deque

from app.board.snapshot import Snapshot
from app.bus.base import HISTORY_MS, Listener
from app.bus.receiver import SnapshotHolder, after, sample

STATUS = "embedded: in-process board bus (memory://), no Redis in use"


class MemoryBoardBus:
    """Boards are handed over in memory; the same validation as the Redis path applies."""

    embedded = True

    def __init__(self) -> None:
        self._holder = SnapshotHolder()
        self._history: deque[Snapshot] = deque()

    def publish(self, board_json: str, fence: str | None = None) -> None:
        """Validate and keep the board, as a worker receiving it from Redis would (one
        process, one refresher: there is no lease to check ``fence`` against)."""
        if self._holder.accept(board_json) and self._holder.snapshot is not None:
            newest = self._holder.snapshot
            self._history.append(newest)
            while self._history[0].seq < newest.seq - HISTORY_MS:
                self._history.popleft()

    def history(self, after_seq: int, count: int | None = None) -> list[Snapshot] | None:
        """The boards after ``after_seq`` when it is still held (the last ``HISTORY_MS``),
        the first ``count`` of them when given."""
        held = list(self._history)  # a copy: the refresher thread appends meanwhile
        missed = after(held, after_seq)
        return missed if missed is None or count is None else missed[:count]

    def sampled(self, since_seq: int, until_seq: int, step_ms: int) -> list[Snapshot]:
        """The first board held of each ``step_ms`` from ``since_seq`` to ``until_seq``."""
        return sample(list(self._history), since_seq, until_seq, step_ms)

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
