"""The current window's path of each market, as the page's window chart draws it.

A page opened mid-window would otherwise draw its chart from the moment it opened. Each web
worker keeps, per market, one point a second of the current window (the model's P(up) and
the market's UP mid), taken from the boards it receives (a bus listener), and once, on its
first use, from the bus's replay history (the last ``HISTORY_MS``, the boards a reconnecting
stream is given), so a worker started mid-window still knows up to 2 minutes before it
started. ``GET /api/probboard/trail`` serves it (``app/api/trail.py``).

It charts the 5-minute rows only (the page hides its chart on the 15-minute board): a board
that also carries 15-minute rows (``WINDOWS=5m,15m``, issue 39) charts the same path as
without them.

Cheap by construction: at most one row parse per market and second, at most
``MAX_POINTS`` points per market, and each answer's JSON built once per plan and change.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from app.board.row import DEFAULT_WINDOW
from app.board.snapshot import Snapshot, dumps
from app.markets import SPANS

CHARTED = SPANS[DEFAULT_WINDOW]  # the kind charted (its length and step: app/markets.py)
STEP_MS = CHARTED.trail_step_s * 1000  # one point a second: the chart is 420-600 px over 300 s
# A bound on a window's points, whatever the clock does.
MAX_POINTS = 2 * CHARTED.seconds // CHARTED.trail_step_s
# A point: seconds into the window, the model's P(up) (0-1) and the market's UP mid, either
# None while the row was stale or the value missing (the chart leaves a gap, as the page does).
Point = tuple[float, float | None, float | None]


@dataclass
class _Path:
    """One market's points in one window, oldest first."""

    window_start: int
    points: list[Point] = field(default_factory=list)
    last_ms: int = -STEP_MS  # the board time of the newest point


def _point(row: dict[str, Any], age_ms: int, stale_ms: int) -> Point:
    """The chart's point of ``row``, as the page computes it from a board it receives."""
    stale = age_ms > stale_ms
    up = row.get("p_up_pct")
    bid, ask = row.get("up_bid"), row.get("up_ask")
    p = None if stale or up is None else round(up / 100, 6)
    mid = None if stale or bid is None or ask is None else round((bid + ask) / 2, 6)
    return (round(CHARTED.seconds - row["rem_secs"], 3), p, mid)


class WindowTrail:
    """Per market, the current window's points; fed with every board a worker receives."""

    def __init__(self, stale_ms: int) -> None:
        self._stale_ms = stale_ms
        self._lock = threading.Lock()  # the bus's thread adds while requests read
        self._paths: dict[str, _Path] = {}
        self._version = 0
        self._answers: dict[tuple[int, tuple[str, ...] | None], str] = {}
        self.seeded = False

    def add(self, snapshot: Snapshot) -> None:
        """Take a point of each row of ``snapshot`` due one (a bus listener)."""
        with self._lock:
            self._add(snapshot)

    def _add(self, snapshot: Snapshot) -> None:
        now_ms = snapshot.ts_ms
        for symbol, window, ts_ms, prefix in snapshot.rows():
            if window != DEFAULT_WINDOW:
                continue  # another window's row: not this chart's (see the docstring)
            path = self._paths.get(symbol)
            # The board's clock decides whether a point is due (a stalled row's own time
            # stands still, and its gap must be drawn): no parse for the others.
            if path is not None and now_ms < path.last_ms + STEP_MS:
                continue
            row = json.loads(prefix + "}")
            start, rem = row.get("windowStart"), row.get("rem_secs")
            if start is None or rem is None:
                continue
            if path is None or path.window_start != start:
                if path is not None and start < path.window_start:
                    continue  # a row of an earlier window (an old board): not this chart's
                path = self._paths[symbol] = _Path(start)
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
            for symbol, old in earlier._paths.items():
                path = self._paths.get(symbol)
                if path is None:
                    self._paths[symbol] = old
                elif path.window_start == old.window_start:
                    first = path.points[0][0] if path.points else float("inf")
                    path.points[:0] = [p for p in old.points if p[0] < first]
            self.seeded = True
            self._changed()

    def answer(self, step_ms: int, symbols: tuple[str, ...] | None) -> str:
        """The trail's JSON: points at least ``step_ms`` apart (the plan's refresh interval,
        so a plan gets no finer a path than its polls would have), ``symbols`` only if given."""
        key = (step_ms, symbols)
        with self._lock:
            cached = self._answers.get(key)
            if cached is None:
                cached = self._answers[key] = dumps(self._document(step_ms, symbols))
            return cached

    def _document(self, step_ms: int, symbols: tuple[str, ...] | None) -> dict[str, Any]:
        markets = []
        for symbol, path in self._paths.items():
            if symbols is None or symbol in symbols:
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
