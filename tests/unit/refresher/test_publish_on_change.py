"""Publish on change: the refresher sends a board as soon as an input changes it.

A source with a change signal (as the live one has) runs under the real refresher loop in
a thread, on the real clock; every board the bus receives is kept. The intervals are long
next to any scheduling delay, and each assertion is on which boards went out, waiting
generously for them. The schedule itself (when a change goes out) is driven pass by pass
(``Refresher.step``) on a clock of the test's, with exact times.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from app.board.row import BoardRow
from app.board.snapshot import Snapshot
from app.bus.memory import MemoryBoardBus
from app.markets import parse_symbols
from app.refresher.changes import Changes
from app.refresher.loop import Refresher
from app.refresher.sources.simulated import SimulatedSource
from tests.support.live_source import Clock

WAIT_S = 15.0


class ChangingSource:
    """One valid row whose UP bid the test moves, and the change signal of a live source."""

    name = "changing"

    def __init__(self) -> None:
        self.changes = Changes()
        [row] = SimulatedSource(parse_symbols("BTC"), seed=1).rows(1_800_000_100.0)
        self.row = dataclasses.replace(row, up_bid=0.40)

    def move(self, bid: float) -> None:
        """A new top of book arrives."""
        self.row = dataclasses.replace(self.row, up_bid=bid)
        self.changes.notify()

    def winners(self) -> dict[str, bool]:
        return {}

    def rows(self, now: float) -> list[BoardRow]:
        return [dataclasses.replace(self.row, ts=int(now * 1000))]


class Received:
    """Every board the bus took in, with when (monotonic)."""

    def __init__(self, bus: MemoryBoardBus) -> None:
        self.boards: list[tuple[float, dict[str, Any]]] = []
        bus.add_listener(self._take)

    def _take(self, snapshot: Snapshot) -> None:
        self.boards.append((time.monotonic(), json.loads(snapshot.raw)))

    def bids(self) -> list[float]:
        return [board["items"][0]["up_bid"] for _, board in self.boards]

    def wait(self, count: int) -> None:
        deadline = time.monotonic() + WAIT_S
        while len(self.boards) < count:
            assert time.monotonic() < deadline, f"only {len(self.boards)} boards: {self.bids()}"
            time.sleep(0.01)


def running(
    source: ChangingSource, tick_ms: int, min_interval_ms: int
) -> Iterator[tuple[Received, threading.Event]]:
    bus = MemoryBoardBus()
    received = Received(bus)
    refresher = Refresher(source, bus, tick_ms, min_interval_ms=min_interval_ms)
    stop = threading.Event()
    thread = threading.Thread(target=refresher.run, args=(stop,), daemon=True)
    thread.start()
    try:
        yield received, stop
    finally:
        stop.set()
        thread.join(5)
        assert not thread.is_alive()


def waits(seconds: float, until_change: bool) -> tuple[object, bool]:
    """The pause of a pass, its seconds up to float rounding (compares equal to a
    ``Pause``)."""
    return (pytest.approx(seconds, abs=1e-9), until_change)


@pytest.fixture
def source() -> ChangingSource:
    return ChangingSource()


def test_a_first_change_goes_out_at_once_and_a_burst_in_one_board_at_the_intervals_end(
    source: ChangingSource,
) -> None:
    """Driven pass by pass (``step``) on a clock of the test's: a change right after a board
    waits for the end of the interval since it, a burst within an interval goes out as one
    board at its end, and the first change after a quiet spell goes out at once."""
    clock = Clock(100.0)
    bus = MemoryBoardBus()
    received = Received(bus)
    refresher = Refresher(source, bus, 60_000, min_interval_ms=3000, monotonic=clock)

    assert refresher.step(clock()) == waits(0.0, until_change=True)  # the first board, at start
    assert received.bids() == [0.40]
    assert refresher.step(clock()) == waits(60.0, until_change=True)  # nothing until the tick
    source.move(0.41)
    # The start board has just gone out: this change waits for the end of the interval.
    assert refresher.step(clock()) == waits(3.0, until_change=False)
    clock.t += 2.999
    assert refresher.step(clock()) == waits(0.001, until_change=False)
    assert received.bids() == [0.40]
    clock.t = 103.0
    refresher.step(clock())
    assert received.bids() == [0.40, 0.41]
    # A burst within the next interval: one board, at its end, with the last value.
    source.move(0.42)
    assert refresher.step(clock()) == waits(3.0, until_change=False)
    clock.t += 1.0
    source.move(0.43)
    assert refresher.step(clock()) == waits(2.0, until_change=False)
    clock.t += 1.5
    source.move(0.44)
    refresher.step(clock())
    assert received.bids() == [0.40, 0.41]
    clock.t = 106.0
    refresher.step(clock())
    assert received.bids() == [0.40, 0.41, 0.44]
    # A quiet spell longer than the interval: the next change goes out at once.
    clock.t += 3.2
    assert refresher.step(clock()).until_change
    source.move(0.45)
    refresher.step(clock())
    assert received.bids() == [0.40, 0.41, 0.44, 0.45]
    # Nothing new: nothing sent until the tick, which sends a board anyway.
    assert refresher.step(clock()) == waits(60.0, until_change=True)
    clock.t += 60.0
    refresher.step(clock())
    assert received.bids() == [0.40, 0.41, 0.44, 0.45, 0.45]


def test_changes_are_never_dropped_and_nothing_new_sends_nothing(source: ChangingSource) -> None:
    for received, _ in running(source, tick_ms=60_000, min_interval_ms=200):
        received.wait(1)
        for step in range(1, 21):
            source.move(round(0.40 + step / 100, 2))
            time.sleep(0.03)
        deadline = time.monotonic() + WAIT_S
        while received.bids()[-1] != 0.60:
            assert time.monotonic() < deadline, received.bids()
            time.sleep(0.01)
        bids = received.bids()
        assert bids == sorted(bids) and len(set(bids)) == len(bids), bids
        assert len(bids) < 21, f"not coalesced: {bids}"
        sent = len(received.boards)
        source.changes.notify()  # a signal with nothing new in the board
        time.sleep(0.6)
        assert len(received.boards) == sent, received.bids()


def test_the_tick_is_a_floor_when_nothing_changes(source: ChangingSource) -> None:
    for received, _ in running(source, tick_ms=200, min_interval_ms=50):
        received.wait(5)
        assert set(received.bids()) == {0.40}
        times = [at for at, _ in received.boards]
        boards = [board for _, board in received.boards]
        assert all(b["seq"] < c["seq"] for b, c in itertools.pairwise(boards))
        assert all(b["ts"] <= c["ts"] for b, c in itertools.pairwise(boards))
        assert times == sorted(times)


def test_every_board_says_when_its_newest_input_arrived(source: ChangingSource) -> None:
    for received, _ in running(source, tick_ms=60_000, min_interval_ms=0):
        received.wait(1)
        before = time.time_ns() // 1_000_000
        source.move(0.47)
        received.wait(2)
        after = time.time_ns() // 1_000_000
        board = received.boards[1][1]
        assert before <= board["newestInputMs"] <= after <= board["ts"] + 1000
        assert board["newestInputMs"] <= board["ts"]


class FourMarkets(ChangingSource):
    """Four rows (BTC, ETH, SOL, XRP); ``move_one`` changes one market's UP bid."""

    def __init__(self) -> None:
        super().__init__()
        self.markets = SimulatedSource(seed=1, markets=parse_symbols("BTC,ETH,SOL,XRP"))
        self.four = [
            dataclasses.replace(row, up_bid=0.40) for row in self.markets.rows(1_800_000_100.0)
        ]

    def move_one(self, index: int, bid: float) -> None:
        """A new top of book of one market arrives."""
        self.four[index] = dataclasses.replace(self.four[index], up_bid=bid)
        self.changes.notify()

    def rows(self, now: float) -> list[BoardRow]:
        return [dataclasses.replace(row, ts=int(now * 1000)) for row in self.four]


def test_changes_of_four_markets_coalesce_into_one_board_per_interval() -> None:
    source = FourMarkets()
    for received, _ in running(source, tick_ms=60_000, min_interval_ms=300):
        received.wait(1)
        started = time.monotonic()
        for step in range(1, 41):  # 40 changes in about 1.2 s, spread over the four markets
            source.move_one(step % 4, round(0.40 + step / 100, 2))
            time.sleep(0.03)
        # Each market's last bid: BTC moved at step 40, ETH at 37, SOL at 38, XRP at 39.
        final = [round(0.40 + s / 100, 2) for s in (40, 37, 38, 39)]
        deadline = time.monotonic() + WAIT_S
        while [i["up_bid"] for i in received.boards[-1][1]["items"]] != final:
            assert time.monotonic() < deadline, received.boards[-1][1]["items"]
            time.sleep(0.01)
        boards = received.boards[1:]
        span = received.boards[-1][0] - started
        assert all(len(board["items"]) == 4 for _, board in boards)
        # At most one board per interval, however many markets changed (plus the first).
        assert len(boards) <= span / 0.3 + 2, (len(boards), span)


def test_a_refresher_without_a_lease_says_it_leads() -> None:
    """Issue 50, point 6: the embedded shape's only refresher publishes every board, so its
    ``probboard_refresher_leading`` is 1 (it said 0 while publishing)."""
    from prometheus_client import REGISTRY

    from app.metrics.refresher import LEADING

    LEADING.set(0)  # as a process starts
    source = SimulatedSource(parse_symbols("BTC"), seed=1)
    refresher = Refresher(source, MemoryBoardBus(), 500)
    stop = refresher.start_background()
    try:
        deadline = time.monotonic() + WAIT_S
        while refresher.published < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert refresher.published >= 1
        assert REGISTRY.get_sample_value("probboard_refresher_leading") == 1.0
    finally:
        stop.set()
