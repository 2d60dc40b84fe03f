"""Filling the live record: the real refresher loop on the simulated source, on a virtual
clock, with a recorder observing every board."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from app.bus.memory import MemoryBoardBus
from app.calibration import summary
from app.calibration.checkpoints import GRACE_S
from app.calibration.recorder import Recorder
from app.markets import MARKETS, SPANS, Market, Span
from app.refresher.loop import Refresher
from app.refresher.sources.simulated import SimulatedSource
from harness.spans import FIVE_MINUTES
from tests.support.rows import live_row


def run_simulated(
    recorder: Recorder,
    start: float,
    seconds: float,
    seed: int = 3,
    markets: tuple[Market, ...] = (MARKETS["BTC"],),
    *,
    outcomes_only: bool = False,
    spans: tuple[Span, ...] = (FIVE_MINUTES,),
) -> None:
    """Tick on the 0.5 s grid of a virtual clock from ``start`` for ``seconds`` (``markets``:
    the simulated source's), at every point of it where a board can be recorded (``recordable``)
    and at ``start``; in the stretches between, whose boards the recorder would take nothing
    from, the source's markets only walk (no board is built, checked, published and parsed
    again), so that a seed walks the same path at the same instants as before.

    ``outcomes_only``: tick only where the previous window's outcome settles or a window is
    first stored (``_stored_or_settled``), for a test of windows and outcomes alone.
    ``spans``: the window kinds served (each recorded apart)."""
    ticks = _stored_or_settled if outcomes_only else recordable
    clock = [start]
    source = SimulatedSource(seed=seed, markets=markets, spans=spans)
    refresher = Refresher(source, MemoryBoardBus(), 500, clock=lambda: clock[0], observer=recorder)
    while clock[0] < start + seconds:
        if clock[0] == start or any(ticks(clock[0], span) for span in spans):
            assert refresher.tick()
        else:  # the source still walks at this instant: a seed gives the path it always did
            source.advance(clock[0])
        clock[0] += 0.5


def _settles(t: float, span: Span) -> bool:
    """Whether a board at ``t`` can settle the previous window's outcome: within ``GRACE_S``
    + 1 s of a start, past the ``GRACE_S`` after the end it waits for."""
    return t % span.seconds <= GRACE_S + 1.0


def _stored_or_settled(t: float, span: Span) -> bool:
    """Whether a board at ``t`` settles an outcome (``_settles``) or can take the window's
    first checkpoint, where the recorder first stores a window (an ended one is stored
    anyway)."""
    first = max(SPANS[span.name].rems)
    return _settles(t, span) or first - GRACE_S < span.seconds - t % span.seconds <= first


def recordable(t: float, span: Span) -> bool:
    """Whether a board at ``t`` can change the record of ``span``'s window: it may take a
    checkpoint (``rem`` within ``GRACE_S`` of one), or the previous window's outcome settles
    (within ``GRACE_S`` + 1 s of a start, past the ``GRACE_S`` after the end it waits for)."""
    into = t % span.seconds
    rem = span.seconds - into
    return _settles(t, span) or any(c - GRACE_S < rem <= c for c in SPANS[span.name].rems)


def record_both_windows(recorder: Recorder, start: int, seconds: int) -> None:
    """BTC's 5- and 15-minute rows (issue 39), one of each per second from ``start + 1`` for
    ``seconds``: P(up) 0.5, UP's mid 0.5, each window's price to beat ``100 + its start -
    start`` (so every settled window settles up, on its own length's next one)."""
    for t in range(start + 1, start + seconds + 1):
        for name, length in (("5m", 300), ("15m", 900)):
            begun = start + (t - start) // length * length
            row = live_row(f"btc-updown-{name}-{begun}", begun, rem_secs=float(begun + length - t),
                           ts=t * 1000, window=name, settlement="twap",
                           price_to_beat=100.0 + begun - start, up_bid=0.49,
                           up_ask=0.51)  # fmt: skip
            recorder.observe(dataclasses.replace(row, window_end=begun + length, model_p_up=0.5),
                             t, {})  # fmt: skip


def scored_in_python(loaded: list[dict[str, Any]], rems: tuple[int, ...]) -> dict[str, Any]:
    """What ``totals.compute`` answers, from windows loaded (``store.load``, in time order)
    and scored in Python (``summary.summarize`` at ``rems``): the answer it must equal."""
    return {
        "windowsRecorded": len(loaded),
        "windows": sum(w["outcome"] is not None for w in loaded),
        "first": loaded[0]["windowStart"] if loaded else None,
        "last": loaded[-1]["windowStart"] if loaded else None,
        **summary.summarize(loaded, rems),
    }


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
