"""Filling the live record: the real refresher loop on the simulated source, on a virtual
clock, with a recorder observing every board."""

from __future__ import annotations

import math
from typing import Any

from app.bus.memory import MemoryBoardBus
from app.calibration.recorder import Recorder
from app.markets import MARKETS, Market
from app.refresher.loop import Refresher
from app.refresher.sources.simulated import SimulatedSource


def run_simulated(
    recorder: Recorder,
    start: float,
    seconds: float,
    seed: int = 3,
    markets: tuple[Market, ...] = (MARKETS["BTC"],),
) -> None:
    """Tick every 0.5 s of a virtual clock from ``start`` for ``seconds`` (``markets``: the
    simulated source's)."""
    clock = [start]
    source = SimulatedSource(seed=seed, markets=markets)
    refresher = Refresher(source, MemoryBoardBus(), 500, clock=lambda: clock[0], observer=recorder)
    while clock[0] < start + seconds:
        assert refresher.tick()
        clock[0] += 0.5


def assert_close(found: Any, expected: Any, where: str = "") -> None:
    """Equal, recursively; floats to 1e-9 relative (the database sums in another order than
    ``math.fsum``), everything else exactly and of the same type."""
    if isinstance(expected, float) and isinstance(found, float):
        assert math.isclose(found, expected, rel_tol=1e-9, abs_tol=1e-12), where
    elif isinstance(expected, dict):
        assert isinstance(found, dict) and found.keys() == expected.keys(), where
        for key in expected:
            assert_close(found[key], expected[key], f"{where}.{key}")
    elif isinstance(expected, list):
        assert isinstance(found, list) and len(found) == len(expected), where
        for i, (a, b) in enumerate(zip(found, expected, strict=True)):
            assert_close(a, b, f"{where}[{i}]")
    else:
        assert found == expected and type(found) is type(expected), (where, found, expected)
