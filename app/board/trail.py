"""The current window's path of each market and window kind, as the page's window chart
draws it.

A page opened mid-window would otherwise draw its chart from the moment it opened. Each web
worker keeps, per market and window kind, one point per the kind's step (``Span.trail_step_s``:
a second for 5 minutes, 3 s for 15, 12 s for an hour, 48 s for 4 hours: about 300 points a
window, whatever its length) of the current window (the model's P(up) and the market's UP
mid), taken from the boards it receives (a bus listener), and once, on its first use, from
the bus's replay history (the last ``HISTORY_MS``, the boards a reconnecting stream is given),
so a worker started mid-window still knows up to 2 minutes before it started.
``GET /api/probboard/trail?window=`` serves one kind (``app/api/trail.py``).

Cheap by construction: at most one row parse per market, kind and step, at most
``MAX_POINTS`` points per path, and each answer's JSON built once per plan and change.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from app.board.row import DEFAULT_WINDOW
from app.board.snapshot import Snapshot, dumps
from app.markets import SPANS, Span

STEP_MS = SPANS[DEFAULT_WINDOW].trail_step_s * 1000  # the finest step: the 5-minute kind's
# A bound on a window's points, whatever the clock does (a 4-hour window of 5 hours, at its
# step, has 375).
MAX_POINTS = 2 * SPANS[DEFAULT_WINDOW].seconds // SPANS[DEFAULT_WINDOW].trail_step_s
# A point: seconds into the window, the model's P(up) (0-1) and the market's UP mid, either
# None while the row was stale or the value missing (the chart leaves a gap, as the page does).
Point = tuple[float, float | None, float | None]


def step_ms(window: str) -> int:
    """The chart's step of a window kind (``5m``, ``15m``...), in ms."""
    return SPANS[window].trail_step_s * 1000


@dataclass
class _Path:
    """One market's points in one window of one kind, oldest first."""

    window_start: int
    span: Span
    points: list[Point] = field(default_factory=list)
    last_ms: int = -(10**15)  # the board time of the newest point


def _point(row: dict[str, Any], age_ms: int, stale_ms: int) -> Point:
    """The chart's point of ``row``, as the page computes it from a board it receives."""
    stale = age_ms > stale_ms
    up = row.get("p_up_pct")
    bid, ask = row.get("up_bid"), row.get("up_ask")
    p = None if stale or up is None else round(up / 100, 6)
    mid = None if stale or bid is None or ask is None else round((bid + ask) / 2, 6)
    length = row["windowEnd"] - row["windowStart"]  # a 4-hour block may last 3 or 5 hours
    return (round(length - row["rem_secs"], 3), p, mid)


class WindowTrail:
    """Per market and window kind, the current window's points; fed with every board a
    worker receives."""

    def __init__(self, stale_ms: int) -> None:
        self._stale_ms = stale_ms
        self._lock = threading.Lock()  # the bus's thread adds while requests read
        self._paths: dict[tuple[str, str], _Path] = {}  # by (symbol, window kind)
        self._version = 0
        self._answers: dict[tuple[str, int, tuple[str, ...] | None], str] = {}
        self.seeded = False

    def add(self, snapshot: Snapshot) -> None:
        """Take a point of each row of ``snapshot`` due one (a bus listener)."""
        with self._lock:
            self._add(snapshot)

    def _add(self, snapshot: Snapshot) -> None:
        now_ms = snapshot.ts_ms
        for symbol, window, ts_ms, prefix in snapshot.rows():
            kind = window or DEFAULT_WINDOW
            span = SPANS.get(kind)
            if span is None:
                continue  # a kind this build does not know (a newer refresher): not charted
            path = self._paths.get((symbol, kind))
            # The board's clock decides whether a point is due (a stalled row's own time
            # stands still, and its gap must be drawn): no parse for the others.
            if path is not None and now_ms < path.last_ms + span.trail_step_s * 1000:
                continue
            row = json.loads(prefix + "}")
            start, end, rem = row.get("windowStart"), row.get("windowEnd"), row.get("rem_secs")
            if start is None or end is None or rem is None:
                continue
            if path is None or path.window_start != start:
                if path is not None and start < path.window_start:
                    continue  # a row of an earlier window (an old board): not this chart's
                path = self._paths[symbol, kind] = _Path(start, span)
            path.points.append(_point(row, now_ms - ts_ms, self._stale_ms))
            del path.points[:-MAX_POINTS]
            path.last_ms = now_ms
            self._changed()

    def _changed(self) -> None:
        self._version += 1
        self._answers.clear()

    def seed(self, boards: Iterable[Snapshot]) -> None:
        """Put the points of ``boards`` (the bus's history, oldest first) before those held:
        a worker's first answer starts where the history does, not where the worker did."""
        earlier = WindowTrail(self._stale_ms)
        for board in boards:
            earlier._add(board)
        with self._lock:
            for key, old in earlier._paths.items():
                path = self._paths.get(key)
                if path is None:
                    self._paths[key] = old
                elif path.window_start == old.window_start:
                    first = path.points[0][0] if path.points else float("inf")
                    path.points[:0] = [p for p in old.points if p[0] < first]
            self.seeded = True
            self._changed()

    def answer(
        self, step_ms: int, symbols: tuple[str, ...] | None, window: str = DEFAULT_WINDOW
    ) -> str:
        """The trail's JSON of the ``window`` kind: points at least ``step_ms`` apart (the
        plan's refresh interval, so a plan gets no finer a path than its polls would have;
        never finer than the kind's own step), ``symbols`` only if given."""
        key = (window, step_ms, symbols)
        with self._lock:
            cached = self._answers.get(key)
            if cached is None:
                cached = self._answers[key] = dumps(self._document(window, step_ms, symbols))
            return cached

    def _document(
        self, window: str, step_ms: int, symbols: tuple[str, ...] | None
    ) -> dict[str, Any]:
        markets = []
        step_ms = max(step_ms, SPANS[window].trail_step_s * 1000)
        for (symbol, kind), path in self._paths.items():
            if kind == window and (symbols is None or symbol in symbols):
                markets.append(
                    {
                        "symbol": symbol,
                        "windowStart": path.window_start,
                        "points": [list(p) for p in _thinned(path.points, step_ms / 1000)],
                    }
                )
        return {"ok": True, "stepMs": step_ms, "markets": markets}


def _thinned(points: list[Point], step_s: float) -> list[Point]:
    """The points at least ``step_s`` apart, the first and the newest always kept."""
    kept: list[Point] = []
    for point in points:
        if not kept or point[0] >= kept[-1][0] + step_s - 0.05:
            kept.append(point)
    if points and kept[-1] is not points[-1]:
        kept.append(points[-1])
    return kept
