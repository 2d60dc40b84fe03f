"""The track record over a period, scored by the database (issue 36, point 3).

On a generated store of three markets (SQLite, then PostgreSQL): the sums the database
computes (``app.calibration.totals``) give the answer the Python scoring
(``summary.summarize`` over ``store.load``) gives, for every market and every period;
``GET /api/probboard/calibration?period=`` answers from them; the migration fills the
``symbol`` of windows recorded before it.
"""

from __future__ import annotations

import math
import random
import sqlite3
import threading
from contextlib import nullcontext
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import insert, select, text
from sqlalchemy.engine import Engine

import app.api.calibration as calibration_view
from app.board.timefmt import served_at
from app.calibration import store, totals
from app.calibration.checkpoints import REMS
from app.calibration.periods import SPANS, since
from app.calibration.store import Track
from app.markets import parse_symbols
from app.web import create_app
from harness.databases import scratch_postgres_database
from harness.processes import wait_until
from harness.spans import FIVE_MINUTES
from tests.conftest import BASE_CONFIG
from tests.support.contract import validated
from tests.support.track_record import assert_close, scored_in_python

NOW = 1_795_000_000
DAY = 86_400
MARKETS = parse_symbols("BTC,ETH,SOL")
CALIBRATION = "/api/probboard/calibration"
# Values where scoring has edges: the clip, both ends, the bins' bounds (0.3 * 10 is not 3).
EDGES = [0.0, 1.0, 1e-5, 1 - 1e-5, 1e-4, 0.1, 0.3, 0.7, 0.9, 0.5]


def _probability(rng: random.Random) -> float | None:
    roll = rng.random()
    if roll < 0.1:
        return None
    if roll < 0.2:
        return rng.choice(EDGES)
    return rng.random()


def _generate(rng: random.Random) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Windows of each market from 40 days before NOW (one in 31, and one at each period's
    first second), in two sources, with missing values, outcomes and a rem not scored."""
    starts = list(range(NOW - 40 * DAY, NOW, 31 * 300))
    starts += [s for s in (since(name, NOW) for name in SPANS) if s is not None]
    rows, points = [], []
    for market in MARKETS:
        for start in starts:
            slug = market.slug(start, FIVE_MINUTES)
            outcome = rng.choice(["up", "down", "up", "down", None])
            source = "simulated" if rng.random() < 0.9 else "polymarket"
            rows.append({"slug": slug, "window_start": start, "source": source,
                         "symbol": market.symbol, "rule": "spot", "price_to_beat": 1.0,
                         "outcome": outcome, "outcome_source": outcome and "feed",
                         "updated_at": datetime.now(UTC)})  # fmt: skip
            for rem in (*REMS, 100):
                if rng.random() < 0.05:
                    continue  # never stored
                points.append({"slug": slug, "rem_s": rem, "p_up": _probability(rng),
                               "market_mid": _probability(rng),
                               "recorded_at": datetime.now(UTC)})  # fmt: skip
    return rows, points


def _python_scores(every: list[dict[str, Any]], symbol: str, first: int | None) -> dict[str, Any]:
    """Today's answer: every window loaded (``every``: ``store.load``'s), filtered, scored in
    Python."""
    loaded = [
        w
        for w in every
        if store.symbol_of(w["slug"]) == symbol and (first is None or w["windowStart"] >= first)
    ]
    return scored_in_python(loaded, REMS)


def test_the_databases_sums_score_as_python_does_every_market_and_period(
    engine: Engine,
) -> None:
    rows, points = _generate(random.Random(36))
    with engine.begin() as conn:
        conn.execute(insert(store.windows), rows)
        conn.execute(insert(store.checkpoints), points)
    with engine.connect() as conn:
        every = store.load(conn, "simulated")  # once: the filters below do not change it
        for market in MARKETS:
            for name in SPANS:
                first = since(name, NOW)
                expected = _python_scores(every, market.symbol, first)
                assert expected["windows"] > 0
                found = totals.compute(conn, Track("simulated", market.symbol, "5m"), first, NOW)
                assert_close(found, expected, f"{market.symbol} {name}")


def test_sqlite_without_math_functions_gets_pythons_ln() -> None:
    conn = sqlite3.connect(":memory:")
    totals.sqlite_math(conn)  # with or without its own, there is one afterwards
    assert conn.execute("SELECT ln(1)").fetchone() == (0.0,)
    totals.register_math(conn)  # as if it were missing: Python's, SQLite's values
    assert conn.execute("SELECT ln(0.25), ln(NULL), ln(0)").fetchone() == (
        math.log(0.25),
        None,
        None,
    )


def test_a_window_stored_without_symbol_gets_its_slugs(engine: Engine) -> None:
    with engine.begin() as conn:
        store.save_window(conn, {"slug": "xrp-updown-5m-1795000200", "window_start": 1795000200,
                                 "source": "simulated", "rule": "spot", "price_to_beat": 2.5,
                                 "outcome": None, "outcome_source": None})  # fmt: skip
        assert conn.execute(select(store.windows.c.symbol)).scalar_one() == "XRP"


def test_the_endpoint_scores_the_period_asked_for(
    database_url: str, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(calibration_view, "clock", lambda: float(NOW))
    with engine.begin() as conn:
        for start in (NOW - 2 * DAY, NOW - 3600, NOW - 40 * DAY):
            slug = MARKETS[0].slug(start, FIVE_MINUTES)
            store.save_window(conn, {"slug": slug, "window_start": start,
                                     "source": "simulated", "rule": "spot", "price_to_beat": 1.0,
                                     "outcome": "up", "outcome_source": "feed"})  # fmt: skip
            store.save_checkpoint(
                conn, MARKETS[0].slug(start, FIVE_MINUTES), {"rem_s": 30, "p_up": 0.8}
            )
    app = create_app({**BASE_CONFIG, "DATABASE_URL": database_url})
    try:
        client = app.test_client()
        recorded = {}
        for name in ("24h", "7d", "30d", "all"):
            body = validated("calibration", client.get(f"{CALIBRATION}?period={name}").data)
            assert body["span"] == name
            recorded[name] = body["windowsRecorded"]
        assert recorded == {"24h": 1, "7d": 2, "30d": 2, "all": 3}
        default = validated("calibration", client.get(CALIBRATION).data)
        assert default["span"] == "all" and default["windowsRecorded"] == 3
        assert default["period"] == {
            "start": served_at((NOW - 40 * DAY) * 1000),
            "end": served_at((NOW - 3600 + 300) * 1000),
        }
        for query in ("period=1y", "period=", "period=24H", "period=24h&period=7d"):
            refused = client.get(f"{CALIBRATION}?{query}")
            assert refused.status_code == 400, query
            assert validated("error", refused.data)["code"] == "invalid_period"
    finally:
        with app.app_context():
            from app.extensions import db

            db.session.remove()
            db.engine.dispose()


def test_the_migration_fills_the_symbol_of_windows_recorded_before_it(tmp_path: Path) -> None:
    sqlite_file = nullcontext(f"sqlite:///{tmp_path / 'before.sqlite3'}")
    # Own database: migrated to the release before this one, then upgraded.
    for url_context in (sqlite_file, scratch_postgres_database()):
        with url_context as url:
            app = create_app({**BASE_CONFIG, "DATABASE_URL": url})
            with app.app_context():
                from flask_migrate import upgrade

                from app.extensions import db

                upgrade(revision="5b7c2d9e1a40")
                with db.engine.begin() as conn:
                    for slug in ("btc-updown-5m-1795000200", "sol-updown-5m-1795000500"):
                        conn.execute(
                            text(
                                "INSERT INTO calibration_windows (slug, window_start, source,"
                                " updated_at) VALUES (:slug, 1, 'simulated', CURRENT_TIMESTAMP)"
                            ),
                            {"slug": slug},
                        )
                upgrade()
                with db.engine.connect() as conn:
                    found = conn.execute(text("SELECT slug, symbol FROM calibration_windows"))
                    assert sorted(found) == [
                        ("btc-updown-5m-1795000200", "BTC"),
                        ("sol-updown-5m-1795000500", "SOL"),
                    ]
                db.engine.dispose()


def test_an_answer_slower_than_the_deadline_is_kept_for_the_next_request(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    slow = threading.Event()
    computed = totals.compute

    def held_back(*args: Any) -> dict[str, Any]:
        slow.wait(10)
        return computed(*args)

    monkeypatch.setattr(totals, "compute", held_back)
    app = create_app({**BASE_CONFIG, "DATABASE_URL": database_url, "DB_TIMEOUT_MS": "100"})
    try:
        client = app.test_client()
        first = client.get(CALIBRATION)
        assert first.status_code == 503  # the deadline passed: not yet
        assert validated("error", first.data)["code"] == "calibration_unavailable"
        slow.set()  # the computation finishes on its own, for the next request
        assert wait_until(lambda: client.get(CALIBRATION).status_code == 200, timeout=5)
        assert validated("calibration", client.get(CALIBRATION).data)["windowsRecorded"] == 0
    finally:
        slow.set()
        with app.app_context():
            from app.extensions import db

            db.session.remove()
            db.engine.dispose()
