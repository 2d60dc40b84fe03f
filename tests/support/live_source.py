"""Driving a ``PolymarketSource`` in tests: a settable clock, its upstreams, polling rows."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from app.markets import MARKETS, Market
from app.refresher import clocks
from app.refresher.sources.polymarket.source import PolymarketSource, Upstreams
from harness.fake_polymarket import FakePolymarket

POLL_S = 30.0  # generous: another process may be loading the machine
# The market of a one-market source, said where it is used: a source has no default market.
BTC_ONLY: tuple[Market, ...] = (MARKETS["BTC"],)

Row = dict[str, Any]


class Clock:
    """A settable clock for the source, the refresher and the served ``now``."""

    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    @property
    def ms(self) -> int:
        """The clock in epoch milliseconds."""
        return int(self.t * 1000)


class Skipping:
    """The live source's monotonic clock (``app.refresher.clocks``): the real one, plus the
    seconds the test has skipped (its retries come due without waiting them out; every age
    measured on it grows by as much)."""

    def __init__(self) -> None:
        self.skipped = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.skipped

    def skip(self, seconds: float) -> None:
        """Move the clock ``seconds`` ahead."""
        self.skipped += seconds


@contextmanager
def skipping() -> Iterator[Skipping]:
    """The live source's monotonic clock made skippable for the block; start and stop the
    sources inside it, so none sees the clock go back."""
    clock = Skipping()
    with clocks.use(clock):
        yield clock


def upstreams(world: FakePolymarket) -> Upstreams:
    """The source's upstreams: the fakes of ``world``."""
    return Upstreams(
        gamma=world.gamma.url,
        clob=world.clob.url,
        clob_ws=world.clob_ws.url,
        rtds=world.rtds.url,
        site=world.site.url,
        binance=world.binance.url,
    )


def first_row(source: PolymarketSource, clock: Callable[[], float]) -> Row:
    """One call of ``rows(clock())``: its only row."""
    rows = source.rows(clock())
    assert len(rows) == 1
    return rows[0].as_json()


def latest_ms(source: PolymarketSource) -> int | None:
    """The stamp of the newest point of the source's Chainlink spot series (None: none)."""
    latest = source.rtds.series["spot"].latest()
    return latest[0] if latest else None


def poll(
    source: PolymarketSource,
    clock: Clock,
    predicate: Callable[[Row], bool],
    what: str,
    timeout: float = POLL_S,
) -> Row:
    """Call ``rows(clock())`` until ``predicate(row)``; fail with the last row otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        row = first_row(source, clock)
        if predicate(row):
            return row
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}; last row: {json.dumps(row, indent=1)}")
        time.sleep(0.05)


def wait_for(
    predicate: Callable[[], bool], what: str, timeout: float = POLL_S, interval: float = 0.05
) -> None:
    """Until ``predicate()``; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(interval)


MakeSource = Callable[[Callable[[], float]], PolymarketSource]


@contextmanager
def sources_on(
    world: FakePolymarket, markets: tuple[Market, ...] = BTC_ONLY, **options: Any
) -> Iterator[MakeSource]:
    """Make sources of ``markets`` on the fakes with a given clock; all closed (threads
    stopped) at the end."""
    made: list[PolymarketSource] = []

    def make(clock: Callable[[], float]) -> PolymarketSource:
        source = PolymarketSource(upstreams(world), markets, clock=clock, **options)
        made.append(source)
        return source

    try:
        yield make
    finally:
        for source in made:
            source.close()
            for thread in (source.clob, source.rtds):
                if thread.is_alive():
                    thread.join(5)
