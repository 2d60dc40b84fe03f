"""Books that move at the fake CLOB, and when each move reached a stream client.

``MarketMaker`` moves the books of the current window of one or more markets (of each window
length in ``spans``: a 15-minute market is a market of its own): per market, ``per_s``
changes a second, the markets staggered evenly within the period (four markets at 10 a
second: a change every 25 ms, each market's every 100 ms). Each change adds a bid one
tick above a book's resting best bid, or takes it away again, so that every change moves a
best bid: with ``sides=("up", "down")`` a market cycles through four distinct (UP bid,
DOWN bid) states, so a board's row tells which change it shows. Every change is logged with
the time just before the fake sent it (``Change``).

``change_delays`` matches those changes with the boards a probe client received
(``bench.stream_probe``): the delay of a change is the time from the change until the first
board that shows it or a later change of its market, whether coalescing put it in a board
alone or with others.
"""

from __future__ import annotations

import bisect
import math
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.markets import Span
from harness.fake_polymarket import FakePolymarket
from harness.spans import FIVE_MINUTES

State = tuple[float | None, float | None]  # the (UP, DOWN) best bids of one market
TICK = 0.01


@dataclass(frozen=True)
class Change:
    """One move: when (epoch ms, just before the fake CLOB sent it), which market (and of
    which window length), and its (UP, DOWN) best bids after it."""

    at_ms: float
    symbol: str
    state: State
    window: str = FIVE_MINUTES.name


class MarketMaker:
    """Moves ``symbols``' books at the fake CLOB; see the module docstring."""

    def __init__(
        self,
        world: FakePolymarket,
        per_s: float,
        symbols: Sequence[str] = ("BTC",),
        sides: Sequence[str] = ("up",),
        spans: Sequence[Span] = (FIVE_MINUTES,),
    ) -> None:
        self.world = world
        self.period = 1.0 / per_s
        self.markets = [(symbol, span) for span in spans for symbol in symbols]
        self.sides = tuple(sides)
        self.moves = 0
        self.changes: list[Change] = []
        # (symbol, window, side) -> the level added
        self._added: dict[tuple[str, str, str], tuple[str, str]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        """Start moving."""
        self._thread.start()

    def stop(self) -> None:
        """Stop moving."""
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        count = len(self.markets)
        first = time.monotonic() + self.period
        due = [first + i * self.period / count for i in range(count)]
        steps = [0] * count
        while True:
            i = min(range(count), key=due.__getitem__)
            if self._stop.wait(max(0.0, due[i] - time.monotonic())):
                return
            self._move(*self.markets[i], steps[i])
            steps[i] += 1
            due[i] += self.period
            late = time.monotonic() - due[i]
            if late > 0:  # after a stall: skip the missed moves, keep the market's phase
                due[i] += math.ceil(late / self.period) * self.period

    def _move(self, symbol: str, span: Span, step: int) -> None:
        """Step ``step`` of the cycle: add a bid on each side in turn, then remove them."""
        market = self.world.market_of(symbol, span.start(self.world.clock()), span)
        if market is None:
            return
        side = self.sides[step % len(self.sides)]
        token = market.up_token if side == "up" else market.down_token
        adding = step % (2 * len(self.sides)) < len(self.sides)
        at_ms = self.world.clock() * 1000.0
        if adding:
            bid, ask = self.world.best(token)
            if bid is None or ask is None or bid + 1.5 * TICK >= ask:
                return
            level = (token, f"{bid + TICK:.2f}")
            self.world.set_level(token, "BUY", level[1], "50")
            self._added[symbol, span.name, side] = level
        else:
            added = self._added.pop((symbol, span.name, side), None)
            if added is None:
                return
            self.world.set_level(added[0], "BUY", added[1], "0")
            if added[0] != token:  # a window that has ended: not a change of the board's row
                return
        self.moves += 1
        up = self.world.best(market.up_token)[0]
        down = self.world.best(market.down_token)[0]
        self.changes.append(Change(at_ms, symbol, _rounded((up, down)), span.name))


def _state(row: dict[str, Any]) -> State:
    """A board row's (UP, DOWN) best bids, rounded as a change's are."""
    up, down = row.get("up_bid"), row.get("down_bid")
    return _rounded(
        (
            up if isinstance(up, float | int) else None,
            down if isinstance(down, float | int) else None,
        )
    )


def change_delays(
    changes: Sequence[Change],
    boards: Sequence[dict[str, Any]],
    since_ms: float,
    until_ms: float,
) -> tuple[list[float], int]:
    """(delays in ms, changes never seen) of the changes made between ``since_ms`` and
    ``until_ms``, from one client's boards in arrival order (``bench.stream_probe``: each
    with ``at`` its arrival, ``id`` its publication, ``rows`` symbol -> row), all of one
    window length (``changes`` of the others are not this client's to see).

    A board's row shows the newest change of its market, made before the board was built,
    that left the book in the row's state (the cycle has at least two distinct states, so a
    change is recognised as long as it reaches a board within a full cycle).
    """
    by_symbol: dict[str, list[Change]] = {}
    for change in sorted(changes, key=lambda c: c.at_ms):
        by_symbol.setdefault(change.symbol, []).append(change)
    reached = {symbol: 0 for symbol in by_symbol}  # first change not yet seen, per market
    times = {symbol: [c.at_ms for c in log] for symbol, log in by_symbol.items()}
    delays: list[float] = []
    for board in boards:
        for symbol, row in board["rows"].items():
            log = by_symbol.get(symbol)
            if not log:
                continue
            state = _state(row)
            shown = -1
            newest = bisect.bisect_right(times[symbol], board["id"] + 1.0) - 1
            for j in range(newest, max(-1, newest - 8), -1):
                if log[j].state == state:
                    shown = j
                    break
            while reached[symbol] <= shown:
                change = log[reached[symbol]]
                if since_ms <= change.at_ms <= until_ms:
                    delays.append(board["at"] - change.at_ms)
                reached[symbol] += 1
    unseen = sum(
        1
        for symbol, log in by_symbol.items()
        for change in log[reached[symbol] :]
        if since_ms <= change.at_ms <= until_ms
    )
    return delays, unseen


def _rounded(state: State) -> State:
    """Best bids rounded to 4 decimals (a float read from JSON compares equal to the fake's)."""
    return (
        round(state[0], 4) if state[0] is not None else None,
        round(state[1], 4) if state[1] is not None else None,
    )
