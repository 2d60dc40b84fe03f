"""When an alert fires: its line, crossed on the board (issue 51, points 1 and 2).

``Evaluator`` holds every active alert, indexed by market and window (and, for a line, by its
level), and is given each row of each board (``rows``); it answers the alerts that fire on it.

- ``p_up_above`` / ``p_up_below``: the model's P(up) crosses the line (``level``, percent)
  from a fresh row at or below it (above it) to a fresh row above it (below it). After firing
  the alert is disarmed until P(up) is back ``REARM_MARGIN`` points on the other side, so a
  row hovering at the line does not fire every half second.
- ``edge_above``: the model's probability of ``side`` minus that side's best ask (in points)
  crosses ``level`` upward; re-armed the same way.
- ``stale``: the row turns stale, and again when it is fresh again (the call's row says which).

A stale row never fires a line and never moves one: a number that may be wrong says nothing
(a stale row's line fires, if still crossed, once the row is fresh). The first row an alert
sees only sets where it stands: an alert created while the line is already crossed waits for
the next crossing, as a line is about crossing, not being beyond it.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from app.alert_kinds import CONDITIONS, EDGE_ABOVE, P_UP_ABOVE, P_UP_BELOW, SIDES, STALE

__all__ = ["CONDITIONS", "EDGE_ABOVE", "P_UP_ABOVE", "P_UP_BELOW", "SIDES", "STALE"]
LINES = (P_UP_ABOVE, P_UP_BELOW, EDGE_ABOVE)
REARM_MARGIN = 2.0  # points back across the line before a fired line may fire again


@dataclass(frozen=True)
class Rule:
    """What an alert watches: a market's rows of one window kind, and its condition."""

    alert_id: str
    symbol: str
    window: str
    condition: str
    level: float | None = None
    side: str | None = None


def measure(rule: Rule, row: Mapping[str, Any]) -> float | None:
    """The number ``rule``'s line is about, on ``row`` (None when the row has none): P(up)
    in percent, or the model's probability of the side minus its best ask, in points."""
    if rule.condition in (P_UP_ABOVE, P_UP_BELOW):
        value = row.get("p_up_pct")
        return float(value) if isinstance(value, int | float) else None
    side = rule.side or "up"
    p, ask = row.get(f"p_{side}_pct"), row.get(f"{side}_ask")
    if not isinstance(p, int | float) or not isinstance(ask, int | float):
        return None
    return float(p) - 100.0 * float(ask)


@dataclass
class _Line:
    """The alerts of one (market, window, condition, side) line kind: their levels sorted
    (so a move from a to b finds the levels between in log time), which are disarmed, and
    the value seen last."""

    upward: bool  # fires on a rise through the level (above, edge) or a fall (below)
    levels: list[tuple[float, str]] = field(default_factory=list)
    disarmed: dict[str, float] = field(default_factory=dict)  # alert id -> its level
    last: float | None = None

    def add(self, level: float, alert_id: str) -> None:
        bisect.insort(self.levels, (level, alert_id))
        if self.last is not None and not self._armed_at(level, self.last):
            self.disarmed[alert_id] = level  # beyond the line already: wait for a crossing

    def remove(self, level: float, alert_id: str) -> None:
        i = bisect.bisect_left(self.levels, (level, alert_id))
        if i < len(self.levels) and self.levels[i] == (level, alert_id):
            del self.levels[i]
        self.disarmed.pop(alert_id, None)

    def _armed_at(self, level: float, value: float) -> bool:
        """Whether a line at ``level`` is on its arming side of ``value``."""
        return value <= level if self.upward else value >= level

    def move(self, value: float) -> list[str]:
        """The value is now ``value``: the armed alerts whose line it crossed fire (and are
        disarmed); those it is back past by the margin re-arm."""
        last, self.last = self.last, value
        for alert_id, level in list(self.disarmed.items()):
            back = value <= level - REARM_MARGIN if self.upward else value >= level + REARM_MARGIN
            if back:
                del self.disarmed[alert_id]
        if last is None:  # the first fresh value: where each alert stands, no crossing
            self.disarmed.update((a, lv) for lv, a in self.levels if not self._armed_at(lv, value))
            return []
        if self.upward:  # levels in [last, value): crossed on the way up
            lo, hi = last, value
            crossed = self.levels[
                bisect.bisect_left(self.levels, (lo,)) : bisect.bisect_left(self.levels, (hi,))
            ]
        else:  # levels in (value, last]: crossed on the way down
            lo, hi = value, last
            crossed = self.levels[
                bisect.bisect_right(self.levels, (lo, "\uffff")) : bisect.bisect_right(
                    self.levels, (hi, "\uffff")
                )
            ]
        fired = [a for lv, a in crossed if a not in self.disarmed]
        for level, alert_id in crossed:
            self.disarmed.setdefault(alert_id, level)
        return fired


class Evaluator:
    """Every active alert, by market and window; ``rows`` says which fire on a board."""

    def __init__(self) -> None:
        self._lines: dict[tuple[str, str, str, str], _Line] = {}
        self._stale: dict[tuple[str, str], set[str]] = {}
        self._was_stale: dict[tuple[str, str], bool] = {}
        self._watched: dict[tuple[str, str], int] = {}  # alerts per (market, window)
        self._rules: dict[str, Rule] = {}

    def __len__(self) -> int:
        return len(self._rules)

    def add(self, rule: Rule) -> None:
        """Watch ``rule`` (replacing an alert of the same id)."""
        self.remove(rule.alert_id)
        self._rules[rule.alert_id] = rule
        key = (rule.symbol, rule.window)
        self._watched[key] = self._watched.get(key, 0) + 1
        if rule.condition == STALE:
            self._stale.setdefault((rule.symbol, rule.window), set()).add(rule.alert_id)
            return
        assert rule.level is not None
        self._line(rule).add(rule.level, rule.alert_id)

    def remove(self, alert_id: str) -> None:
        """Stop watching an alert (deleted, paused); nothing when it is not watched."""
        rule = self._rules.pop(alert_id, None)
        if rule is None:
            return
        key = (rule.symbol, rule.window)
        self._watched[key] -= 1
        if not self._watched[key]:  # unwatched: its rows are no longer read, nor their state
            del self._watched[key]
            self._was_stale.pop(key, None)
        if rule.condition == STALE:
            self._stale.get((rule.symbol, rule.window), set()).discard(alert_id)
        elif rule.level is not None:
            self._line(rule).remove(rule.level, alert_id)

    def watches(self, symbol: str, window: str) -> bool:
        """Whether any alert watches ``symbol``'s ``window`` rows."""
        return (symbol, window) in self._watched

    def rules(self) -> Iterable[Rule]:
        """The alerts watched."""
        return self._rules.values()

    def _line(self, rule: Rule) -> _Line:
        side = rule.side or "up" if rule.condition == EDGE_ABOVE else ""
        key = (rule.symbol, rule.window, rule.condition, side)
        line = self._lines.get(key)
        if line is None:
            line = self._lines[key] = _Line(upward=rule.condition != P_UP_BELOW)
        return line

    def row(self, symbol: str, window: str, row: Mapping[str, Any]) -> list[str]:
        """The ids of the alerts that fire on ``row`` of ``symbol``'s ``window`` board."""
        fired: list[str] = []
        stale = row.get("isStale") is True
        key = (symbol, window)
        was = self._was_stale.get(key)
        self._was_stale[key] = stale
        if was is not None and was != stale:
            fired += sorted(self._stale.get(key, ()))
        if stale:
            return fired
        for condition in LINES:
            for side in SIDES if condition == EDGE_ABOVE else ("",):
                line = self._lines.get((symbol, window, condition, side))
                if line is None or not line.levels:
                    continue
                probe = Rule("", symbol, window, condition, side=side or None)
                value = measure(probe, row)
                if value is not None:
                    fired += line.move(value)
        return fired
