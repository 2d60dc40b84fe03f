"""The board bus: how a published board gets from the refresher to every web worker.

Two backends, chosen by ``REDIS_URL``: ``memory://`` keeps everything in one process (the
refresher runs inside the web process), ``redis://`` stores the latest board in a key and
announces each one on a pub/sub channel that every worker subscribes to once.
"""

from __future__ import annotations

from app.bus.base import BoardBus, Listener
from app.config import Settings

__all__ = ["BoardBus", "Listener", "create_bus"]


def create_bus(settings: Settings) -> BoardBus:
    """The backend ``settings.redis_url`` asks for; opens no connection yet."""
    if settings.uses_redis:
        from app.bus.redis_bus import RedisBoardBus

        return RedisBoardBus(settings.redis_url, pool_size=settings.redis_pool_size)
    from app.bus.memory import MemoryBoardBus

    return MemoryBoardBus()
