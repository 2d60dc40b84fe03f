"""The refreshers' lease and the fenced publish, against a real redis-server.

``Leadership`` takes, renews and gives up the lease; a standby takes it once it lapses; the
holder stops believing it leads by its own clock. ``RedisBoardBus.publish(..., fence=token)``
refuses a board from a refresher that lost the lease ("lease") or whose seq is not above the
bus's ("seq"), and ``Refresher`` answers both. The only waits are for a lease to lapse, which
is the behaviour under test; nothing asserts how long anything took.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from app.board.snapshot import dumps
from app.bus.base import PublishRefusedError
from app.bus.memory import MemoryBoardBus
from app.bus.redis_bus import (
    BOARD_CHANNEL,
    BOARD_KEY,
    HISTORY_KEY,
    LEADER_KEY,
    SEQ_KEY,
    RedisBoardBus,
)
from app.config import ConfigError, load_settings
from app.markets import parse_symbols
from app.refresher.leader import Leadership, holder_name, who_leads
from app.refresher.loop import Refresher
from app.refresher.sources.simulated import SimulatedSource
from app.schemas.board import PublishedBoardSchema
from harness.processes import RedisServer, wait_until

LAPSE_MS = 300  # a lease short enough to wait out
LONG_MS = 60_000  # a lease that does not lapse during a test
WAIT_S = 15.0


class FakeClock:
    """A monotonic clock that moves only when the test says so."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """Let ``seconds`` pass."""
        self.now += seconds


class CountingBus(RedisBoardBus):
    """The Redis bus, counting publish calls (refused ones included)."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.calls = 0

    def publish(self, board_json: str, fence: str | None = None) -> None:
        self.calls += 1
        super().publish(board_json, fence=fence)


class Made:
    """Leaderships and buses made by a test, all closed after it."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.leases: list[Leadership] = []
        self.buses: list[RedisBoardBus] = []
        self.redis = redis.Redis.from_url(url)

    def lease(
        self, name: str, lease_ms: int = LONG_MS, clock: Callable[[], float] | None = None
    ) -> Leadership:
        """A Leadership on the test's Redis (named, so tests can tell them apart)."""
        found = (
            Leadership(self.url, lease_ms, name=name)
            if clock is None
            else Leadership(self.url, lease_ms, name=name, clock=clock)
        )
        self.leases.append(found)
        return found

    def bus(self) -> CountingBus:
        """A Redis bus on the test's Redis."""
        found = CountingBus(self.url)
        self.buses.append(found)
        return found

    def stored(self) -> dict[str, Any] | None:
        """The board in ``probboard:board:latest``, or None."""
        raw = self.redis.get(BOARD_KEY)
        if raw is None:
            return None
        document: dict[str, Any] = json.loads(raw)
        return document

    def bus_seq(self) -> int | None:
        """``probboard:board:seq``, or None when nothing set it."""
        raw = self.redis.get(SEQ_KEY)
        return None if raw is None else int(raw)

    def close(self) -> None:
        for lease in self.leases:
            lease.close()
        for bus in self.buses:
            bus.close()
        self.redis.close()


class Channel:
    """A subscriber to the board channel, reading what was announced."""

    def __init__(self, url: str) -> None:
        self._client = redis.Redis.from_url(url)
        self._pubsub = self._client.pubsub()  # type: ignore[no-untyped-call]
        self._pubsub.subscribe(BOARD_CHANNEL)
        assert wait_until(self._subscribed, timeout=WAIT_S)

    def _subscribed(self) -> bool:
        message = self._pubsub.get_message(timeout=0.1)
        return message is not None and message["type"] == "subscribe"

    def boards_until(self, seq: int) -> list[dict[str, Any]]:
        """Every board announced up to and including the one numbered ``seq``."""
        boards: list[dict[str, Any]] = []
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            message = self._pubsub.get_message(timeout=0.2)
            if message is None or message["type"] != "message":
                continue
            board: dict[str, Any] = json.loads(message["data"])
            boards.append(board)
            if board["seq"] == seq:
                return boards
        raise AssertionError(f"board {seq} was never announced; got {boards}")

    def close(self) -> None:
        self._pubsub.close()
        self._client.close()


@pytest.fixture
def made(fresh_redis: RedisServer) -> Iterator[Made]:
    """Leaderships and buses on an emptied Redis, closed after the test."""
    handle = Made(fresh_redis.url)
    try:
        yield handle
    finally:
        handle.close()


@pytest.fixture
def channel(fresh_redis: RedisServer) -> Iterator[Channel]:
    """A subscription to the board channel, made before the test publishes anything."""
    subscriber = Channel(fresh_redis.url)
    try:
        yield subscriber
    finally:
        subscriber.close()


def refresher(
    bus: MemoryBoardBus | RedisBoardBus,
    lease: Leadership | None = None,
    clock: Callable[[], float] = time.time,
) -> Refresher:
    """A refresher on the simulated source, publishing on ``bus`` under ``lease``."""
    return Refresher(
        SimulatedSource(parse_symbols("BTC"), seed=1), bus, 500, clock=clock, lease=lease
    )


def valid(board: dict[str, Any] | None) -> dict[str, Any]:
    """``board``, after checking it is a board a worker would accept."""
    assert board is not None
    assert PublishedBoardSchema().validate(board) == {}
    return board


def deposed(made: Made) -> tuple[Leadership, Leadership]:
    """A ("a", frozen clock: it still believes it leads) deposed by B ("b") after a lapse.
    B's own lease is long: the tests publish with it afterwards, and a loaded run let a
    300 ms one lapse before B's publish (refused: "lease")."""
    frozen = FakeClock()
    a = made.lease("a", LAPSE_MS, clock=frozen)
    b = made.lease("b", LONG_MS)
    assert a.step()
    assert not b.step()
    assert wait_until(b.step, timeout=WAIT_S)  # A never renews: B takes it once it lapses
    assert a.leading  # A's own clock stood still, as in a long pause
    return a, b


# -- taking, renewing and losing the lease ------------------------------------------------


def test_the_first_step_takes_the_lease_and_a_second_refresher_sees_it_held(made: Made) -> None:
    a = made.lease("host-a:11")
    b = made.lease("host-b:22")

    assert a.step() is True
    assert a.leading is True
    assert a.holder == "host-a:11"
    assert made.redis.get(LEADER_KEY) == a.token.encode()

    assert b.step() is False
    assert b.leading is False
    assert b.holder == "host-a:11"
    assert made.redis.get(LEADER_KEY) == a.token.encode()


def test_two_refreshers_with_the_same_host_and_pid_are_still_two(made: Made) -> None:
    first = Leadership(made.url, LONG_MS)
    second = Leadership(made.url, LONG_MS)
    made.leases += [first, second]

    assert first.name == second.name == holder_name()
    assert holder_name() == f"{socket.gethostname()}:{os.getpid()}"
    assert first.token != second.token
    assert first.step()
    assert not second.step()
    assert second.holder == holder_name()
    holder, _, _ = who_leads(made.url)
    assert holder == holder_name()


def test_renewal_keeps_the_lease_and_resets_its_time_to_live(made: Made) -> None:
    a = made.lease("a", 10_000)
    b = made.lease("b", 10_000)
    assert a.step()
    made.redis.pexpire(LEADER_KEY, 2_000)  # as if most of the lease had run out

    assert a.step() is True  # renewed while leading
    ttl = made.redis.pttl(LEADER_KEY)
    assert 2_000 < ttl <= 10_000
    assert made.redis.get(LEADER_KEY) == a.token.encode()
    assert a.leading and a.holder == "a"
    assert b.step() is False


def test_a_standby_takes_the_lease_once_the_holder_stops_renewing(made: Made) -> None:
    a = made.lease("a", LAPSE_MS)
    b = made.lease("b", LAPSE_MS)
    assert a.step()
    assert not b.step()

    assert wait_until(b.step, timeout=WAIT_S)

    assert b.leading and b.holder == "b"
    assert made.redis.get(LEADER_KEY) == b.token.encode()
    assert a.step() is False  # the old holder, back, stands by
    assert a.holder == "b"
    assert who_leads(made.url)[0] == "b"


def test_leading_ends_by_the_holders_own_clock(made: Made) -> None:
    clock = FakeClock()
    a = made.lease("a", 1_000, clock=clock)
    assert a.step()

    clock.advance(0.9)
    assert a.leading is True
    clock.advance(0.2)  # past the lease by A's clock; Redis was not asked again

    assert a.leading is False
    assert made.redis.get(LEADER_KEY) == a.token.encode()


def test_leading_ends_by_the_holders_own_clock_when_redis_cannot_renew(
    restartable_redis: RedisServer,
) -> None:
    clock = FakeClock()
    a = Leadership(restartable_redis.url, 1_000, name="a", clock=clock)
    try:
        assert a.step()
        restartable_redis.stop()

        clock.advance(0.5)
        assert a.step() is True  # the renewal failed, but the lease has not run out
        clock.advance(0.6)
        assert a.leading is False
        assert a.step() is False  # still no Redis: still not leading
    finally:
        a.close()


# -- the fence --------------------------------------------------------------------------


def test_a_deposed_leaders_fenced_publish_is_refused_and_sends_nothing(
    made: Made, channel: Channel
) -> None:
    a, b = deposed(made)
    bus = made.bus()
    board_of_a = refresher(bus, a).build()

    with pytest.raises(PublishRefusedError) as caught:
        bus.publish(dumps(board_of_a), fence=a.token)

    assert caught.value.reason == "lease"
    assert made.stored() is None
    assert made.bus_seq() is None
    # B publishes after it: whatever the channel carried before B's board came from A.
    board_of_b = refresher(bus, b).build()
    bus.publish(dumps(board_of_b), fence=b.token)
    announced = channel.boards_until(board_of_b["seq"])
    assert [board["publisher"] for board in announced] == ["b"]
    assert valid(made.stored())["publisher"] == "b"


def test_a_refresher_whose_bus_refuses_the_lease_gives_it_up_and_publishes_nothing(
    made: Made, channel: Channel
) -> None:
    a, b = deposed(made)
    bus = made.bus()
    publisher_a = refresher(bus, a)
    assert publisher_a.leading

    assert publisher_a.tick() is True

    assert bus.calls == 1  # tried once, then stood by
    assert a.leading is False  # lost() was called: A's frozen clock alone would not end it
    assert publisher_a.published == 0
    assert made.stored() is None
    assert publisher_a.tick() is True  # a standby sends nothing
    assert bus.calls == 1
    board_of_b = refresher(bus, b).build()
    bus.publish(dumps(board_of_b), fence=b.token)
    assert [board["publisher"] for board in channel.boards_until(board_of_b["seq"])] == ["b"]


def test_a_standby_refresher_does_not_try_to_publish(made: Made) -> None:
    a = made.lease("a")
    b = made.lease("b")
    assert a.step()
    assert not b.step()
    bus = made.bus()
    standby = refresher(bus, b)

    assert standby.leading is False
    assert standby.tick() is True
    assert bus.calls == 0
    assert standby.published == 0
    assert made.stored() is None


def test_a_fenced_publish_with_a_seq_not_above_the_bus_is_refused_with_the_bus_seq(
    made: Made, channel: Channel
) -> None:
    a = made.lease("a")
    assert a.step()
    bus = made.bus()
    first = refresher(bus, a).build()
    bus.publish(dumps(first), fence=a.token)
    assert made.bus_seq() == first["seq"]

    for seq in (first["seq"], first["seq"] - 1, 1):
        again = {**first, "seq": seq}
        with pytest.raises(PublishRefusedError) as caught:
            bus.publish(dumps(again), fence=a.token)
        assert caught.value.reason == "seq"
        assert caught.value.bus_seq == first["seq"]

    assert made.stored() == first
    assert made.bus_seq() == first["seq"]
    later = {**first, "seq": first["seq"] + 1}
    bus.publish(dumps(later), fence=a.token)
    assert [board["seq"] for board in channel.boards_until(later["seq"])] == [
        first["seq"],
        later["seq"],
    ]
    assert made.bus_seq() == later["seq"]


def test_tick_retries_once_with_a_seq_above_the_bus(made: Made) -> None:
    a = made.lease("a")
    assert a.step()
    bus = made.bus()
    ahead = refresher(bus, a).build()
    ahead["seq"] += 3_600_000  # a refresher whose clock ran an hour ahead published last
    bus.publish(dumps(ahead), fence=a.token)
    bus.calls = 0
    publisher = refresher(bus, a)

    assert publisher.tick() is True

    assert bus.calls == 2  # refused ("seq"), then sent after the bus's seq
    assert publisher.published == 1
    stored = valid(made.stored())
    assert stored["seq"] == ahead["seq"] + 1
    assert stored["publisher"] == "a"
    assert made.bus_seq() == ahead["seq"] + 1
    assert a.leading  # a seq refusal is not a lost lease


class SeqRefusingBus(MemoryBoardBus):
    """A bus that always says its seq is above the board's."""

    def __init__(self, bus_seq: int) -> None:
        super().__init__()
        self.bus_seq = bus_seq
        self.calls = 0

    def publish(self, board_json: str, fence: str | None = None) -> None:
        self.calls += 1
        self.bus_seq = json.loads(board_json)["seq"] + 1
        raise PublishRefusedError("seq", self.bus_seq)


class HeldLease:
    """A lease that is always held."""

    token = "t"
    name = "held"

    def __init__(self) -> None:
        self.lost_calls = 0

    @property
    def leading(self) -> bool:
        return True

    def lost(self) -> None:
        self.lost_calls += 1


def test_tick_retries_only_once_after_a_seq_refusal() -> None:
    bus = SeqRefusingBus(bus_seq=0)
    lease = HeldLease()
    publisher = Refresher(SimulatedSource(parse_symbols("BTC"), seed=1), bus, 500, lease=lease)

    assert publisher.tick() is True

    assert bus.calls == 2
    assert publisher.published == 0
    assert lease.lost_calls == 0
    assert bus.latest() is None


# -- elections ----------------------------------------------------------------------------


def test_on_elected_gets_the_bus_seq_when_the_lease_is_won(made: Made) -> None:
    bus = made.bus()
    earlier = refresher(bus).build()
    bus.publish(dumps(earlier))  # a board from before any lease
    a = made.lease("a")
    b = made.lease("b")
    elected_a: list[int] = []
    elected_b: list[int] = []
    a.on_elected = elected_a.append
    b.on_elected = elected_b.append

    assert a.step()
    assert elected_a == [earlier["seq"]]
    assert a.bus_seq == earlier["seq"]
    assert a.step()  # a renewal is no election
    assert elected_a == [earlier["seq"]]

    assert not b.step()
    assert elected_b == []
    last_of_a = refresher(bus, a).build()
    bus.publish(dumps(last_of_a), fence=a.token)
    a.release()
    assert b.step()
    assert elected_b == [last_of_a["seq"]]


def test_a_new_leaders_first_board_follows_the_last_even_with_its_clock_behind(
    made: Made,
) -> None:
    a = made.lease("a")
    b = made.lease("b")
    bus = made.bus()
    publisher_a = refresher(bus, a)
    assert a.step()
    for _ in range(3):
        assert publisher_a.tick()
    last_of_a = valid(made.stored())["seq"]
    a.release()
    # B's clock is an hour behind A's: its own numbering would go back.
    publisher_b = refresher(bus, b, clock=lambda: time.time() - 3600)
    b.on_elected = publisher_b.follow_seq
    bus.calls = 0

    assert b.step()
    assert publisher_b.tick() is True

    first_of_b = valid(made.stored())
    assert first_of_b["seq"] > last_of_a
    assert first_of_b["publisher"] == "b"
    assert bus.calls == 1  # numbered right at once: the election told B the bus's seq
    assert made.bus_seq() == first_of_b["seq"]


def test_on_elected_is_called_again_when_a_lapsed_lease_is_won_back(made: Made) -> None:
    clock = FakeClock()
    a = made.lease("a", LAPSE_MS, clock=clock)
    b = made.lease("b", LAPSE_MS)
    elected_a: list[int] = []
    a.on_elected = elected_a.append
    assert a.step()
    assert elected_a == [0]

    # A pauses past its lease; B takes over, publishes, and stops cleanly.
    clock.advance(10)
    assert wait_until(b.step, timeout=WAIT_S)
    bus = made.bus()
    board_of_b = refresher(bus, b).build()
    bus.publish(dumps(board_of_b), fence=b.token)
    b.release()

    assert a.step() is True  # A, back, wins the lease anew
    assert a.bus_seq == board_of_b["seq"]
    assert elected_a == [0, board_of_b["seq"]]


# -- release and who_leads ----------------------------------------------------------------


def test_release_deletes_only_its_own_lease_and_who_leads_says_who_holds_it(
    made: Made,
) -> None:
    a = made.lease("host-a:7", 10_000)
    b = made.lease("host-b:8", 10_000)
    assert who_leads(made.url) == (None, None, 0)
    assert a.step()
    assert not b.step()
    bus = made.bus()
    board = refresher(bus, a).build()
    bus.publish(dumps(board), fence=a.token)

    b.release()  # a standby's release leaves the holder's lease alone

    assert made.redis.get(LEADER_KEY) == a.token.encode()
    holder, ttl, seq = who_leads(made.url)
    assert holder == "host-a:7"
    assert ttl is not None and 0 < ttl <= 10_000
    assert seq == board["seq"]
    assert a.step() is True

    a.release()

    assert made.redis.exists(LEADER_KEY) == 0
    assert a.leading is False
    assert who_leads(made.url) == (None, None, board["seq"])
    assert b.step() is True  # the standby takes over at once, without waiting for a lapse
    assert who_leads(made.url)[0] == "host-b:8"


def test_a_deposed_leaders_release_leaves_the_new_lease_alone(made: Made) -> None:
    a, b = deposed(made)

    a.release()

    assert made.redis.get(LEADER_KEY) == b.token.encode()
    assert a.leading is False
    assert who_leads(made.url)[0] == "b"


# -- unfenced publish ---------------------------------------------------------------------


def test_an_unfenced_publish_stores_and_announces_even_a_seq_that_does_not_increase(
    made: Made, channel: Channel
) -> None:
    a = made.lease("a")
    assert a.step()  # a lease held by someone does not concern an unfenced publish
    bus = made.bus()
    first = refresher(bus).build()
    older = {**first, "seq": first["seq"] - 5}

    bus.publish(dumps(first))
    bus.publish(dumps(older))
    bus.publish(dumps(older), fence=None)

    assert made.stored() == older
    assert "publisher" not in older
    assert made.bus_seq() == first["seq"]  # the bus's seq never goes back
    announced = channel.boards_until(first["seq"])
    announced += channel.boards_until(older["seq"])
    announced += channel.boards_until(older["seq"])
    assert [board["seq"] for board in announced] == [first["seq"], older["seq"], older["seq"]]
    assert made.redis.xlen(HISTORY_KEY) == 1  # the history only takes increasing seqs


# -- configuration ------------------------------------------------------------------------


def test_the_lease_length_is_configured_by_leader_lease_ms() -> None:
    assert load_settings({}).leader_lease_ms == 1500
    assert load_settings({"LEADER_LEASE_MS": "300"}).leader_lease_ms == 300
    assert load_settings({"LEADER_LEASE_MS": "60000"}).leader_lease_ms == 60_000
    for bad in ("299", "60001", "abc", "1.5"):
        with pytest.raises(ConfigError) as caught:
            load_settings({"LEADER_LEASE_MS": bad})
        assert caught.value.variable == "LEADER_LEASE_MS"
