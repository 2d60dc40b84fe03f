"""The refresher: build a board, validate it, publish it; never crash on a bad tick.

When the source signals changes (``app.refresher.changes``; the live source does), a board
goes out as soon as an input that changes it arrives: the first change after a quiet spell
at once, further changes within ``PUBLISH_MIN_INTERVAL_MS`` together at its end (never
dropped), and a board that would say nothing new is not sent. At least one board goes out
every ``REFRESH_TICK_MS`` anyway (ages and the countdown move on). A source without the
signal (the simulated one) is published every tick, on multiples of it.

The intervals are measured on ``monotonic`` (injected; the real monotonic clock by default),
and one pass of the on-change loop is ``step(now)``: a test drives the schedule with a clock
of its own instead of the loop's thread and real seconds.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any, NamedTuple, Protocol

from app.board.row import BoardRow
from app.board.snapshot import dumps
from app.bus import BoardBus
from app.bus.base import PublishRefusedError
from app.refresher.changes import Changes
from app.refresher.sources.base import Source
from app.schemas import check
from app.schemas.board import PublishedBoardSchema

log = logging.getLogger(__name__)

STOP_CHECK_S = 0.2
STANDBY_CHECK_S = 0.05  # how soon a standby that won the lease notices it


class Lease(Protocol):
    """The refresher's lease on publishing (``app.refresher.leader.Leadership``)."""

    token: str
    name: str

    @property
    def leading(self) -> bool:
        """True while this refresher holds the lease."""

    def lost(self) -> None:
        """The bus refused a publish under ``token``."""


class Observer(Protocol):
    """Takes every board row built (the live record: ``app.calibration.recorder``)."""

    def observe(self, row: BoardRow, at: float, winners: dict[str, bool]) -> None:
        """One row built at ``at`` (typed, with the model's own P(up)), and the resolutions
        seen."""


class Pause(NamedTuple):
    """What the on-change loop waits for after a pass: ``seconds`` at most, cut short by a
    change when ``until_change`` (else a plain wait: changes are being coalesced)."""

    seconds: float
    until_change: bool


class Refresher:
    """Publishes ``source``'s board on ``bus``: on change, and at least every ``tick_ms``."""

    def __init__(
        self,
        source: Source,
        bus: BoardBus,
        tick_ms: int,
        clock: Callable[[], float] = time.time,
        observer: Observer | None = None,
        min_interval_ms: int = 50,
        lease: Lease | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.source = source
        # With several refreshers on one bus, only the lease holder publishes (fenced).
        self.lease = lease
        self.observer = observer
        self.min_interval_ms = min_interval_ms
        # The live source's change signal; a source without one is published on the tick.
        self._changes: Changes | None = getattr(source, "changes", None)
        self._last_content: list[BoardRow] | None = None
        self._monotonic = monotonic  # the intervals between boards are measured on it
        self._sent_at = -math.inf  # when the last board went out (monotonic)
        self._due = -math.inf  # a board goes out by then, change or not (monotonic)
        self.bus = bus
        self.tick_ms = tick_ms
        self._clock = clock
        self._schema = PublishedBoardSchema()
        self._last_seq = 0
        self._failing = False
        self._observer_failing = False
        # The last board's rows as built: what follows the board in this process (the
        # observer, the metrics, the change test) reads them typed, never the board's JSON.
        self._rows: list[BoardRow] = []
        self.published = 0

    def build(self) -> dict[str, Any]:
        """One validated board document, not yet published."""
        now = self._clock()
        now_ms = int(now * 1000)
        seq = max(now_ms, self._last_seq + 1)
        newest = self._changes.newest_ms if self._changes is not None else None
        rows = self.source.rows(now)
        self._rows = rows
        board = {
            "seq": seq,
            "ts": now_ms,
            "source": self.source.name,
            "items": [row.as_json() for row in rows],
            # When the newest input arrived (the build itself, for a source without feeds).
            "newestInputMs": min(newest, now_ms) if newest is not None else now_ms,
        }
        if self.lease is not None:
            board["publisher"] = self.lease.name
        check(self._schema, board, "board")
        self._last_seq = seq
        return board

    def tick(self, only_if_changed: bool = False) -> bool:
        """Build and publish one board (with ``only_if_changed``, not when it would say
        nothing new: True, nothing sent); log and return False when anything fails. A
        standby (another refresher holds the lease) sends nothing: True."""
        try:
            for _ in range(2):  # a second try only after the bus said where its seq is
                if not self.leading:
                    return True
                board = self.build()
                content = _content(self._rows)
                if only_if_changed and content == self._last_content:
                    return True
                if self._publish(board):
                    break
            else:
                return True
            self._observe(board["ts"])
            self._last_content = content
            self._sent_at = self._monotonic()
            _measure(board, self._rows)
        except Exception as exc:
            _metrics().PUBLISH_FAILURES.inc()
            if not self._failing:
                log.exception("refresher tick failed: %s", exc)
            else:
                log.debug("refresher tick still failing: %s", exc)
            self._failing = True
            return False
        if self._failing:
            log.info("refresher publishing again")
            self._failing = False
        self.published += 1
        return True

    @property
    def leading(self) -> bool:
        """True when this refresher may publish: it holds the lease, or there is none."""
        return self.lease is None or self.lease.leading

    def _publish(self, board: dict[str, Any]) -> bool:
        """Publish ``board`` (fenced by the lease); False when the bus refused it."""
        if self.lease is None:
            self.bus.publish(dumps(board))
            return True
        try:
            self.bus.publish(dumps(board), fence=self.lease.token)
        except PublishRefusedError as refused:
            if refused.reason == "seq":  # number the next board after the bus's newest
                self.follow_seq(refused.bus_seq)
            else:
                log.warning("the bus refused a board: this refresher no longer holds the lease")
                self.lease.lost()
            return False
        return True

    def follow_seq(self, bus_seq: int) -> None:
        """Number the next board after ``bus_seq`` (a new leader continues the bus's seq)."""
        self._last_seq = max(self._last_seq, bus_seq)

    def _observe(self, ts_ms: int) -> None:
        """Give the observer the rows of the board of time ``ts_ms``; its failure never
        stops the board."""
        if self.observer is None:
            return
        try:
            winners = self.source.winners()
            for row in self._rows:
                self.observer.observe(row, ts_ms / 1000, winners)
        except Exception:
            if not self._observer_failing:
                log.exception("the track record could not take a board")
            self._observer_failing = True
        else:
            self._observer_failing = False

    def run(self, stop: threading.Event) -> None:
        """Publish until ``stop`` is set: on change when the source signals changes, else
        every tick on multiples of ``tick_ms`` (see the module docstring)."""
        log.info("refresher started: source=%s tick=%dms", self.source.name, self.tick_ms)
        if self.lease is None:  # the only refresher (embedded): it leads for as long as it runs
            _metrics().LEADING.set(1)
        period = self.tick_ms / 1000.0
        changes = self._changes
        if changes is None:
            while not stop.is_set():
                if not self.leading:
                    stop.wait(STANDBY_CHECK_S)
                    continue
                self.tick()
                now = self._clock()
                stop.wait(period - (now % period) or period)
        else:
            self._run_on_change(stop, changes)
        log.info("refresher stopped after %d boards", self.published)

    def _run_on_change(self, stop: threading.Event, changes: Changes) -> None:
        self._due = self._monotonic()
        while not stop.is_set():
            pause = self.step(self._monotonic())
            if pause.until_change:
                # In slices, so that a stop is noticed within one even with no change coming.
                changes.wait(min(STOP_CHECK_S, pause.seconds))
            else:
                stop.wait(pause.seconds)

    def step(self, now: float) -> Pause:
        """One pass of the on-change loop at monotonic time ``now``: publish what is due
        (the first change after a quiet spell at once, changes within ``min_interval_ms`` of
        the last board at the interval's end, a board every ``tick_ms`` anyway); then how
        long to wait, and whether a change ends the wait."""
        changes = self._changes
        assert changes is not None, "a source without a change signal is published on the tick"
        if not self.leading:  # a standby: publish the moment the lease is won
            self._due = now
            return Pause(STANDBY_CHECK_S, until_change=False)
        changed = changes.pending
        if not changed and now < self._due:
            return Pause(self._due - now, until_change=True)
        if changed and now < self._due:
            # Coalesce: what arrives until the interval since the last board is over goes
            # out in the same board.
            rest = self._sent_at + self.min_interval_ms / 1000.0 - now
            if rest > 0:
                return Pause(rest, until_change=False)
            changes.clear()
            self.tick(only_if_changed=True)
            self._due = self._sent_at + self.tick_ms / 1000.0
        else:
            changes.clear()
            self.tick()
            # After a failed tick the next try waits a period too (no busy loop).
            self._due = max(self._sent_at, now) + self.tick_ms / 1000.0
        return Pause(0.0, until_change=True)

    def start_background(self) -> threading.Event:
        """Run in a daemon thread (the embedded mode); set the returned event to stop it."""
        stop = threading.Event()
        thread = threading.Thread(
            target=self.run, args=(stop,), name="probboard-refresher", daemon=True
        )
        thread.start()
        return stop


def _metrics() -> ModuleType:
    """The refresher's series, registered only in a process that refreshes (a web worker
    that imports this module for the embedded mode must not show them)."""
    from app.metrics import refresher

    return refresher


def _measure(board: dict[str, Any], rows: list[BoardRow]) -> None:
    """The published board's delay from its newest input to its build (the publish follows
    within one Redis round trip), and its inputs' ages (those of its first row)."""
    metrics = _metrics()
    metrics.BOARDS_PUBLISHED.inc()
    metrics.PUBLISH_DELAY.observe(max(0, board["ts"] - board["newestInputMs"]) / 1000)
    for row in rows[:1]:
        ages = row.live.input_ages_ms if row.live is not None else {}
        for name, age_ms in ages.items():
            metrics.INPUT_AGE.labels(name).set(math.nan if age_ms is None else age_ms / 1000)


def _content(rows: list[BoardRow]) -> list[BoardRow]:
    """What a board says: its rows without what changes with time alone, not with an input
    (the data time, the time left and the inputs' ages), nor the model's unrounded P(up),
    which is not published (not a reason to send a board)."""
    return [
        dataclasses.replace(
            row,
            ts=0,
            rem_secs=0.0,
            model_p_up=None,
            live=None if row.live is None else dataclasses.replace(row.live, input_ages_ms={}),
        )
        for row in rows
    ]
