"""The refresher: build a board every tick, validate it, publish it; never crash on a bad tick."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from app.board.snapshot import dumps
from app.bus import BoardBus
from app.refresher.sources.base import Source
from app.schemas import check
from app.schemas.board import PublishedBoardSchema

log = logging.getLogger(__name__)


class Observer(Protocol):
    """Takes every board row built (the live record: ``app.calibration.recorder``)."""

    def observe(
        self, row: dict[str, Any], p_up: float | None, at: float, winners: dict[str, bool]
    ) -> None:
        """One row built at ``at``, with the model's own ``p_up`` and the resolutions seen."""


class Refresher:
    """Publishes ``source``'s board on ``bus`` every ``tick_ms``, aligned to the wall clock."""

    def __init__(
        self,
        source: Source,
        bus: BoardBus,
        tick_ms: int,
        clock: Callable[[], float] = time.time,
        observer: Observer | None = None,
    ) -> None:
        self.source = source
        self.observer = observer
        self.bus = bus
        self.tick_ms = tick_ms
        self._clock = clock
        self._schema = PublishedBoardSchema()
        self._last_seq = 0
        self._failing = False
        self._observer_failing = False
        self.published = 0

    def build(self) -> dict[str, Any]:
        """One validated board document, not yet published."""
        now = self._clock()
        now_ms = int(now * 1000)
        seq = max(now_ms, self._last_seq + 1)
        board = {
            "seq": seq,
            "ts": now_ms,
            "source": self.source.name,
            "items": self.source.rows(now),
        }
        check(self._schema, board, "board")
        self._last_seq = seq
        return board

    def tick(self) -> bool:
        """Build and publish one board; log and return False when anything fails."""
        try:
            board = self.build()
            self._observe(board)
            self.bus.publish(dumps(board))
        except Exception as exc:
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

    def _observe(self, board: dict[str, Any]) -> None:
        """Give the observer the board's rows; its failure never stops the board."""
        if self.observer is None:
            return
        try:
            winners = self.source.winners()
            for row in board["items"]:
                self.observer.observe(row, self.source.model_p_up, board["ts"] / 1000, winners)
        except Exception:
            if not self._observer_failing:
                log.exception("the track record could not take a board")
            self._observer_failing = True
        else:
            self._observer_failing = False

    def run(self, stop: threading.Event) -> None:
        """Tick until ``stop`` is set; ticks land on multiples of ``tick_ms``."""
        log.info("refresher started: source=%s tick=%dms", self.source.name, self.tick_ms)
        period = self.tick_ms / 1000.0
        while not stop.is_set():
            self.tick()
            now = self._clock()
            stop.wait(period - (now % period) or period)
        log.info("refresher stopped after %d boards", self.published)

    def start_background(self) -> threading.Event:
        """Run in a daemon thread (the embedded mode); set the returned event to stop it."""
        stop = threading.Event()
        thread = threading.Thread(
            target=self.run, args=(stop,), name="probboard-refresher", daemon=True
        )
        thread.start()
        return stop
