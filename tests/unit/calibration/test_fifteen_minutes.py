"""The 15-minute track record (issue 39): stored, kept and served apart from the 5-minute one.

On a migrated database of the test's own (SQLite, then PostgreSQL): each window's length is
stored (the migration makes the rows recorded before it 5-minute ones, and goes back), the
kept totals are per (source, market, window), and ``?window=15m`` on ``/calibration`` and on
the windows export serves the 15-minute record, scored at its own checkpoints; without the
parameter, the 5-minute record exactly as before.
"""

from __future__ import annotations

import random
from contextlib import nullcontext
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import column, insert, inspect, select, table, text
from sqlalchemy.engine import Connection, Engine

import app.api.calibration as calibration_view
from app.calibration import kept, store, totals
from app.calibration.recorder import Recorder
from app.calibration.store import Track
from app.markets import MARKETS, SPANS
from app.web import create_app
from harness.databases import scratch_postgres_database
from harness.spans import FIVE_MINUTES, REMS_OF_WINDOW
from tests.conftest import BASE_CONFIG
from tests.support.contract import validated
from tests.support.track_record import assert_close, record_both_windows, scored_in_python

T0 = 1_800_000_000  # a multiple of 900: the 15-minute windows start with a 5-minute one
CALIBRATION = "/api/probboard/calibration"
WINDOWS = "/api/probboard/windows"
BOTH = {"WINDOWS": "5m,15m"}


@pytest.fixture
def recorded(engine: Engine) -> Engine:
    """Four 5-minute windows of BTC (three settled) and two 15-minute ones (one settled)."""
    recorder = Recorder(engine, "simulated", 3000)
    record_both_windows(recorder, T0, 900 + 39)
    assert recorder.flush()
    recorder.close()
    return engine


def _app(database_url: str, **config: str) -> Any:
    return create_app({**BASE_CONFIG, "DATABASE_URL": database_url, **config})


def _close(app: Any) -> None:
    with app.app_context():
        from app.extensions import db

        db.session.remove()
        db.engine.dispose()


def test_each_window_has_its_own_calibration(
    database_url: str, recorded: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(calibration_view, "clock", lambda: float(T0 + 1000))
    monkeypatch.setattr(calibration_view, "MAX_AGE_S", 0)
    app = _app(database_url, **BOTH)
    try:
        client = app.test_client()
        default = client.get(CALIBRATION)
        five = validated("calibration", default.data)
        fifteen = validated("calibration", client.get(f"{CALIBRATION}?window=15M").data)
        assert client.get(f"{CALIBRATION}?window=5m").data == default.data
        with recorded.begin() as conn:  # the 5-minute answer never held a 15-minute row
            conn.execute(store.windows.delete().where(store.windows.c.slug.like("%-15m-%")))
        assert client.get(CALIBRATION).data == default.data
    finally:
        _close(app)
    assert [b["remS"] for b in five["buckets"]] == list(SPANS["5m"].rems)
    assert (five["windowsRecorded"], five["windows"]) == (4, 3)
    assert all(b["n"] == 3 and b["nMarket"] == 3 for b in five["buckets"])
    assert [b["remS"] for b in fifteen["buckets"]] == list(SPANS["15m"].rems)
    assert (fifteen["windowsRecorded"], fifteen["windows"]) == (2, 1)
    assert all(b["n"] == 1 and b["nMarket"] == 1 for b in fifteen["buckets"])
    assert sum(b["n"] for b in fifteen["reliability"]) == len(SPANS["15m"].rems)
    assert fifteen["period"] == {"start": "2027-01-15T08:00:00.000Z",
                                 "end": "2027-01-15T08:30:00.000Z"}  # fmt: skip


@pytest.mark.parametrize("path", [CALIBRATION, WINDOWS])
def test_an_unknown_or_unserved_window_is_a_400(database_url: str, path: str) -> None:
    served, five_only = _app(database_url, **BOTH), _app(database_url)
    try:
        for app, value in ((served, "1h"), (served, ""), (served, "15m "), (five_only, "15m")):
            response = app.test_client().get(path, query_string={"window": value})
            assert response.status_code == 400, (value, response.data)
            assert validated("error", response.data)["code"] == "invalid_window"
        twice = served.test_client().get(f"{path}?window=5m&window=5m")
        assert validated("error", twice.data)["code"] == "invalid_window"
    finally:
        _close(served)
        _close(five_only)


def test_the_export_serves_each_windows_own(database_url: str, recorded: Engine) -> None:
    app = _app(database_url, **BOTH)
    try:
        client = app.test_client()
        five = validated("windows", client.get(WINDOWS).data)
        first = validated("windows", client.get(WINDOWS, query_string="window=15m&limit=1").data)
        cursor = first["next"]
        assert cursor is not None
        refused = client.get(WINDOWS, query_string={"cursor": cursor, "limit": "1"})
        assert validated("error", refused.data)["code"] == "invalid_cursor"  # another window's
        query = {"cursor": cursor, "limit": "1", "window": "15m"}
        second = validated("windows", client.get(WINDOWS, query_string=query).data)
        csv = client.get(WINDOWS, query_string="window=15m&format=csv")
    finally:
        _close(app)
    assert [w["slug"] for w in five["windows"]] == [
        f"btc-updown-5m-{T0 + s}" for s in (900, 600, 300, 0)
    ]
    [newest], [oldest] = first["windows"], second["windows"]
    assert (newest["slug"], oldest["slug"]) == (
        f"btc-updown-15m-{T0 + 900}",
        f"btc-updown-15m-{T0}",
    )
    assert (oldest["windowStart"], oldest["windowEnd"], second["next"]) == (T0, T0 + 900, None)
    assert [c["remS"] for c in oldest["checkpoints"]] == list(SPANS["15m"].rems)
    assert 'filename="btc-15m-windows.csv"' in csv.headers["Content-Disposition"]
    assert f"btc-updown-15m-{T0}" in csv.get_data(as_text=True)
    assert "btc-updown-5m-" not in csv.get_data(as_text=True)


# -- kept totals and the migration ------------------------------------------------------------

NOW = 1_795_000_000  # 2026-11-18: September and October 2026 are closed months
FIRST = NOW - 75 * 86_400


def _fill(engine: Engine, rng: random.Random) -> None:
    """BTC's windows of every served kind every 6 hours from FIRST to NOW (300 of each,
    over two closed months and the open one)."""
    rows, points = [], []
    for name, rems in REMS_OF_WINDOW.items():
        for start in range(FIRST, NOW, 6 * 3600):
            slug = f"btc-updown-{name}-{start}"
            outcome = rng.choice(["up", "down", None])
            rows.append({"slug": slug, "window_start": start, "source": "simulated",
                         "symbol": "BTC", "window": name, "rule": "spot", "outcome": outcome,
                         "outcome_source": outcome and "feed",
                         "updated_at": datetime.now(UTC)})  # fmt: skip
            points += [{"slug": slug, "rem_s": rem, "p_up": rng.random(),
                        "market_mid": rng.choice([None, rng.random()]),
                        "recorded_at": datetime.now(UTC)} for rem in rems]  # fmt: skip
    with engine.begin() as conn:
        conn.execute(insert(store.windows), rows)
        conn.execute(insert(store.checkpoints), points)


def test_kept_totals_are_per_window(engine: Engine) -> None:
    _fill(engine, random.Random(39))
    closed = kept.months(FIRST, kept.closed_before(NOW))
    with engine.connect() as conn:  # Python's answers, once: reading keeps nothing
        expected = {
            window: scored_in_python(store.load(conn, "simulated", window), rems)
            for window, rems in REMS_OF_WINDOW.items()
        }
    for _ in range(2):  # the first answer keeps the closed months, the second reads them
        for window in REMS_OF_WINDOW:
            with engine.connect() as conn:
                found = totals.compute(conn, Track("simulated", "BTC", window), None, NOW)
            assert_close(found, expected[window], window)
    table = store.kept_months
    with engine.connect() as conn:
        months = conn.execute(select(table.c.window, table.c.month, table.c.changes, table.c.kept))
        assert sorted(months) == sorted((w, m, 0, 0) for w in REMS_OF_WINDOW for m in closed)
        sums = select(store.kept_sums.c.window, store.kept_sums.c.rem_s).distinct()
        assert {(w, r) for w, r in conn.execute(sums)} == {
            (w, r) for w, rems in REMS_OF_WINDOW.items() for r in rems
        }


BEFORE = "4e2a9b7c1d03"  # the revision before windows had a length


# The previous release's kept months (``calibration_kept_months``, keyed without a window).
LEGACY_MONTHS = table(
    "calibration_kept_months",
    column("source"), column("symbol"), column("month"), column("changes"), column("kept"),
)  # fmt: skip


def _previous_release_writes(conn: Connection, slug: str, start: int) -> None:
    """What the release before this migration writes for a window (its ``save_window`` and
    ``note_change``, as SQL): after a rollback it runs on the migrated tables."""
    conn.execute(
        text(
            "INSERT INTO calibration_windows (slug, window_start, source, symbol, updated_at)"
            " VALUES (:slug, :start, 'simulated', 'BTC', CURRENT_TIMESTAMP)"
        ),
        {"slug": slug, "start": start},
    )
    conn.execute(
        text(
            "INSERT INTO calibration_kept_months (source, symbol, month, changes)"
            " VALUES ('simulated', 'BTC', :month, 1) ON CONFLICT (source, symbol, month)"
            " DO UPDATE SET changes = calibration_kept_months.changes + 1"
        ),
        {"month": store.month_of(start)},
    )


def _columns(conn: Connection, table: str) -> set[str]:
    return {column["name"] for column in inspect(conn).get_columns(table)}


def test_the_migration_makes_older_rows_five_minute_ones_and_goes_back(tmp_path: Path) -> None:
    slug = MARKETS["BTC"].slug(T0, FIVE_MINUTES)
    sqlite_file = nullcontext(f"sqlite:///{tmp_path / 'before.sqlite3'}")
    # Own database: migrated to the release before this one, then back.
    for url_context in (sqlite_file, scratch_postgres_database()):
        with url_context as url:
            app = _app(url)
            with app.app_context():
                from flask_migrate import downgrade, upgrade

                from app.extensions import db

                upgrade(revision=BEFORE)
                with db.engine.begin() as conn:
                    conn.execute(
                        text(
                            "INSERT INTO calibration_windows (slug, window_start, source, symbol,"
                            " updated_at) VALUES (:slug, :start, 'simulated', 'BTC',"
                            " CURRENT_TIMESTAMP)"
                        ),
                        {"slug": slug, "start": T0},
                    )
                    conn.execute(
                        text(
                            "INSERT INTO calibration_kept_months (source, symbol, month, changes,"
                            " kept) VALUES ('simulated', 'BTC', 0, 3, 3)"
                        )
                    )
                upgrade()
                with db.engine.begin() as conn:
                    stored = conn.execute(select(store.windows.c.slug, store.windows.c.window))
                    assert list(stored) == [(slug, "5m")]
                    # The per-window kept totals start empty; the previous release's tables
                    # stay as they were (a rollback does not undo a migration).
                    assert conn.execute(select(store.kept_months)).all() == []
                    assert "window" in _columns(conn, "calibration_window_kept_sums")
                    assert conn.execute(select(LEGACY_MONTHS)).all() == [
                        ("simulated", "BTC", 0, 3, 3)
                    ]
                    _previous_release_writes(conn, f"btc-updown-5m-{T0 + 300}", T0 + 300)
                    longer = f"btc-updown-15m-{T0}"
                    store.save_window(conn, {"slug": longer, "window_start": T0,
                                             "source": "simulated", "window": "15m"})  # fmt: skip
                    store.save_checkpoint(conn, longer, {"rem_s": 870, "p_up": 0.5})
                    store.save_window(conn, {"slug": slug, "window_start": T0,
                                             "source": "simulated", "outcome": "up"})  # fmt: skip
                    # A 5-minute write counts in the previous release's month too, so its kept
                    # sums of that month are out of date after a rollback; a 15-minute one not.
                    month = store.month_of(T0)
                    legacy = select(LEGACY_MONTHS.c.changes).where(LEGACY_MONTHS.c.month == month)
                    assert conn.execute(legacy).scalar_one() == 2  # the old write and this one
                downgrade(revision=BEFORE)
                with db.engine.connect() as conn:
                    assert "window" not in _columns(conn, "calibration_windows")
                    assert "window" not in _columns(conn, "calibration_kept_months")
                    assert not inspect(conn).has_table("calibration_window_kept_months")
                    found = conn.execute(text("SELECT slug, symbol FROM calibration_windows"))
                    assert sorted(found) == [(slug, "BTC"), (f"btc-updown-5m-{T0 + 300}", "BTC")]
                    # The 15-minute window, which the older code would mix in, is gone.
                    assert conn.execute(text("SELECT * FROM calibration_checkpoints")).all() == []
                upgrade()  # and up again, from the downgraded state
                db.engine.dispose()
