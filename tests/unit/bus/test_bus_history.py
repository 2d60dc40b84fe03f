"""The buses keep the boards of the last two minutes, for streams that reconnect.

On ``memory://`` and on a real redis-server: the boards after a given one, in order; None
for an id the history does not hold (older than it, or never published).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from app.bus.base import HISTORY_MS, BoardBus
from app.bus.memory import MemoryBoardBus
from app.bus.redis_bus import HISTORY_KEY, RedisBoardBus
from app.markets import parse_symbols
from app.refresher.loop import Refresher
from app.refresher.sources.simulated import SimulatedSource
from harness.processes import RedisServer

START = 1_800_000_000.0


@pytest.fixture(params=["memory", "redis"])
def bus(request: pytest.FixtureRequest) -> Iterator[BoardBus]:
    if request.param == "memory":
        yield MemoryBoardBus()
        return
    server: RedisServer = request.getfixturevalue("fresh_redis")
    found = RedisBoardBus(server.url)
    yield found
    found.close()


def publish_at(bus: BoardBus, times: list[float]) -> list[int]:
    """A board at each time (seconds); their seqs."""
    clock = [0.0]
    refresher = Refresher(
        SimulatedSource(parse_symbols("BTC"), seed=2), bus, 500, clock=lambda: clock[0]
    )
    seqs = []
    for t in times:
        clock[0] = t
        assert refresher.tick()
        seqs.append(refresher._last_seq)
    return seqs


def test_the_boards_after_one_in_order(bus: BoardBus) -> None:
    seqs = publish_at(bus, [START + i * 0.5 for i in range(10)])
    missed = bus.history(seqs[3])
    assert missed is not None
    assert [s.seq for s in missed] == seqs[4:]
    assert bus.history(seqs[-1]) == []  # nothing missed
    assert bus.history(seqs[3] + 1) is None  # never published: not ours to guess
    assert bus.history(1) is None  # older than the history


def test_history_reads_at_most_the_count_asked(bus: BoardBus) -> None:
    """Issue 46: a stream asks for its replay cap + 1: the oldest that many boards after the
    id, never the whole history (None still means the id is not held)."""
    seqs = publish_at(bus, [START + i * 0.5 for i in range(30)])
    first = bus.history(seqs[0], 4)
    assert first is not None and [s.seq for s in first] == seqs[1:5]
    near = bus.history(seqs[-3], 4)
    assert near is not None and [s.seq for s in near] == seqs[-2:]
    assert bus.history(seqs[-1], 4) == []
    assert bus.history(seqs[0] + 1, 4) is None


def test_boards_older_than_two_minutes_are_let_go(bus: BoardBus) -> None:
    # Three hundred boards across four minutes: the history still spans two.
    seqs = publish_at(bus, [START + i * 0.8 for i in range(300)])
    newest = seqs[-1]
    recent = [s for s in seqs if s >= newest - HISTORY_MS]
    missed = bus.history(recent[0])
    assert missed is not None and [s.seq for s in missed] == recent[1:]
    if isinstance(bus, MemoryBoardBus):
        assert bus.history(seqs[0]) is None  # exact on memory://
    else:  # Redis trims whole nodes (MINID ~): no more than a node beyond two minutes
        assert isinstance(bus, RedisBoardBus)
        held = bus._client.xlen(HISTORY_KEY)
        assert len(recent) <= held < len(recent) + 120, (held, len(recent))


def test_redis_keeps_publishing_when_the_history_refuses_a_board(
    fresh_redis: RedisServer,
) -> None:
    """A board whose seq is not above the history's newest (a refresher whose clock went
    back) is still stored and announced; only the history skips it."""
    bus = RedisBoardBus(fresh_redis.url)
    try:
        publish_at(bus, [START + 10])
        client = redis.Redis.from_url(fresh_redis.url)
        client.xadd(HISTORY_KEY, {"b": "{}"}, id=f"{int((START + 100) * 1000)}-0")
        seqs = publish_at(bus, [START + 20])
        assert client.get("probboard:board:latest") is not None
        stored = client.get("probboard:board:latest")
        assert stored is not None and str(seqs[0]).encode() in stored
    finally:
        bus.close()
