"""The stream's ticker on a driven clock: what falls due when (``Ticker.step``).

Each test drives the monotonic and wall clocks the ticker was made with and calls ``step``
itself, so the schedule (a stale board re-rendered every second, leases renewed every
``RENEW_S`` and every ``RENEW_RETRY_S`` after a failure, keys re-checked every
``RECHECK_S``, every stream ended when the worker stops) is checked exactly, without the
ticker's thread and without sleeping through it. The same ticker under gunicorn and Redis,
on real time, is in ``tests/integration/test_stream_gunicorn.py``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

import pytest

from app.board.render import BoardRenderer
from app.board.snapshot import Snapshot, dumps, parse_snapshot
from app.bus.memory import MemoryBoardBus
from app.config import load_settings
from app.markets import parse_symbols
from app.refresher.loop import Refresher
from app.refresher.sources.simulated import SimulatedSource
from app.stream.client import Client
from app.stream.fanout import FanOut
from app.stream.slots import MemorySlots
from app.stream.ticker import RECHECK_S, RENEW_RETRY_S, RENEW_S, STALE_REFRESH_S, Ticker

T0 = 1_000.0  # the driven monotonic clock's start
WALL_MS = 1_767_225_600_000  # the driven wall clock's start (epoch ms)
STALE_MS = 3_000


class ScriptedSlots(MemorySlots):
    """Slots in memory whose renewals are recorded and answer as the test says."""

    def __init__(self) -> None:
        super().__init__()
        self.renewals: list[list[tuple[int, str]]] = []
        self.renew_answers: list[bool] = []  # the next renewals' answers (then True)

    def renew(self, leases: Iterable[tuple[int, str]]) -> bool:
        self.renewals.append(list(leases))
        return self.renew_answers.pop(0) if self.renew_answers else True


class Driven:
    """A ticker, its fan-out and slots, on clocks the test moves."""

    def __init__(self, run_in_context: Callable[[Callable[[], None]], None] = lambda f: f()):
        self.mono = T0
        self.wall_ms = WALL_MS
        self.lock = threading.Lock()
        self.clients: set[Client] = set()
        self.slots = ScriptedSlots()
        self.fan = FanOut(BoardRenderer(load_settings({})), self.lock, wall_ms=lambda: self.wall_ms)
        self.ticker = Ticker(
            self.fan,
            self.slots,
            self.clients,
            self.lock,
            STALE_MS,
            run_in_context,
            clock=lambda: self.mono,
            wall_ms=lambda: self.wall_ms,
        )

    def connect(self, key_id: int, digest: str = "d") -> Client:
        client = Client(key_id=key_id, key_digest=digest, plan="vip_pro")
        assert self.slots.acquire(key_id, client.conn_id, 10)
        self.clients.add(client)
        self.ticker.fresh.append(client)
        return client

    def at(self, seconds: float) -> bool:
        """One step at ``seconds`` after the start (both clocks moved there)."""
        self.mono = T0 + seconds
        self.wall_ms = WALL_MS + round(seconds * 1000)
        return self.ticker.step(self.mono)


def a_board(ts_ms: int) -> Snapshot:
    """A simulated board built at ``ts_ms``."""
    source = SimulatedSource(parse_symbols("BTC"), seed=1)
    refresher = Refresher(source, MemoryBoardBus(), 500, clock=lambda: ts_ms / 1000)
    return parse_snapshot(dumps(refresher.build()))


def test_a_new_stream_is_renewed_at_the_next_step_then_every_renew_period() -> None:
    driven = Driven()
    client = driven.connect(7)
    driven.at(0.25)
    assert driven.slots.renewals == [[(7, client.conn_id)]]  # its short first lease
    for seconds in (0.5, 1.0, RENEW_S - 0.25):
        driven.at(seconds)
    assert len(driven.slots.renewals) == 1
    driven.at(RENEW_S)
    assert driven.slots.renewals[-1] == [(7, client.conn_id)]
    driven.at(RENEW_S + 0.25)
    driven.at(2 * RENEW_S - 0.25)
    assert len(driven.slots.renewals) == 2
    driven.at(2 * RENEW_S)
    assert len(driven.slots.renewals) == 3


def test_after_a_failed_renewal_it_retries_every_second_until_one_succeeds() -> None:
    driven = Driven()
    driven.connect(7)
    driven.at(0.25)  # the first lease
    driven.slots.renew_answers = [False, False]
    driven.at(RENEW_S)  # fails
    driven.at(RENEW_S + RENEW_RETRY_S - 0.25)
    assert len(driven.slots.renewals) == 2
    driven.at(RENEW_S + RENEW_RETRY_S)  # fails again
    driven.at(RENEW_S + 2 * RENEW_RETRY_S)  # succeeds
    assert len(driven.slots.renewals) == 4
    driven.at(RENEW_S + 2 * RENEW_RETRY_S + RENEW_RETRY_S)  # back to the full period
    assert len(driven.slots.renewals) == 4
    driven.at(2 * RENEW_S + 2 * RENEW_RETRY_S)
    assert len(driven.slots.renewals) == 5


def test_no_stream_no_renewal() -> None:
    driven = Driven()
    for seconds in (1.0, RENEW_S, 3 * RENEW_S):
        driven.at(seconds)
    assert driven.slots.renewals == []


def test_keys_are_rechecked_every_recheck_period_and_a_refused_key_ends_its_streams() -> None:
    checked: list[str] = []
    done = threading.Event()

    def run_in_context(job: Callable[[], None]) -> None:
        job()
        done.set()

    driven = Driven(run_in_context)
    kept = driven.connect(1, "good")
    ended = driven.connect(2, "revoked")
    also_ended = driven.connect(3, "revoked")

    def check(digest: str) -> str | None:
        checked.append(digest)
        return '{"ok":false}' if digest == "revoked" else None

    driven.ticker.key_check = check
    driven.at(RECHECK_S - 0.25)
    assert not done.is_set() and checked == []
    driven.at(RECHECK_S)
    assert done.wait(5), "the re-check thread did not run"
    assert sorted(checked) == ["good", "revoked"]  # one check per key, not per stream
    assert kept.ended is None
    assert ended.ended is not None and also_ended.ended is not None
    assert b'{"ok":false}' in ended.ended


@pytest.mark.parametrize(
    ("age_s", "republished"), [(STALE_MS / 1000 - 0.5, False), (STALE_MS / 1000 + 0.5, True)]
)
def test_a_stale_board_is_rendered_again_each_second_with_its_age(
    age_s: float, republished: bool
) -> None:
    driven = Driven()
    board = a_board(WALL_MS)
    driven.fan.snapshot = board
    driven.fan.publish(board)
    assert driven.fan.frame is not None
    first = driven.fan.frame
    driven.at(age_s - STALE_REFRESH_S)  # checked a second ago: not yet stale
    assert driven.fan.frame.generation == first.generation
    driven.at(age_s)
    frame = driven.fan.frame
    assert (frame.generation > first.generation) is republished
    if republished:
        assert frame.seq == first.seq  # the same board, its age grown
        assert frame.now_ms == WALL_MS + round(age_s * 1000)


def test_a_stopping_worker_ends_every_stream_and_the_ticker() -> None:
    driven = Driven()
    driven.connect(7)
    assert driven.at(0.25)
    driven.ticker.alive = lambda: False
    assert not driven.at(0.5)
    assert driven.fan.closing


def test_a_hung_key_check_never_holds_up_renewals_and_is_not_started_twice() -> None:
    """The database hangs under a re-check: leases are still renewed on time, and no second
    re-check piles up behind the first (the hung-database fault test shows it for real)."""
    release = threading.Event()
    entered = threading.Event()
    started: list[str] = []
    finished = threading.Event()

    def run_in_context(job: Callable[[], None]) -> None:
        job()
        finished.set()

    def hung_check(digest: str) -> str | None:
        started.append(digest)
        entered.set()
        release.wait(10)
        return None

    driven = Driven(run_in_context)
    driven.connect(1, "held")
    driven.ticker.key_check = hung_check
    driven.at(0.25)  # the first lease
    try:
        driven.at(RECHECK_S)  # the re-check starts and hangs (and a renewal falls due)
        assert entered.wait(5), "the re-check did not start"
        renewed = len(driven.slots.renewals)
        for seconds in (RECHECK_S + RENEW_S, 2 * RECHECK_S, 3 * RECHECK_S):
            assert driven.at(seconds)
        assert len(driven.slots.renewals) == renewed + 3
        assert started == ["held"]  # one re-check, still hung
    finally:
        release.set()
    assert finished.wait(5)
