"""Issue 35's attacks on the production shape: a refresher process and gunicorn on Redis,
reading the local fakes, sampled through ``GET /api/probboard/latest`` twice a second.

While an attack lasts every served item is STALE (``isStale``) or RIGHT: its price one the
spot really had in the last seconds, its tokens this window's, its books the CLOB's. Within
``RECOVERY_S`` of the input turning honest the item is fresh and right again, with no
restart. The spot's and the books' attacks are one test each on one service of the module,
each starting from a fresh and right row; Gamma's (they bite at a window's first lookup)
each on a service started with the fault on. The price to beat's two rows need a TWAP
window's T0 or a hole at T0, which the in-process fault suite stages
(``tests/integration/faults/test_price_to_beat_witness.py``).

Time: the fakes and the service's processes share one ``OffsetClock`` (``CLOCK_OFFSET_MS``)
that puts "now" a few seconds into a window of an hour ago, with room for every attack in
it, so no test waits for a real window boundary; the attacks' seconds (9 s late, 12 s held,
5 s to recover) stay real.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from harness.clocks import OffsetClock
from harness.fake_polymarket import BrownianPath, FakeBook, FakePolymarket, running
from harness.processes import RedisServer, Service, service_env
from harness.spans import WINDOW_S, window_start
from tests.support.contract import validated

LATEST = "/api/probboard/latest"
SAMPLE_S = 0.5
ATTACK_S = 12.0
RECOVERY_S = 5.0  # the bound
STALE_MS = 3000  # the default STALE_THRESHOLD_MS
READY_S = 60.0  # generous: the service's start on a loaded machine


@dataclass
class World:
    """The fakes, the true path of the spot they stream, and the wall clock they share with
    the service."""

    fakes: FakePolymarket
    path: BrownianPath
    clock: OffsetClock


AGO_S = 3600  # the module's "now" is an hour back: a window the real clock is not in
INTO_WINDOW_S = 5.0  # ... and this far into it: every attack fits before its end
ROOM_S = ATTACK_S + RECOVERY_S + 10.0  # what an attack needs left in the window


def _clock() -> OffsetClock:
    """A wall clock that reads ``INTO_WINDOW_S`` into a window ``AGO_S`` ago."""
    real = time.time()
    return OffsetClock.reading(window_start(real - AGO_S) + INTO_WINDOW_S)


@contextmanager
def _world(clock: OffsetClock) -> Iterator[World]:
    with running(auto_markets=True, clock=clock) as fakes:
        path = fakes.rtds.live(period_s=0.2)
        fakes.clob_ws.keep_alive(0.1)
        yield World(fakes, path, clock)


@pytest.fixture
def world() -> Iterator[World]:
    """The fakes of one test, a few seconds into a window on their clock."""
    with _world(_clock()) as world:
        yield world


@dataclass
class Served:
    """The module's service (a refresher and one gunicorn worker on a Redis of its own) and
    the fakes it reads."""

    world: World
    service: Service


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, postgres_database: str) -> Iterator[Served]:
    """One service for the spot's and the books' attacks (its own Redis: other tests of the
    session empty the shared one)."""
    workdir: Path = tmp_path_factory.mktemp("witnesses")
    redis = RedisServer(workdir)
    redis.start()
    service = Service(workdir, service_env())
    try:
        with _world(_clock()) as world:
            service.env.update(
                {**world.fakes.env(), **world.clock.env()},
                REDIS_URL=redis.url,
                DATABASE_URL=postgres_database,
            )
            service.start_refresher()
            service.start_web(workers=1)
            _fresh_and_right(service, world, READY_S, "start")
            yield Served(world, service)
    finally:
        service.stop()
        redis.stop()


NO_ROW: dict[str, Any] = {"isStale": True, "suspect": [], "p_up_pct": None}  # nothing yet


def _item(service: Service) -> dict[str, Any]:
    """The served row (before the first board: ``NO_ROW``, which shows nothing)."""
    status, _, body = service.get(LATEST)
    assert status == 200, body
    items: list[dict[str, Any]] = validated("board", body)["items"]
    assert len(items) <= 1, items
    return items[0] if items else NO_ROW


def _wrong(item: dict[str, Any], world: World, at: float) -> list[str]:
    """How a served item differs from the truth at ``at`` (empty: right)."""
    if item is NO_ROW:
        return ["no row"]
    found = []
    # A fresh item's price may be as old as the stale threshold, plus its point's second and
    # the time the board took to reach the worker.
    first = math.floor(at - STALE_MS / 1000) - 2
    true = {float(world.path.value(s)) for s in range(first, math.floor(at) + 1)}
    if item["price"] not in true:
        found.append(f"price {item['price']} is no true spot of the last seconds")
    market = world.fakes.market(item["windowStart"])
    if market is None or (item["up_token_id"], item["down_token_id"]) != market.tokens:
        found.append("not this window's tokens")
    else:
        for side, token in (("up", market.up_token), ("down", market.down_token)):
            if (item[f"{side}_bid"], item[f"{side}_ask"]) != world.fakes.best(token):
                found.append(f"{side} book {item[f'{side}_bid']}/{item[f'{side}_ask']}")
    return found


def _fresh_and_right(service: Service, world: World, within_s: float, what: str) -> None:
    deadline = time.monotonic() + within_s
    while True:
        at = world.clock()
        item = _item(service)
        wrong = _wrong(item, world, at)
        assert item["isStale"] or not wrong, f"{what}: fresh and wrong: {wrong}; {item}"
        if not item["isStale"] and not wrong and item["p_up_pct"] is not None:
            return
        assert time.monotonic() < deadline, f"{what}: not fresh and right in time: {item}"
        time.sleep(0.1)


def _held(
    service: Service, world: World, what: str, seconds: float = ATTACK_S
) -> list[dict[str, Any]]:
    """Sample for ``seconds``: never fresh and wrong. Returns the items."""
    items = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        at = world.clock()
        item = _item(service)
        wrong = _wrong(item, world, at)
        assert item["isStale"] or not wrong, f"{what}: fresh and wrong: {wrong}; {item}"
        items.append(item)
        time.sleep(SAMPLE_S)
    return items


Attack = tuple[str, Callable[[World], None], Callable[[World], None]]


def _spot(glitch: Callable[[Decimal], Decimal] | None) -> Callable[[World], None]:
    def switch(world: World) -> None:
        world.fakes.rtds.spot_glitch = glitch

    return switch


def _frozen(world: World) -> None:
    value = world.path.value(int(world.clock()))
    world.fakes.rtds.spot_glitch = lambda _: value


def _drifting(world: World) -> None:
    began = world.clock()
    world.fakes.rtds.spot_glitch = lambda v: v * Decimal(1 + 0.0003 * (world.clock() - began))


def _late(seconds: float) -> Callable[[World], None]:
    def switch(world: World) -> None:
        world.fakes.rtds.spot_lag_s = seconds

    return switch


def _top_offset(offset: int) -> Callable[[World], None]:
    """The socket tells, under this window's tokens, the tops of the next window's (whose
    books look decided: UP 0.90/0.92, DOWN 0.08/0.10; every listed window's books are
    alike otherwise, and the fault would change nothing)."""

    def switch(world: World) -> None:
        next_market = world.fakes.market_of("BTC", window_start(world.clock()) + WINDOW_S)
        assert next_market is not None
        books = world.fakes.books
        books[next_market.up_token] = FakeBook(bids={"0.90": "100"}, asks={"0.92": "100"})
        books[next_market.down_token] = FakeBook(bids={"0.08": "100"}, asks={"0.10": "100"})
        world.fakes.clob_ws.top_offset = offset

    return switch


ATTACKS: list[Attack] = [
    ("the spot stamped and sent 9 s late", _late(9.0), _late(0.0)),
    ("the spot frozen", _frozen, _spot(None)),
    ("a walk 0.5 % off", _spot(lambda v: v * Decimal("1.005")), _spot(None)),
    ("another coin's price", _spot(lambda v: v * Decimal("0.03")), _spot(None)),
    ("the spot drifting 0.03 %/s", _drifting, _spot(None)),
    ("the next window's top under these tokens", _top_offset(1), _top_offset(0)),
]


SAID = {"a walk 0.5 % off", "the spot drifting 0.03 %/s"}  # a witness contradicts the input


@pytest.mark.parametrize("attack", ATTACKS, ids=[what for what, _, _ in ATTACKS])
def test_a_spot_or_book_attack_never_puts_a_fresh_wrong_row_on_the_served_board(
    attack: Attack, served: Served
) -> None:
    """From a fresh and right row, the attack for ``ATTACK_S``: never fresh and wrong, stale
    at some point (where a witness contradicts the input, the row says why in ``suspect``);
    fresh and right within ``RECOVERY_S`` of the input turning honest."""
    what, switch_on, honest = attack
    world, service = served.world, served.service
    # Played inside the module's window: no price to beat is latched while the spot is
    # refused (what a roll then does is the price to beat's story).
    left = window_start(world.clock()) + WINDOW_S - world.clock()
    assert left >= ROOM_S, f"the module's window has {left:.0f} s left, {ROOM_S:.0f} s needed"
    _fresh_and_right(service, world, RECOVERY_S, f"before {what}")
    switch_on(world)
    try:
        items = _held(service, world, what)
    finally:
        honest(world)
    assert any(item["isStale"] for item in items), f"{what}: never stale: {items[-1]}"
    if what in SAID:
        assert any(item["suspect"] for item in items), f"{what}: no reason in the row's suspect"
    _fresh_and_right(service, world, RECOVERY_S, f"after {what}")


def test_a_service_started_with_an_offset_serves_the_window_of_its_clock(served: Served) -> None:
    """CLOCK_OFFSET_MS moves the service's wall clock: the served row's window is the one of
    the offset time (an hour back), not the real clock's, and the row is fresh by it."""
    world, service = served.world, served.service
    _fresh_and_right(service, world, RECOVERY_S, "the served row")
    status, _, body = service.get(LATEST)
    assert status == 200, body
    board = validated("board", body)
    item = board["items"][0]
    shifted = world.clock()
    assert item["windowStart"] == window_start(shifted), (item, shifted)
    assert item["windowStart"] != window_start(time.time()), item
    assert item["windowEnd"] == item["windowStart"] + WINDOW_S, item
    assert abs(item["ts"] / 1000 - shifted) < STALE_MS / 1000 + 2, (item["ts"], shifted)


@pytest.mark.parametrize(
    "fault",
    ["tokens_offset", "condition_offset", "swapped_outcomes"],
    ids=["next-tokens", "next-tokens-and-condition", "outcomes-swapped"],
)
def test_gammas_wrong_identities_never_reach_the_served_board_fresh(
    fault: str, world: World, fresh_redis: RedisServer, service: Service, postgres_database: str
) -> None:
    """Gamma names the next window's token ids (and its conditionId), or reverses the
    outcomes beside the token ids, from the service's start: the CLOB's own market
    contradicts it, so the served row is stale (never fresh with another window's or the
    other outcome's tokens); fresh and right within 5 s of Gamma answering right again. The
    lookups of one window (no roll): the clock starts a few seconds into one."""
    gamma = world.fakes.gamma
    if fault == "swapped_outcomes":
        gamma.swapped_outcomes = True
    else:
        gamma.tokens_offset = 1
        gamma.condition_offset = 1 if fault == "condition_offset" else 0
    service.env.update(
        {**world.fakes.env(), **world.clock.env()},
        REDIS_URL=fresh_redis.url,
        DATABASE_URL=postgres_database,
    )
    # Own refresher and gunicorn: Gamma lies from their start (the fault).
    service.start_refresher()
    service.start_web(workers=1)
    items = _held(service, world, f"Gamma's {fault}", seconds=15.0)
    assert any(item["suspect"] for item in items), items[-1]  # it said why
    gamma.swapped_outcomes = False
    gamma.tokens_offset = gamma.condition_offset = 0
    _fresh_and_right(service, world, RECOVERY_S, f"Gamma right again after {fault}")
