"""The two time formats of the interface, both UTC with milliseconds."""

from __future__ import annotations

import functools
import time


def updated_at(epoch_ms: int) -> str:
    """``YYYY-MM-DD HH:MM:SS.mmm`` (the interface's sample shape for ``updatedAt``)."""
    seconds, millis = divmod(epoch_ms, 1000)
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(seconds)) + f".{millis:03d}"


def served_at(epoch_ms: int) -> str:
    """ISO 8601 with milliseconds and ``Z``, as ``servedAt`` is documented."""
    seconds, millis = divmod(epoch_ms, 1000)
    return f"{_second(seconds)}.{millis:03d}Z"


@functools.lru_cache(maxsize=4)
def _second(seconds: int) -> str:
    # Every request formats the time; the second changes once per second.
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))


def now_ms() -> int:
    """Wall-clock time in whole epoch milliseconds."""
    return time.time_ns() // 1_000_000
