"""The board bus: how a published board gets from the refresher to every web worker.

Two backends, chosen by ``REDIS_URL``: ``memory://`` keeps everything in one process (the
refresher runs inside the web process), ``redis://`` stores the latest board in a key and
announces each one on a pub/sub channel that every worker subscribes to once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from app.board.snapshot import Snapshot
from app.config import Settings

Listener = Callable[[Snapshot], None]


class BoardBus(Protocol):
    """What the refresher and the web workers need from a bus backend."""

    embedded: bool

    def publish(self, board_json: str) -> None:
        """Store ``board_json`` as the latest board and announce it (refresher side)."""

    def latest(self) -> Snapshot | None:
        """The newest validated board this process holds, or None before any arrives."""

    def add_listener(self, listener: Listener) -> None:
        """Call ``listener`` with every new snapshot this process receives."""

    def status(self) -> tuple[bool, str]:
        """Readiness of the backend and a short human-readable status text."""

    def start(self) -> None:
        """Begin receiving boards (idempotent; called lazily, after fork)."""

    def close(self) -> None:
        """Stop receiving and release connections."""


def create_bus(settings: Settings) -> BoardBus:
    """The backend ``settings.redis_url`` asks for; opens no connection yet."""
    if settings.uses_redis:
        from app.bus.redis_bus import RedisBoardBus

        return RedisBoardBus(settings.redis_url, pool_size=settings.redis_pool_size)
    from app.bus.memory import MemoryBoardBus

    return MemoryBoardBus()
