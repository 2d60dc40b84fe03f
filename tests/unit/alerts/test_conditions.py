"""When an alert fires (``app.alerts.conditions``): a line crossed on fresh rows, once until
re-armed by the margin; an edge against a side's ask; a row turning stale and fresh; stale
rows never fire a line; indexed by market and window."""

from __future__ import annotations

import re
from typing import Any

from app.alerts.conditions import (
    EDGE_ABOVE,
    P_UP_ABOVE,
    P_UP_BELOW,
    REARM_MARGIN,
    STALE,
    Evaluator,
    Rule,
)
from app.alerts.records import delivery_id_of
from app.alerts.runner import AccountBudget
from app.board.snapshot import Snapshot


def row(
    p_up: float | None, stale: bool = False, up_ask: float = 0.5, down_ask: float = 0.5
) -> dict[str, Any]:
    p_down = None if p_up is None else 100 - p_up
    return {"p_up_pct": p_up, "p_down_pct": p_down, "up_ask": up_ask, "down_ask": down_ask,
            "isStale": stale}  # fmt: skip


def fired(
    evaluator: Evaluator, values: list[dict[str, Any]], symbol: str = "BTC"
) -> list[list[str]]:
    return [evaluator.row(symbol, "5m", r) for r in values]


def test_a_line_fires_once_on_the_crossing_and_again_only_after_the_margin() -> None:
    e = Evaluator()
    e.add(Rule("a", "BTC", "5m", P_UP_ABOVE, 60.0))
    steps = [55.0, 59.9, 60.0, 60.1, 59.5, 60.5, 61.0, 60.0 - REARM_MARGIN, 62.0]
    assert fired(e, [row(v) for v in steps]) == [[], [], [], ["a"], [], [], [], [], ["a"]]


def test_below_is_the_mirror() -> None:
    e = Evaluator()
    e.add(Rule("b", "BTC", "5m", P_UP_BELOW, 40.0))
    steps = [45.0, 40.0, 39.9, 41.0, 39.0, 42.0, 30.0]
    assert fired(e, [row(v) for v in steps]) == [[], [], ["b"], [], [], [], ["b"]]


def test_the_first_row_only_says_where_the_alert_stands() -> None:
    e = Evaluator()
    e.add(Rule("a", "BTC", "5m", P_UP_ABOVE, 60.0))
    assert fired(e, [row(70.0), row(71.0), row(57.0), row(61.0)]) == [[], [], [], ["a"]]
    # Added while the market is beyond its line: waits for the next crossing too.
    e.add(Rule("late", "BTC", "5m", P_UP_ABOVE, 50.0))
    assert fired(e, [row(62.0), row(47.0), row(51.0)]) == [[], [], ["late"]]


def test_stale_rows_fire_no_line_and_the_stale_alert_fires_both_ways() -> None:
    e = Evaluator()
    e.add(Rule("a", "BTC", "5m", P_UP_ABOVE, 60.0))
    e.add(Rule("s", "BTC", "5m", STALE))
    steps = [row(50.0), row(70.0, stale=True), row(71.0, stale=True), row(65.0)]
    # The jump to 70 came while stale: no fire then; the fresh 65 is the crossing from 50.
    assert fired(e, steps) == [[], ["s"], [], ["s", "a"]]


def test_an_edge_against_the_sides_ask() -> None:
    e = Evaluator()
    e.add(Rule("up", "BTC", "5m", EDGE_ABOVE, 8.0, side="up"))
    e.add(Rule("down", "BTC", "5m", EDGE_ABOVE, 8.0, side="down"))
    steps = [row(55.0, up_ask=0.50), row(60.0, up_ask=0.51), row(40.0, down_ask=0.50)]
    # 5 then 9 points on UP; then DOWN's 60 - 50 = 10 points.
    assert fired(e, steps) == [[], ["up"], ["down"]]


def test_alerts_are_indexed_by_market_and_window_and_can_be_removed() -> None:
    e = Evaluator()
    e.add(Rule("btc", "BTC", "5m", P_UP_ABOVE, 60.0))
    e.add(Rule("eth", "ETH", "5m", P_UP_ABOVE, 60.0))
    e.add(Rule("btc15", "BTC", "15m", P_UP_ABOVE, 60.0))
    assert fired(e, [row(50.0), row(70.0)], "ETH") == [[], ["eth"]]
    assert [e.row("BTC", "15m", r) for r in (row(50.0), row(70.0))] == [[], ["btc15"]]
    e.remove("btc")
    assert fired(e, [row(50.0), row(70.0)]) == [[], []]
    assert len(e) == 2


def test_thousands_of_lines_fire_only_those_crossed() -> None:
    e = Evaluator()
    for i in range(4_000):
        e.add(Rule(f"a{i}", "BTC", "5m", P_UP_ABOVE, 50.0 + (i % 400) / 10))
    assert e.row("BTC", "5m", row(50.0)) == []
    # From 50.0 to 51.0: the levels 50.0 .. 50.9 (ten of 400, each 10 alerts) are crossed;
    # 50.0 itself was not beyond at the first row (it stood at the line): it fires too.
    assert len(e.row("BTC", "5m", row(51.0))) == 100


def _board(seq: int, ts_ms: int) -> Snapshot:
    return Snapshot(seq, ts_ms, "simulated", '""', (), (), (), (), "{}")


def test_a_firings_id_is_the_boards_and_never_one_of_an_earlier_bus() -> None:
    """The same board gives every program the same webhook-id; a bus that starts its seq
    again (a new Redis, a restarted embedded service) gives new ones, later in time."""
    board, again = _board(7, 1_800_000_000_000), _board(7, 1_800_000_900_000)
    first = delivery_id_of("alt_1", board)
    assert first == delivery_id_of("alt_1", _board(7, 1_800_000_000_000))
    assert re.fullmatch(r"msg_[A-Za-z0-9_-]{24}", first)
    assert first != delivery_id_of("alt_2", board)
    assert first != delivery_id_of("alt_1", again)
    assert first != delivery_id_of("alt_1", _board(8, 1_800_000_000_000))


def test_an_accounts_budget_slides_over_the_minute_and_keeps_accounts_apart() -> None:
    """``per_minute`` calls in any 60 s of the clock; the oldest leaves the count after 60 s."""
    now = [1000.0]
    budget = AccountBudget(3, clock=lambda: now[0])
    taken = []
    for at in (0.0, 10.0, 20.0, 30.0, 59.9, 60.0, 60.0, 70.0, 80.0):
        now[0] = 1000.0 + at
        taken.append(budget.take(1))
    assert taken == [True, True, True, False, False, True, False, True, True]
    assert budget.take(2)  # another account's own count
