"""What both backends do with an incoming board: validate it, keep it, tell listeners."""

from __future__ import annotations

import logging

from app.board.snapshot import Snapshot, parse_snapshot
from app.bus.base import Listener

log = logging.getLogger(__name__)


class SnapshotHolder:
    """Holds the newest valid snapshot; stale or invalid arrivals are logged and dropped."""

    def __init__(self) -> None:
        self.snapshot: Snapshot | None = None
        self._listeners: list[Listener] = []

    def add_listener(self, listener: Listener) -> None:
        """Register a callback for every accepted snapshot."""
        self._listeners.append(listener)

    def accept(self, raw: bytes | str) -> bool:
        """Validate ``raw`` and keep it if newer than what is held; True when kept."""
        try:
            snapshot = parse_snapshot(raw)
        except (ValueError, TypeError, OverflowError, RecursionError) as exc:
            log.error("dropped an invalid board from the bus: %s", str(exc)[:500])
            return False
        return self.keep(snapshot)

    def keep(self, snapshot: Snapshot) -> bool:
        """Keep an already validated ``snapshot`` if newer than what is held; True when kept."""
        current = self.snapshot
        if current is not None and snapshot.seq <= current.seq:
            return False
        # A single attribute assignment: readers in other threads see old or new, never half.
        self.snapshot = snapshot
        for listener in self._listeners:
            try:
                listener(snapshot)
            except Exception:
                log.exception("a board listener failed")
        return True


def after(held: list[Snapshot], after_seq: int) -> list[Snapshot] | None:
    """The snapshots of ``held`` (oldest first) newer than ``after_seq``, when ``after_seq``
    is one of them; None when it is not (older than the history, or never published)."""
    for i, snapshot in enumerate(held):
        if snapshot.seq == after_seq:
            return held[i + 1 :]
        if snapshot.seq > after_seq:
            return None
    return None


def sample(held: list[Snapshot], since_seq: int, until_seq: int, step_ms: int) -> list[Snapshot]:
    """The first snapshot of ``held`` (oldest first) in each ``step_ms`` from ``since_seq``
    to ``until_seq``: steps counted from ``since_seq``, as Redis's are."""
    kept: list[Snapshot] = []
    for snapshot in held:
        if not since_seq <= snapshot.seq <= until_seq:
            continue
        step = (snapshot.seq - since_seq) // step_ms
        if not kept or step > (kept[-1].seq - since_seq) // step_ms:
            kept.append(snapshot)
    return kept
