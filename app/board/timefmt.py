"""The two time formats of the interface, both UTC with milliseconds, and the service's wall
clock: the system's, shifted by ``CLOCK_OFFSET_MS`` (0 but in tests and drills), which every
process sets once at start-up (``set_offset_ms``) before it reads the time."""

from __future__ import annotations

import functools
import time
from datetime import datetime


def updated_at(epoch_ms: int) -> str:
    """``YYYY-MM-DD HH:MM:SS.mmm`` (the interface's sample shape for ``updatedAt``)."""
    seconds, millis = divmod(epoch_ms, 1000)
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(seconds)) + f".{millis:03d}"


def served_at(epoch_ms: int) -> str:
    """ISO 8601 with milliseconds and ``Z``, as ``servedAt`` is documented."""
    seconds, millis = divmod(epoch_ms, 1000)
    return f"{_second(seconds)}.{millis:03d}Z"


def iso_of(moment: datetime | None) -> str | None:
    """A naive-UTC ``datetime`` (the accounts store's) as ``served_at`` writes a time; None
    stays None."""
    if moment is None:
        return None
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


@functools.lru_cache(maxsize=4)
def _second(seconds: int) -> str:
    # Every request formats the time; the second changes once per second.
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))


_offset_ms = 0  # CLOCK_OFFSET_MS, set once at start-up
_offset_s = 0.0


def set_offset_ms(offset_ms: int) -> None:
    """Shift this process's wall clock (``now_ms``, ``now``) by ``offset_ms``: at start-up,
    from ``CLOCK_OFFSET_MS``, and by every process of one service alike."""
    global _offset_ms, _offset_s
    _offset_ms, _offset_s = offset_ms, offset_ms / 1000


def now_ms() -> int:
    """The service's wall-clock time in whole epoch milliseconds."""
    return time.time_ns() // 1_000_000 + _offset_ms


def now() -> float:
    """The service's wall-clock time in epoch seconds (the boards' and windows' clock)."""
    return time.time() + _offset_s
