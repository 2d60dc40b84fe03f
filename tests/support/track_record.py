"""Filling the live record: the real refresher loop on the simulated source, on a virtual
clock, with a recorder observing every board."""

from __future__ import annotations

from app.bus.memory import MemoryBoardBus
from app.calibration.recorder import Recorder
from app.markets import Market
from app.refresher.loop import Refresher
from app.refresher.sources.simulated import SimulatedSource


def run_simulated(
    recorder: Recorder,
    start: float,
    seconds: float,
    seed: int = 3,
    markets: tuple[Market, ...] | None = None,
) -> None:
    """Tick every 0.5 s of a virtual clock from ``start`` for ``seconds`` (``markets``: the
    simulated source's, BTC when None)."""
    clock = [start]
    source = SimulatedSource(seed=seed, markets=markets)
    refresher = Refresher(source, MemoryBoardBus(), 500, clock=lambda: clock[0], observer=recorder)
    while clock[0] < start + seconds:
        assert refresher.tick()
        clock[0] += 0.5
