"""The live record: the refresher's own boards, as checkpoints and outcomes in the SQL store.

After every board the refresher calls ``observe``. A checkpoint is taken as its board passes
(``app.calibration.checkpoints``) and stored with the sigma, price and price to beat of that
board; once a window has ended, the checkpoints it never reached are stored as missing.
Its outcome is stored once known: from the settlement feed as soon as the next window's
price to beat is latched, replaced by the market's own resolution when that arrives.

Writing never holds the refresher: ``observe`` only queues, a thread of the recorder's own
writes. A store that cannot be written (down, not migrated) is logged once; what could not
be written is kept (at most ``PENDING_MAX`` writes) and tried again every ``RETRY_S``.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import create_engine
from sqlalchemy.engine import Engine

from app.calibration import store
from app.calibration.checkpoints import GRACE_S, Window, settled, track
from app.config import Settings
from app.database import database_url, engine_options

if TYPE_CHECKING:
    # For the annotations only: the board's package imports the schemas, which import this
    # package (app.calibration.periods), so a real import would knot the folders together.
    from app.board.row import BoardRow

log = logging.getLogger(__name__)

RETRY_S = 5.0
PENDING_MAX = 10_000
KEEP_S = 900  # a window is forgotten this long after its end (its outcome is settled)
Write = tuple[str, str, dict[str, Any]]  # ("window" | "checkpoint", slug, values)


class Recorder:
    """Takes a source's boards into the live record (see the module docstring)."""

    def __init__(self, engine: Engine, source_name: str, stale_after_ms: int) -> None:
        self._engine = engine
        self._source = source_name
        self._stale_after_ms = stale_after_ms
        self._windows: dict[str, Window] = {}
        self._settled: dict[str, str] = {}  # slug -> outcome source stored
        self._queue: queue.Queue[Write | None] = queue.Queue()
        self._pending: deque[Write] = deque(maxlen=PENDING_MAX)
        self._failing = False
        self._thread = threading.Thread(target=self._run, name="probboard-record", daemon=True)
        self._thread.start()

    # -- the refresher's side -------------------------------------------------------------
    def observe(self, row: BoardRow, at: float, winners: dict[str, bool]) -> None:
        """Take the board row built at ``at`` (typed: its ``model_p_up`` is the model's own
        P(up)), with the market's resolutions seen (token -> won)."""
        window = track(self._windows, row, at, self._stale_after_ms)
        if window is not None and window.fresh:
            self._put_window(window, None, None)
            for rem in window.fresh:
                taken = window.checkpoints[rem]
                self._put(
                    "checkpoint",
                    window.slug,
                    {
                        "rem_s": rem,
                        "p_up": taken["pUp"],
                        "market_mid": taken["marketMid"],
                        "sigma": row.sigma,
                        "price": row.price,
                        "price_to_beat": row.price_to_beat,
                    },
                )
            window.fresh.clear()
        self._settle(at, winners)

    def _settle(self, at: float, winners: dict[str, bool]) -> None:
        for slug, window in list(self._windows.items()):
            if at < window.end + GRACE_S:
                continue
            if slug not in self._settled:  # just ended: what it never reached is missing
                self._put_window(window, None, None)
                for rem in window.rems:
                    if rem not in window.checkpoints:
                        window.checkpoints[rem] = {"remS": rem, "pUp": None, "marketMid": None}
                        self._put("checkpoint", slug, {"rem_s": rem})
                self._settled[slug] = ""
            result, source = settled(window, self._windows, winners)
            if (
                source is not None
                and self._settled[slug] != "market"
                and (source != self._settled[slug])
            ):
                self._settled[slug] = source
                self._put_window(window, result, source)
            if at > window.end + KEEP_S:
                del self._windows[slug]
                self._settled.pop(slug, None)

    def _put_window(self, window: Window, outcome: str | None, source: str | None) -> None:
        self._put(
            "window",
            window.slug,
            {
                "slug": window.slug,
                "window_start": window.window_start,
                "source": self._source,
                "window": window.span.name,
                "rule": window.rule,
                "lookback_s": window.lookback_s,
                "price_to_beat": window.price_to_beat,
                "outcome": outcome,
                "outcome_source": source,
            },
        )

    def _put(self, kind: str, slug: str, values: dict[str, Any]) -> None:
        self._queue.put_nowait((kind, slug, values))

    # -- the writer -----------------------------------------------------------------------
    def close(self, timeout: float = 5.0) -> None:
        """Write what is queued (waiting at most ``timeout``) and stop the writer."""
        self._queue.put(None)
        self._thread.join(timeout)
        self._engine.dispose()

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every queued write is stored (tests); False if it did not happen."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._queue.unfinished_tasks == 0 and not self._pending:
                return True
            time.sleep(0.02)
        return False

    def _run(self) -> None:
        while True:
            try:
                item = self._queue.get(timeout=RETRY_S if self._pending else None)
            except queue.Empty:
                item = ("retry", "", {})
            taken = [] if item is None or item[0] == "retry" else [item]
            # What else is queued by now goes into the same transaction: one commit per
            # batch, never one per checkpoint, so the writer keeps up with a busy board. A
            # batch fills what the kept writes leave of PENDING_MAX and no more: the rest
            # waits in the queue (a backlog is written whole; only a store that refuses
            # writes for long loses its oldest, one per pass).
            room = max(1, PENDING_MAX - len(self._pending))
            while item is not None and len(taken) < room:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is not None:
                    taken.append(item)
            self._pending.extend(taken)
            self._write_pending()
            for _ in taken:
                self._queue.task_done()
            if item is None:  # close(): what was queued before it is written
                self._queue.task_done()
                return

    def _write_pending(self) -> None:
        if not self._pending:
            return
        try:
            with self._engine.begin() as conn:
                for kind, slug, values in self._pending:
                    if kind == "window":
                        store.save_window(conn, values)
                    else:
                        store.save_checkpoint(conn, slug, values)
        except Exception as exc:
            if not self._failing:
                log.error("track record: cannot write (%s); retrying every %.0f s", exc, RETRY_S)
            self._failing = True
            return  # the next attempt comes with the next write or after RETRY_S
        if self._failing:
            log.info("track record: writing again")
        self._failing = False
        self._pending.clear()


def start_recorder(
    settings: Settings, source_name: str, instance_dir: Path | None = None
) -> Recorder | None:
    """The live record of the refresher's boards, or None when ``TRACK_RECORD`` is off or no
    database is configured (logged). Nothing connects until the first write."""
    if not settings.track_record:
        return None
    url = database_url(settings, instance_dir)
    if url is None:
        log.warning("track record off: no DATABASE_URL (and no instance folder here)")
        return None
    engine = create_engine(url, **engine_options(url, settings.db_timeout_ms / 1000))
    return Recorder(engine, source_name, settings.stale_threshold_ms)
