"""The alerts program's loop (issue 51, point 2): every board in, the alerts that fire out.

``AlertsRunner`` listens to the board bus (``BoardBus.add_listener``: the Redis channel in
the production shape, the process's own bus in the embedded one). For each board it reads the
rows some alert watches (indexed by market and window: ``conditions.Evaluator``), judges each
row's staleness as ``/latest`` does (its data older than ``STALE_THRESHOLD_MS``), and for the
alerts that fire records a pending delivery and hands it to the ``Dispatcher`` (the job queue,
or the process's own workers). The row in the call is the board's row as ``/latest`` serves it
to a vip_pro key, rendered once per board that fires.

The alerts themselves are read from the accounts database: all active ones at the start and
every ``FULL_SYNC_S``, and those changed since the last read every ``SYNC_S`` (a new alert
fires within a second or two of its creation). Each account's calls are bounded
(``ALERTS_DELIVERIES_PER_MINUTE``): a firing over the bound is recorded as failed ("rate
limited"), never queued.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from sqlalchemy import select
from sqlalchemy.engine import Engine

from app.alert_kinds import AlertSpec
from app.alerts.calls import Firing
from app.alerts.conditions import Evaluator, Rule
from app.alerts.models import ACTIVE, FAILED, PENDING, Alert
from app.alerts.records import delivery_id_of, record_new
from app.board import timefmt
from app.board.render import BoardRenderer
from app.board.snapshot import Snapshot
from app.markets import SPANS
from app.plans import VIP_PRO

log = logging.getLogger(__name__)

SYNC_S = 1.0
FULL_SYNC_S = 30.0


class Dispatcher(Protocol):
    """Where a firing goes to be called: the job queue, or the process's own workers."""

    def dispatch_many(self, firings: list[Firing]) -> None:
        """Call each firing's target (signed, retried until it expires), those of one board
        change together."""


# The board as ``/latest`` serves it to a vip_pro key, every window's rows (``embedded``).
Renderer = Callable[[Snapshot], dict[str, Any]]


class AccountBudget:
    """Per account, at most ``per_minute`` calls in any minute (a sliding count).

    Each account's times are a queue, oldest first: a call drops the expired ones from its
    head, so 1,000 firings of one board cost 1,000 steps, not 1,000 scans of the minute's.
    """

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._per_minute = per_minute
        self._clock = clock
        self._spent: dict[int, deque[float]] = {}

    def take(self, account_id: int) -> bool:
        """Whether one more call of ``account_id`` is within its bound (then counted)."""
        now = self._clock()
        recent = self._spent.setdefault(account_id, deque())
        while recent and recent[0] <= now - 60.0:
            recent.popleft()
        if len(recent) >= self._per_minute:
            return False
        recent.append(now)
        return True


@dataclass(frozen=True, slots=True)
class Watched:
    """What the runner keeps of an active alert: its rule, and whose it is, where and how to
    call. Built from plain rows: ORM instances cost 80 % of a full read's 0.3 s of CPU at
    10,000 alerts, time the GIL takes from the boards."""

    rule: Rule
    account_id: int
    url: str
    format: str
    row: tuple[Any, ...]  # as read (``_COLUMNS``): a read rebuilds only what differs from it


# What the runner reads of an alert (not its secret: that is the deliverer's).
_COLUMNS = (
    Alert.id, Alert.account_id, Alert.url, Alert.symbol, Alert.window, Alert.condition,
    Alert.level, Alert.side, Alert.format, Alert.status,
)  # fmt: skip


def _watched(row: tuple[Any, ...]) -> Watched:
    """What the runner keeps of an alert's row (``_COLUMNS``)."""
    alert_id, account_id, url, symbol, window, condition, level, side, kind, _ = row
    rule = Rule(alert_id, symbol, window, condition, level, side)
    return Watched(rule, account_id, url, kind, row)


class AlertsRunner:
    """Evaluates every active alert on every board; see the module docstring."""

    def __init__(
        self,
        engine: Engine,
        dispatcher: Dispatcher,
        render: Renderer,
        stale_threshold_ms: int,
        per_minute: int,
        clock: Callable[[], float] = timefmt.now,
    ) -> None:
        self._engine = engine
        self._dispatcher = dispatcher
        self._render = render
        self._stale_ms = stale_threshold_ms
        self._budget = AccountBudget(per_minute)
        self._clock = clock
        self._evaluator = Evaluator()
        self._alerts: dict[str, Watched] = {}
        self._lock = threading.Lock()  # the bus's thread evaluates while the sync thread reads
        self._synced_at = datetime(2000, 1, 1)
        self._full_at = -1e18
        self.fired = 0

    @property
    def watched(self) -> int:
        """How many alerts are evaluated now."""
        return len(self._alerts)

    # -- the alerts ------------------------------------------------------------------------
    def sync(self) -> None:
        """Read the alerts changed since the last read (all of them every ``FULL_SYNC_S``)."""
        now = time.monotonic()
        full = now - self._full_at >= FULL_SYNC_S
        since = self._synced_at - timedelta(seconds=2)  # clocks of two writers may differ
        started = datetime.now(UTC).replace(tzinfo=None)
        statement = select(*_COLUMNS)
        if not full:
            statement = statement.where(Alert.updated_at >= since)
        with self._engine.connect() as conn:
            rows = [tuple(row) for row in conn.execute(statement)]
        # Only this thread writes the alerts, so what changed is worked out before the lock
        # (a board waits for the changes alone), on the rows as read: a full read compares
        # 10,000 tuples and builds only what changed.
        kept = self._alerts
        changed = [
            row for row in rows
            if row[-1] == ACTIVE and ((known := kept.get(row[0])) is None or known.row != row)
        ]  # fmt: skip
        ended = [row[0] for row in rows if row[-1] != ACTIVE and row[0] in self._alerts]
        if full:
            listed = {row[0] for row in rows}
            ended += [alert_id for alert_id in self._alerts if alert_id not in listed]
        watched = [_watched(row) for row in changed]
        moved = [
            w.rule for w in watched
            if (known := self._alerts.get(w.rule.alert_id)) is None or known.rule != w.rule
        ]  # fmt: skip
        with self._lock:
            for alert_id in ended:
                self._evaluator.remove(alert_id)
                self._alerts.pop(alert_id, None)
            for rule in moved:  # a line whose rule is the same keeps its state
                self._evaluator.add(rule)
            self._alerts.update((w.rule.alert_id, w) for w in watched)
        self._synced_at = started
        if full:
            self._full_at = now

    def run_sync(self, stop: threading.Event) -> None:
        """Keep the alerts read (``sync`` every ``SYNC_S``) until ``stop``; a failed read is
        logged once and tried again."""
        failing = False
        while not stop.is_set():
            try:
                self.sync()
                failing = False
            except Exception:
                if not failing:
                    log.exception("alerts: the accounts database cannot be read; trying again")
                failing = True
            stop.wait(SYNC_S)

    # -- the boards ------------------------------------------------------------------------
    def board(self, snapshot: Snapshot) -> None:
        """Evaluate every watched row of ``snapshot`` (a bus listener: never raises)."""
        try:
            self._board(snapshot)
        except Exception:
            log.exception("alerts: a board could not be evaluated")

    def _board(self, snapshot: Snapshot) -> None:
        now_ms = int(self._clock() * 1000)
        firings: list[tuple[Watched, str, str]] = []
        with self._lock:
            if not len(self._evaluator):
                return
            for symbol, window, ts_ms, prefix in snapshot.rows():
                if not self._evaluator.watches(symbol, window):
                    continue  # no alert on this row: not even parsed
                row = json.loads(prefix + "}")
                row["isStale"] = now_ms - ts_ms > self._stale_ms
                for alert_id in self._evaluator.row(symbol, window, row):
                    watched = self._alerts.get(alert_id)
                    if watched is not None:
                        firings.append((watched, symbol, window))
        if firings:
            self._fire(snapshot, firings, now_ms)

    def _fire(
        self, snapshot: Snapshot, firings: list[tuple[Watched, str, str]], now_ms: int
    ) -> None:
        """Record and dispatch each firing, with the row as ``/latest`` serves it."""
        served = self._render(snapshot)
        rows = {(r["symbol"], r.get("window", "5m")): r for r in served.get("items", [])}
        records, calls = [], []
        # The records' times are real (the sweep's and the owner's); the expiry is the
        # service clock's, as the rows' (``CLOCK_OFFSET_MS`` in tests and drills).
        now = datetime.now(UTC).replace(tzinfo=None)
        for watched, symbol, window in firings:
            rule = watched.rule
            row = rows.get((symbol, window))
            if row is None:
                continue
            delivery_id = delivery_id_of(rule.alert_id, snapshot)
            expires = float(row.get("windowEnd") or now_ms / 1000 + SPANS[window].seconds)
            allowed = self._budget.take(watched.account_id)
            records.append(
                {
                    "id": delivery_id,
                    "alert_id": rule.alert_id,
                    "at": now,
                    "expires_at": datetime.fromtimestamp(expires, UTC).replace(tzinfo=None),
                    "status": PENDING if allowed else FAILED,
                    "attempts": 0,
                    "error": None if allowed else "rate limited: the account's calls per minute",
                    "updated_at": now,
                }
            )
            if allowed:
                spec = AlertSpec(
                    watched.url, symbol, window, rule.condition, rule.level, rule.side,
                    watched.format,
                )  # fmt: skip
                calls.append(
                    Firing(delivery_id, rule.alert_id, spec, row, served["updatedAt"], expires)
                )
        if records:
            with self._engine.begin() as conn:
                new = record_new(conn, records)
            calls = [call for call in calls if call.delivery_id in new]
        self.fired += len(calls)
        self._dispatcher.dispatch_many(calls)


def renderer_of(
    renderer: BoardRenderer, clock_ms: Callable[[], int] = timefmt.now_ms
) -> Callable[[Snapshot], dict[str, Any]]:
    """Every window's rows as ``/latest`` serves them to a vip_pro key, as one dict."""

    def render(snapshot: Snapshot) -> dict[str, Any]:
        now = clock_ms()
        items: list[Any] = []
        updated = None
        for window in sorted(set(snapshot.item_windows)):
            board = json.loads(renderer.render(snapshot, VIP_PRO, now, None, window))
            items += board["items"]
            updated = board["updatedAt"]
        return {"updatedAt": updated, "items": items}

    return render
