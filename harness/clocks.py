"""Wall clocks for the tests: the real one shifted by a fixed offset (``OffsetClock``).

A test about *what* happens in a window (a feed goes late, a witness disagrees, a window
rolls) needs "now" at a given point of a window, not a wait for the real boundary. An
``OffsetClock`` is the real clock plus whole milliseconds: it ticks at the real rate (every
delay, timeout and staleness stays real), only its epoch is elsewhere. The fakes take it as
their world's clock (``running(clock=...)``), the in-process live source as its wall clock,
and the service's processes as ``CLOCK_OFFSET_MS`` (``env()``), so all of them agree on
"now" to the millisecond.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from harness.spans import WINDOW_S


@dataclass(frozen=True)
class OffsetClock:
    """``time.time()`` plus ``offset_ms``: a wall clock that reads the same offset forever.

    ``base`` is the clock it shifts, in epoch nanoseconds: the real one, or one a test
    drives to check the arithmetic without reading real time."""

    offset_ms: int = 0
    base: Callable[[], int] = field(default=time.time_ns, compare=False, repr=False)

    def __call__(self) -> float:
        """Epoch seconds on this clock."""
        return self.base() / 1e9 + self.offset_ms / 1000

    def now_ms(self) -> int:
        """Epoch milliseconds on this clock (as ``app.board.timefmt.now_ms`` shifted alike)."""
        return self.base() // 1_000_000 + self.offset_ms

    def env(self) -> dict[str, str]:
        """The setting that gives a service's processes this clock."""
        return {"CLOCK_OFFSET_MS": str(self.offset_ms)}

    @classmethod
    def reading(cls, when: float, base: Callable[[], int] = time.time_ns) -> OffsetClock:
        """A clock on ``base`` that reads ``when`` (epoch seconds) now, to the millisecond."""
        return cls(round(when * 1000 - base() / 1e6), base)

    @classmethod
    def into_window(
        cls, elapsed_s: float, window_s: int = WINDOW_S, base: Callable[[], int] = time.time_ns
    ) -> OffsetClock:
        """A clock on ``base`` that reads ``elapsed_s`` into ``base``'s current window now
        (the offset is less than one window either way)."""
        start = math.floor(base() / 1e9 / window_s) * window_s
        return cls.reading(start + elapsed_s, base)


REAL = OffsetClock()  # the real wall clock, as an ``OffsetClock``
