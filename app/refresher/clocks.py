"""The live source's monotonic clock: the system's, or tape time during a replay.

Every age and interval in the live source is measured on ``monotonic()``. A replay
(``app.backtest``) runs the same code on a virtual clock driven by the tape's ``t``, so it
swaps the clock for the length of the replay (``use``); nothing else ever does.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

_source: Callable[[], float] = time.monotonic


def monotonic() -> float:
    """Seconds on the current monotonic clock."""
    return _source()


@contextmanager
def use(clock: Callable[[], float]) -> Iterator[None]:
    """Measure ``monotonic()`` on ``clock`` inside the block."""
    global _source
    previous, _source = _source, clock
    try:
        yield
    finally:
        _source = previous
