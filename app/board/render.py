"""Render a BoardResponse for one plan at one instant, by splicing pre-built strings."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from app.board.snapshot import Snapshot, dumps
from app.board.staleness import DANGER, latency_level
from app.board.timefmt import served_at
from app.config import Settings
from app.plans import Plan, plan_table


def _only(
    snapshot: Snapshot, symbols: tuple[str, ...] | None, window: str
) -> Iterator[tuple[int, str]]:
    """The pre-serialised rows of ``window`` (and of ``symbols`` only, when given), in board
    order."""
    for symbol, row_window, ts_ms, prefix in snapshot.rows():
        if row_window == window and (symbols is None or symbol in symbols):
            yield ts_ms, prefix


class BoardRenderer:
    """Builds response bodies; everything that depends only on config is built once."""

    def __init__(self, settings: Settings) -> None:
        self._default_window = settings.default_window.name
        self._stale = settings.stale_threshold_ms
        self._severe = settings.severe_stale_threshold_ms
        self.plans = plan_table(settings)
        self._heads = {name: self._head(plan) for name, plan in self.plans.items()}

    def _head(self, plan: Plan) -> str:
        fixed = {
            "ok": True,
            "plan": plan.name,
            "planLabel": plan.label,
            "refreshMs": plan.refresh_ms,
            "staleThresholdMs": self._stale,
            "severeStaleThresholdMs": self._severe,
        }
        return dumps(fixed)[:-1]

    def render(
        self,
        snapshot: Snapshot | None,
        plan: str,
        now_ms: int,
        symbols: tuple[str, ...] | None = None,
        window: str | None = None,
    ) -> str:
        """The BoardResponse JSON for ``plan`` with staleness computed at ``now_ms``.

        Only the rows of ``window`` (the default window's when None: ``?window=`` absent),
        and with ``symbols`` only those rows (in board order); the board-level age and
        staleness are those of the board's time and of these rows alone.
        """
        window = self._default_window if window is None else window
        head = self._heads[plan]
        served = served_at(now_ms)
        if snapshot is None:
            return (
                f'{head},"updatedAt":null,"servedAt":"{served}","dataAgeMs":null,'
                f'"isStale":true,"latencyLevel":"{DANGER}","newestInputMs":null,"items":[]}}'
            )
        stale, severe = self._stale, self._severe
        board_age = max(0, now_ms - snapshot.ts_ms)
        rows: Iterable[tuple[int, str]] = zip(
            snapshot.item_ts_ms, snapshot.item_prefixes, strict=True
        )
        if symbols is not None or snapshot.only_window != window:
            rows = _only(snapshot, symbols, window)
        parts = []
        for ts_ms, prefix in rows:
            age = max(0, now_ms - ts_ms)
            board_age = max(board_age, age)
            level = latency_level(age, stale, severe)
            is_stale = "true" if age > stale else "false"
            parts.append(
                f'{prefix},"dataAgeMs":{age},"isStale":{is_stale},"latencyLevel":"{level}"}}'
            )
        level = latency_level(board_age, stale, severe)
        is_stale = "true" if board_age > stale else "false"
        newest = "null" if snapshot.newest_input_ms is None else snapshot.newest_input_ms
        return (
            f'{head},"updatedAt":{snapshot.updated_at_json},"servedAt":"{served}",'
            f'"dataAgeMs":{board_age},"isStale":{is_stale},"latencyLevel":"{level}",'
            f'"newestInputMs":{newest},"items":[{",".join(parts)}]}}'
        )
