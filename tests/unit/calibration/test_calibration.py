"""The live record: the refresher's boards stored as checkpoints and outcomes, and served.

On a migrated database of the test's own (SQLite, then PostgreSQL): the store, the recorder
driven by the real refresher loop and simulated source on a virtual clock, and
``GET /api/probboard/calibration``.
"""

from __future__ import annotations

import itertools
import logging
import threading
from typing import Any

import pytest
from flask import Flask
from sqlalchemy import create_engine, func, select, text
from sqlalchemy.engine import Engine

import app.api.calibration as calibration_view
import app.calibration.recorder as recorder_module
from app.board.row import BoardRow
from app.calibration import store
from app.calibration.checkpoints import REMS
from app.calibration.recorder import Recorder
from app.markets import SPANS, parse_symbols
from app.web import create_app
from harness.spans import REMS_OF_WINDOW
from tests.conftest import BASE_CONFIG
from tests.support.contract import validated
from tests.support.rows import live_row
from tests.support.track_record import record_both_windows, run_simulated

T0 = 1_800_000_000
CALIBRATION = "/api/probboard/calibration"


def window(slug: str, start: int, **values: Any) -> dict[str, Any]:
    base = {"slug": slug, "window_start": start, "source": "simulated", "rule": "spot",
            "price_to_beat": 100.0, "outcome": None, "outcome_source": None}  # fmt: skip
    return base | values


def test_the_store_keeps_outcomes_and_first_checkpoints(engine: Engine) -> None:
    with engine.begin() as conn:
        store.save_window(conn, window("w1", T0))
        store.save_checkpoint(conn, "w1", {"rem_s": 290, "p_up": 0.6, "market_mid": 0.58})
        store.save_checkpoint(conn, "w1", {"rem_s": 290, "p_up": 0.1})  # the first stays
        store.save_checkpoint(conn, "w1", {"rem_s": 60})  # missing: every value null
        store.save_window(conn, window("w1", T0, outcome="up", outcome_source="feed"))
        store.save_window(conn, window("w1", T0, price_to_beat=101.0))  # no outcome: kept
        store.save_window(conn, window("w0", T0 - 300, source="polymarket"))
    with engine.connect() as conn:
        found = store.load(conn, "simulated")
    assert found == [
        {"slug": "w1", "windowStart": T0, "rule": "spot", "priceToBeat": 101.0,
         "outcome": "up", "outcomeSource": "feed",
         "checkpoints": [{"remS": 290, "pUp": 0.6, "marketMid": 0.58},
                         {"remS": 60, "pUp": None, "marketMid": None}]},
    ]  # fmt: skip


def test_the_refresher_records_checkpoints_and_outcomes_of_the_simulated_source(
    engine: Engine,
) -> None:
    recorder = Recorder(engine, "simulated", 3000)
    start = T0 + 100  # joins the first window late: its earlier checkpoints are missing
    run_simulated(recorder, start, 3 * 300 + 20)
    assert recorder.flush()
    with engine.connect() as conn:
        found = store.load(conn, "simulated")
    recorder.close()
    assert [w["windowStart"] for w in found] == [T0, T0 + 300, T0 + 600, T0 + 900]
    first, second, third = found[0], found[1], found[2]
    assert [c["remS"] for c in first["checkpoints"]] == list(REMS)
    missing = [c for c in first["checkpoints"] if c["remS"] > 200]
    assert missing and all(c["pUp"] is None and c["marketMid"] is None for c in missing)
    for full in (second, third):
        assert [c["remS"] for c in full["checkpoints"]] == list(REMS)
        assert all(0 <= c["pUp"] <= 1 and 0 < c["marketMid"] < 1 for c in full["checkpoints"])
    # Outcomes from the feed: the next window's price to beat is this one's final price.
    for this, following in itertools.pairwise(found):
        expected = "up" if following["priceToBeat"] >= this["priceToBeat"] else "down"
        assert (this["outcome"], this["outcomeSource"]) == (expected, "feed"), this
    assert found[-1]["outcome"] is None  # still running


def test_each_market_is_settled_on_its_own_next_price_to_beat(engine: Engine) -> None:
    """Four markets on one board (issue 36): each window's outcome is its own market's next
    price to beat against its own, never another market's (keyed by the start alone, every
    market was settled on the last one's)."""
    recorder = Recorder(engine, "simulated", 3000)
    markets = parse_symbols("BTC,ETH,SOL,XRP")
    # Boards only where windows start and outcomes settle: the subject is outcomes alone.
    run_simulated(recorder, T0, 3 * 300 + 20, seed=7, markets=markets, outcomes_only=True)
    assert recorder.flush()
    with engine.connect() as conn:
        found = store.load(conn, "simulated")
    recorder.close()
    outcomes: dict[str, list[str]] = {}
    for symbol in ("btc", "eth", "sol", "xrp"):
        own = [w for w in found if w["slug"].startswith(f"{symbol}-updown-5m-")]
        assert [w["windowStart"] for w in own] == [T0, T0 + 300, T0 + 600, T0 + 900], symbol
        for this, following in itertools.pairwise(own):
            expected = "up" if following["priceToBeat"] >= this["priceToBeat"] else "down"
            assert (this["outcome"], this["outcomeSource"]) == (expected, "feed"), this
        outcomes[symbol] = [w["outcome"] for w in own[:3]]
    # The markets moved differently: a record settled on one market's prices would show it.
    assert len({tuple(o) for o in outcomes.values()}) > 1, outcomes


def test_fifteen_minute_windows_have_their_own_record(engine: Engine) -> None:
    """A board of 5- and 15-minute rows (issue 39): each length's windows are recorded apart,
    the 15-minute one at its own checkpoints and ended at its own end, so a market's record
    never mixes the two."""
    recorder = Recorder(engine, "polymarket", 3000)
    record_both_windows(recorder, T0, 900 + 39)
    assert recorder.flush()
    with engine.connect() as conn:
        lengths = {name: store.load(conn, "polymarket", name) for name in REMS_OF_WINDOW}
    recorder.close()
    found = {w["slug"]: w for loaded in lengths.values() for w in loaded}
    fives = [f"btc-updown-5m-{T0 + s}" for s in (0, 300, 600, 900)]
    fifteens = [f"btc-updown-15m-{T0}", f"btc-updown-15m-{T0 + 900}"]
    # Each length's record holds its own windows, the length stored with each.
    assert [w["slug"] for w in lengths["5m"]] == fives
    assert [w["slug"] for w in lengths["15m"]] == fifteens
    assert [c["remS"] for c in found[fives[0]]["checkpoints"]] == list(REMS)
    assert [c["remS"] for c in found[fifteens[0]]["checkpoints"]] == list(SPANS["15m"].rems)
    # Settled by its own length's next window (price to beat 100 + 900 against 100), not by
    # the 5-minute window after it.
    assert (found[fifteens[0]]["outcome"], found[fifteens[0]]["outcomeSource"]) == ("up", "feed")


def test_a_checkpoint_passed_while_the_row_was_stale_is_stored_as_missing(engine: Engine) -> None:
    """docs/calibration.md: a stale row's P(up) and mid are no forecast (issue 36, point 1)."""
    recorder = Recorder(engine, "polymarket", 3000)
    at = T0 + 10.0  # 290 s left
    for slug, age_ms in (("fresh", 2_900), ("stale", 3_100)):
        row = live_row(f"{slug}-{T0}", T0, rem_secs=290.0, ts=int(at * 1000) - age_ms,
                       settlement="spot", price_to_beat=100.0, up_bid=0.5, up_ask=0.52,
                       model_p_up=0.61)  # fmt: skip
        recorder.observe(row, at, {})
    assert recorder.flush()
    with engine.connect() as conn:
        found = {w["slug"]: w["checkpoints"] for w in store.load(conn, "polymarket")}
    recorder.close()
    assert found[f"fresh-{T0}"] == [{"remS": 290, "pUp": 0.61, "marketMid": 0.51}]
    assert found[f"stale-{T0}"] == [{"remS": 290, "pUp": None, "marketMid": None}]


def test_the_markets_resolution_replaces_the_feeds_outcome(engine: Engine) -> None:
    recorder = Recorder(engine, "polymarket", 3000)

    def row(start: int, rem: float, ptb: float, p_up: float) -> BoardRow:
        return live_row(f"m{start}", start, rem_secs=rem, settlement="twap", price_to_beat=ptb,
                        up_bid=0.5, up_ask=0.52, up_token_id=f"u{start}",
                        down_token_id=f"d{start}", model_p_up=p_up)  # fmt: skip

    for rem in (290.0, 5.0):
        recorder.observe(row(T0, rem, 100.0, 0.5), T0 + 300 - rem, {})
    recorder.observe(row(T0 + 300, 299.0, 99.0, 0.4), T0 + 301, {})  # final 99 < 100: down
    recorder.observe(row(T0 + 300, 290.0, 99.0, 0.4), T0 + 310, {})
    assert recorder.flush()
    with engine.connect() as conn:
        assert store.load(conn, "polymarket")[0]["outcomeSource"] == "feed"
        assert store.load(conn, "polymarket")[0]["outcome"] == "down"
    winners = {f"u{T0}": True, f"d{T0}": False}
    recorder.observe(row(T0 + 300, 180.0, 99.0, 0.4), T0 + 420, winners)
    assert recorder.flush()
    with engine.connect() as conn:
        resolved = store.load(conn, "polymarket")[0]
    recorder.close()
    assert (resolved["outcome"], resolved["outcomeSource"]) == ("up", "market")


def test_an_unmigrated_store_is_logged_once_and_written_once_migrated(
    database_url: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = create_engine(database_url)
    with engine.begin() as conn:
        conn.execute(text("DROP TABLE calibration_checkpoints"))
        conn.execute(text("DROP TABLE calibration_windows"))
    monkeypatch.setattr("app.calibration.recorder.RETRY_S", 0.2)
    caplog.set_level(logging.ERROR, logger="app.calibration.recorder")
    recorder = Recorder(engine, "simulated", 3000)
    run_simulated(recorder, T0 + 200, 120)
    assert not recorder.flush(timeout=1)
    errors = [r for r in caplog.records if "cannot write" in r.getMessage()]
    assert len(errors) == 1, [r.getMessage() for r in caplog.records]
    store.metadata.create_all(engine)
    assert recorder.flush(timeout=10)
    with engine.connect() as conn:
        stored = conn.execute(select(func.count()).select_from(store.checkpoints)).scalar_one()
    recorder.close()
    assert stored >= 5  # what was taken while the store was missing was kept, then written


# -- the endpoint ---------------------------------------------------------------------------


def test_the_endpoint_scores_the_record_and_keeps_its_answer_a_minute(
    accounts_app: Flask, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = accounts_app.test_client()
    empty = validated("calibration", client.get(CALIBRATION).get_data())
    assert empty["windows"] == 0 and empty["period"] is None
    assert [b["n"] for b in empty["buckets"]] == [0] * len(REMS)

    recorder = Recorder(engine, "simulated", 3000)
    run_simulated(recorder, T0, 4 * 300 + 20)
    assert recorder.flush()
    recorder.close()
    cached = validated("calibration", client.get(CALIBRATION).get_data())
    assert cached == empty  # computed at most once a minute
    monkeypatch.setattr(calibration_view, "MAX_AGE_S", 0)
    body = validated("calibration", client.get(CALIBRATION).get_data())
    assert body["source"] == "simulated" and body["windowsRecorded"] == 5
    assert body["windows"] == 4  # the last window has no outcome yet
    assert body["period"] == {
        "start": "2027-01-15T08:00:00.000Z",
        "end": "2027-01-15T08:25:00.000Z",
    }
    assert [b["remS"] for b in body["buckets"]] == list(REMS)
    assert all(b["n"] == 4 and b["nMarket"] == 4 for b in body["buckets"])
    assert sum(b["n"] for b in body["reliability"]) == 4 * len(REMS)
    response = client.get(CALIBRATION)
    assert response.headers["Cache-Control"] == "no-store"
    assert response.headers["Content-Type"] == "application/json"


def test_an_unreadable_store_serves_the_last_answer_or_503(
    accounts_app: Flask, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = accounts_app.test_client()
    with engine.begin() as conn:
        conn.execute(text("ALTER TABLE calibration_checkpoints RENAME TO gone"))
    try:
        refused = client.get(CALIBRATION)
        assert refused.status_code == 503, refused.get_data(as_text=True)
        body = validated("error", refused.get_data())
        assert body["code"] == "calibration_unavailable" and refused.headers["Retry-After"]
    finally:
        with engine.begin() as conn:
            conn.execute(text("ALTER TABLE gone RENAME TO calibration_checkpoints"))
    first = client.get(CALIBRATION)
    assert first.status_code == 200
    monkeypatch.setattr(calibration_view, "MAX_AGE_S", 0)
    with engine.begin() as conn:
        conn.execute(text("ALTER TABLE calibration_checkpoints RENAME TO gone"))
    try:
        again = client.get(CALIBRATION)
        assert again.status_code == 200 and again.get_data() == first.get_data()
    finally:
        with engine.begin() as conn:
            conn.execute(text("ALTER TABLE gone RENAME TO calibration_checkpoints"))


def test_the_endpoint_scores_one_market_at_a_time(database_url: str, engine: Engine) -> None:
    app = create_app({**BASE_CONFIG, "DATABASE_URL": database_url, "SYMBOLS": "BTC,ETH"})
    try:
        recorder = Recorder(engine, "simulated", 3000)
        run_simulated(recorder, T0, 2 * 300 + 20, markets=parse_symbols("BTC,ETH"))
        assert recorder.flush()
        recorder.close()
        client = app.test_client()
        bodies = {
            symbol: validated("calibration", client.get(f"{CALIBRATION}?symbol={symbol}").data)
            for symbol in ("btc", "ETH")
        }
        default = validated("calibration", client.get(CALIBRATION).get_data())
        assert default == bodies["btc"] and default["symbol"] == "BTC"
        assert bodies["ETH"]["symbol"] == "ETH"
        # Each market's own windows: three each (the last without an outcome), not six.
        assert bodies["btc"]["windowsRecorded"] == bodies["ETH"]["windowsRecorded"] == 3
        assert bodies["btc"]["windows"] == bodies["ETH"]["windows"] == 2
        refused = client.get(f"{CALIBRATION}?symbol=SOL")  # not served
        assert refused.status_code == 400
        assert validated("error", refused.data)["code"] == "invalid_symbol"
    finally:
        with app.app_context():
            from app.extensions import db

            db.session.remove()
            db.engine.dispose()


def test_a_backlog_behind_a_slow_write_is_written_whole(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store takes writes again after one slow write; what queued meanwhile (more than
    ``PENDING_MAX``, made 20 here) is all written: the cap is for a store that refuses writes,
    never for a backlog of a healthy one (a review found the batch dropping its oldest)."""
    monkeypatch.setattr(recorder_module, "PENDING_MAX", 20)
    gate = threading.Event()
    save = store.save_checkpoint

    def slow_once(conn: Any, slug: str, checkpoint: dict[str, Any]) -> None:
        assert gate.wait(10), "the test never let the write go"
        save(conn, slug, checkpoint)

    monkeypatch.setattr(store, "save_checkpoint", slow_once)
    recorder = Recorder(engine, "simulated", 3000)
    queued: list[tuple[str, str, str]] = []
    put = recorder._put

    def counted(kind: str, slug: str, values: dict[str, Any]) -> None:
        queued.append((kind, slug, str(values.get("rem_s"))))
        put(kind, slug, values)

    monkeypatch.setattr(recorder, "_put", counted)
    run_simulated(recorder, T0, 6 * 300)  # the first checkpoint's write waits meanwhile
    checkpoints = {q for q in queued if q[0] == "checkpoint"}
    assert len(checkpoints) > 2 * 20
    gate.set()
    assert recorder.flush(timeout=20)
    recorder.close()
    with engine.connect() as conn:
        stored = conn.execute(select(func.count()).select_from(store.checkpoints)).scalar_one()
    assert stored == len(checkpoints)
