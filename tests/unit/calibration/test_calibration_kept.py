"""``period=all`` from kept sums of closed months (issue 36, point 3: under 1 s at a year).

On SQLite and PostgreSQL, against the Python scoring of every row (``summary.summarize``):
the first answer keeps each closed month's sums, the next one answers from them, and any
write into a kept month (an outcome replaced, a checkpoint added, a window added) is in the
next answer, including a write that commits while the month is being summed.
"""

from __future__ import annotations

import random
import time
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import insert, select
from sqlalchemy.engine import Connection, Engine

from app.calibration import kept, store, totals
from app.calibration.checkpoints import REMS
from app.calibration.store import Track
from app.markets import parse_symbols
from app.web import create_app
from harness.spans import FIVE_MINUTES
from tests.conftest import BASE_CONFIG
from tests.support.track_record import assert_close, scored_in_python

DAY = 86_400
NOW = 1_795_000_000  # 2026-11-18: September to October 2026 are closed months
BTC, ETH = parse_symbols("BTC,ETH")
FIRST = NOW - 75 * DAY  # 2026-09-04


def _fill(engine: Engine, rng: random.Random) -> None:
    """BTC and ETH windows every 3 hours from FIRST to NOW, most with an outcome."""
    rows, points = [], []
    for market in (BTC, ETH):
        for start in range(FIRST, NOW, 3 * 3600):
            slug = market.slug(start, FIVE_MINUTES)
            outcome = rng.choice(["up", "down", None])
            rows.append({"slug": slug, "window_start": start, "source": "simulated",
                         "symbol": market.symbol, "rule": "spot", "price_to_beat": 1.0,
                         "outcome": outcome, "outcome_source": outcome and "feed",
                         "updated_at": datetime.now(UTC)})  # fmt: skip
            for rem in REMS:
                p = None if rng.random() < 0.1 else rng.random()
                points.append({"slug": slug, "rem_s": rem, "p_up": p,
                               "market_mid": rng.choice([None, 0.0, 1.0, rng.random()]),
                               "recorded_at": datetime.now(UTC)})  # fmt: skip
    with engine.begin() as conn:
        conn.execute(insert(store.windows), rows)
        conn.execute(insert(store.checkpoints), points)


def _python(conn: Connection, symbol: str) -> dict[str, Any]:
    loaded = [w for w in store.load(conn, "simulated") if store.symbol_of(w["slug"]) == symbol]
    return scored_in_python(loaded, REMS)


def _track(symbol: str) -> Track:
    """The simulated source's 5-minute record of ``symbol``."""
    return Track("simulated", symbol, "5m")


def _months(conn: Connection, symbol: str) -> dict[int, tuple[int, int | None]]:
    table = store.kept_months
    found = conn.execute(
        select(table.c.month, table.c.changes, table.c.kept).where(table.c.symbol == symbol)
    )
    return {month: (changes, kept_at) for month, changes, kept_at in found}


def _all(engine: Engine, symbol: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the answer for every window, Python's)."""
    with engine.connect() as conn:
        found = totals.compute(conn, _track(symbol), None, NOW)
        return found, _python(conn, symbol)


def _answer(engine: Engine, symbol: str) -> dict[str, Any]:
    """The answer for every window alone (``_all`` without Python's, where it is not used)."""
    with engine.connect() as conn:
        return totals.compute(conn, _track(symbol), None, NOW)


def test_closed_months_are_kept_and_answer_as_every_row_does(engine: Engine) -> None:
    _fill(engine, random.Random(36))
    september, october, november = (store.month_of(t) for t in (FIRST, NOW - 30 * DAY, NOW))
    assert kept.months(FIRST, kept.closed_before(NOW)) == [september, october]
    for symbol in ("BTC", "ETH"):
        found, expected = _all(engine, symbol)  # sums and keeps September and October
        assert_close(found, expected, symbol)
        with engine.connect() as conn:
            months = _months(conn, symbol)
        assert months == {september: (0, 0), october: (0, 0)}, months  # November stays live
    with engine.connect() as conn:
        counts = [b["n"] for b in totals.compute(conn, _track("BTC"), None, NOW)["buckets"]]
        live = totals.compute(conn, _track("BTC"), november, NOW)["buckets"]
    with engine.begin() as conn:  # the kept sums alone now hold the closed months' scores
        conn.execute(store.checkpoints.delete().where(store.checkpoints.c.slug.like("btc-%")))
        conn.execute(store.kept_sums.update().values(n=store.kept_sums.c.n * 2))
    with engine.connect() as conn:
        doubled = totals.compute(conn, _track("BTC"), None, NOW)["buckets"]
    assert all(c > live_n["n"] > 0 for c, live_n in zip(counts, live, strict=True))
    assert [b["n"] for b in doubled] == [
        2 * (c - live_n["n"]) for c, live_n in zip(counts, live, strict=True)
    ]


@pytest.mark.parametrize("change", ["outcome", "checkpoint", "window"])
def test_a_write_into_a_kept_month_is_in_the_next_answer(engine: Engine, change: str) -> None:
    _fill(engine, random.Random(37))
    _answer(engine, "BTC")  # keeps the closed months
    start = FIRST + 24 * 3 * 3600  # a window of September, with every checkpoint
    slug = BTC.slug(start, FIVE_MINUTES)
    with engine.begin() as conn:
        if change == "outcome":  # the market's resolution replaces the feed's outcome
            outcome = conn.execute(
                select(store.windows.c.outcome).where(store.windows.c.slug == slug)
            ).scalar_one()
            flipped = "down" if outcome == "up" else "up"
            store.save_window(conn, {"slug": slug, "window_start": start, "source": "simulated",
                                     "rule": "spot", "price_to_beat": 1.0, "outcome": flipped,
                                     "outcome_source": "market"})  # fmt: skip
        else:
            if change == "window":  # a window recorded late, then its checkpoint
                start, slug = start + 300, BTC.slug(start + 300, FIVE_MINUTES)
                store.save_window(conn, {"slug": slug, "window_start": start, "source": "simulated",
                                         "rule": "spot", "price_to_beat": 1.0, "outcome": "up",
                                         "outcome_source": "feed"})  # fmt: skip
            store.save_checkpoint(conn, slug, {"rem_s": 100 if change == "checkpoint" else 30,
                                               "p_up": 0.97})  # fmt: skip
    with engine.connect() as conn:
        assert _months(conn, "BTC")[store.month_of(start)][0] > 0  # counted as a change
    found, expected = _all(engine, "BTC")
    assert_close(found, expected, change)
    before = _answer(engine, "BTC")  # and kept again
    with engine.connect() as conn:
        assert all(changes == kept_at for changes, kept_at in _months(conn, "BTC").values())
    assert_close(before, expected, change)


def test_a_write_committed_while_a_month_is_summed_is_never_missed(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The recorder's write lands between the count's read and the month's sum: the answer
    may include it, the kept sums are marked out of date, the next answer sums it again."""
    _fill(engine, random.Random(38))
    start = FIRST + 4 * 3600  # not on the 3-hour grid: a new window of September
    slug = BTC.slug(start, FIVE_MINUTES)
    summed = totals.rem_table
    written: list[int] = []

    def meanwhile(conn: Connection, track: Track, since: Any, until: Any = None) -> Any:
        if not written and track.symbol == "BTC" and since == store.month_of(start):
            with engine.begin() as other:  # another process's transaction, committed now
                store.save_window(other, {"slug": slug, "window_start": start,
                                          "source": "simulated", "rule": "spot",
                                          "price_to_beat": 1.0, "outcome": "up",
                                          "outcome_source": "feed"})  # fmt: skip
                store.save_checkpoint(other, slug, {"rem_s": 5, "p_up": 0.001})
            written.append(start)
        return summed(conn, track, since, until)

    monkeypatch.setattr(totals, "rem_table", meanwhile)
    _answer(engine, "BTC")
    assert written, "the write did not happen during the sum"
    with engine.connect() as conn:
        changes, kept_at = _months(conn, "BTC")[store.month_of(start)]
    assert kept_at is not None and changes > kept_at  # kept, but known to be out of date
    monkeypatch.setattr(totals, "rem_table", summed)
    found, expected = _all(engine, "BTC")
    assert_close(found, expected)
    with engine.connect() as conn:
        changes, kept_at = _months(conn, "BTC")[store.month_of(start)]
    assert changes == kept_at


def test_the_record_keep_command_keeps_the_closed_months_of_each_market(
    database_url: str, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the deploy runs after migrating: every closed month kept before a visitor asks."""
    _fill(engine, random.Random(39))
    monkeypatch.setattr(time, "time", lambda: float(NOW))
    app = create_app({**BASE_CONFIG, "DATABASE_URL": database_url, "SYMBOLS": "BTC,ETH"})
    try:
        result = app.test_cli_runner().invoke(args=["record", "keep"])
        assert result.exit_code == 0, result.output
        assert "BTC 5m: " in result.output and "ETH 5m: " in result.output
    finally:
        with app.app_context():
            from app.extensions import db

            db.session.remove()
            db.engine.dispose()
    with engine.connect() as conn:
        for symbol in ("BTC", "ETH"):
            months = _months(conn, symbol)
            assert sorted(months) == kept.months(FIRST, kept.closed_before(NOW)), months
            assert all(changes == kept_at for changes, kept_at in months.values())
