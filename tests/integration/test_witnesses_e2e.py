"""Issue 35's attacks on the production shape: a refresher process and gunicorn on Redis,
reading the local fakes, sampled through ``GET /api/probboard/latest`` twice a second.

While an attack lasts every served item is STALE (``isStale``) or RIGHT: its price one the
spot really had in the last seconds, its tokens this window's, its books the CLOB's. Within
``RECOVERY_S`` of the input turning honest the item is fresh and right again, with no
restart. The spot's and the books' attacks are played one after the other on one running
service; Gamma's (they bite at a window's first lookup) each on a service started with the
fault on. The price to beat's two rows need a TWAP window's T0 or a hole at T0, which the
in-process fault suite stages (``tests/integration/faults/test_price_to_beat_witness.py``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pytest

from app.markets import WINDOW_S, window_start
from harness.fake_polymarket import BrownianPath, FakeBook, FakePolymarket, running
from harness.processes import RedisServer, Service
from tests.support.contract import validated

LATEST = "/api/probboard/latest"
SAMPLE_S = 0.5
ATTACK_S = 12.0
RECOVERY_S = 5.0  # the bound
STALE_MS = 3000  # the default STALE_THRESHOLD_MS
READY_S = 60.0  # generous: the service's start on a loaded machine


@dataclass
class World:
    """The fakes and the true path of the spot they stream."""

    fakes: FakePolymarket
    path: BrownianPath


@pytest.fixture
def world() -> Iterator[World]:
    with running(auto_markets=True) as fakes:
        path = fakes.rtds.live(period_s=0.2)
        fakes.clob_ws.keep_alive(0.1)
        yield World(fakes, path)


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
        at = time.time()
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
        at = time.time()
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
    value = world.path.value(int(time.time()))
    world.fakes.rtds.spot_glitch = lambda _: value


def _drifting(world: World) -> None:
    began = time.time()
    world.fakes.rtds.spot_glitch = lambda v: v * Decimal(1 + 0.0003 * (time.time() - began))


def _late(seconds: float) -> Callable[[World], None]:
    def switch(world: World) -> None:
        world.fakes.rtds.spot_lag_s = seconds

    return switch


def _top_offset(offset: int) -> Callable[[World], None]:
    """The socket tells, under this window's tokens, the tops of the next window's (whose
    books look decided: UP 0.90/0.92, DOWN 0.08/0.10; every listed window's books are
    alike otherwise, and the fault would change nothing)."""

    def switch(world: World) -> None:
        next_market = world.fakes.market_of("BTC", window_start(time.time()) + WINDOW_S)
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


def test_the_spot_and_book_attacks_never_put_a_fresh_wrong_row_on_the_served_board(
    world: World, fresh_redis: RedisServer, service: Service, postgres_database: str
) -> None:
    service.env.update(world.fakes.env(), REDIS_URL=fresh_redis.url, DATABASE_URL=postgres_database)
    # The attacks take about 100 s: played inside one window, so that no price to beat is
    # latched while the spot is refused (what a roll then does is the price to beat's story).
    left = WINDOW_S - time.time() % WINDOW_S
    if left < 150:
        time.sleep(left + 5)
    service.start_refresher()
    service.start_web(workers=1)
    _fresh_and_right(service, world, READY_S, "start")
    said: dict[str, bool] = {}
    for what, attack, honest in ATTACKS:
        attack(world)
        items = _held(service, world, what)
        assert any(item["isStale"] for item in items), f"{what}: never stale: {items[-1]}"
        said[what] = any(item["suspect"] for item in items)
        honest(world)
        _fresh_and_right(service, world, RECOVERY_S, f"after {what}")
    # Where a witness contradicted an input, the served row said so.
    for what in ("a walk 0.5 % off", "the spot drifting 0.03 %/s"):
        assert said[what], f"{what}: no reason in the row's suspect"


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
    other outcome's tokens); fresh and right within 5 s of Gamma answering right again."""
    left = WINDOW_S - time.time() % WINDOW_S
    if left < 60:  # the lookups of one window: no roll during the test
        time.sleep(left + 5)
    gamma = world.fakes.gamma
    if fault == "swapped_outcomes":
        gamma.swapped_outcomes = True
    else:
        gamma.tokens_offset = 1
        gamma.condition_offset = 1 if fault == "condition_offset" else 0
    service.env.update(world.fakes.env(), REDIS_URL=fresh_redis.url, DATABASE_URL=postgres_database)
    service.start_refresher()
    service.start_web(workers=1)
    items = _held(service, world, f"Gamma's {fault}", seconds=15.0)
    assert any(item["suspect"] for item in items), items[-1]  # it said why
    gamma.swapped_outcomes = False
    gamma.tokens_offset = gamma.condition_offset = 0
    _fresh_and_right(service, world, RECOVERY_S, f"Gamma right again after {fault}")
