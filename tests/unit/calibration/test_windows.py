"""``GET /api/probboard/windows``: the recorded windows of one market, paged, as JSON or CSV.

On a migrated database of the test's own (SQLite, then PostgreSQL), filled through the
store's own writers; every JSON body is validated against its schema.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import create_engine, insert
from sqlalchemy.engine import Engine

from app.api.windows_csv import HEADER
from app.calibration import cursor, store
from app.calibration.checkpoints import REMS
from app.calibration.recorder import Recorder
from app.markets import MARKETS
from app.services import services_of
from app.web import create_app
from harness.spans import FIVE_MINUTES
from tests.conftest import BASE_CONFIG
from tests.support.contract import validated
from tests.support.rows import live_row

WINDOWS = "/api/probboard/windows"
T0 = 1_800_000_000
COUNT = 12  # windows per market: BTC's and ETH's starts interleave in the table


def iso(seconds: int) -> str:
    """``seconds`` as ISO 8601 with a Z."""
    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")


def fill(engine: Engine) -> None:
    """COUNT windows of BTC and of ETH (simulated), and one of BTC from another source:
    the rows ``save_window`` and ``save_checkpoint`` store, in two inserts (the listing
    reads no month's count of changes, which those also keep)."""
    now = datetime.now(UTC)
    rows, points = [], []
    for symbol in ("BTC", "ETH"):
        for i in range(COUNT):
            start = T0 + 300 * i
            slug = MARKETS[symbol].slug(start, FIVE_MINUTES)
            outcome = None if i == COUNT - 1 else ("up" if i % 2 else "down")
            rows.append({
                "slug": slug, "window_start": start, "source": "simulated", "symbol": symbol,
                "window": "5m", "rule": "twap" if i % 3 == 0 else "spot",
                "lookback_s": 60 if i % 3 == 0 else None,
                "price_to_beat": 100.0 + i, "outcome": outcome,
                "outcome_source": None if outcome is None else "feed", "updated_at": now,
            })  # fmt: skip
            points += [{
                "slug": slug, "rem_s": rem, "p_up": 0.5 + i / 100, "market_mid": 0.49,
                "sigma": 0.001, "price": 100.5 + i, "price_to_beat": 100.0 + i,
                "recorded_at": now,
            } for rem in REMS]  # fmt: skip
    rows.append({
        "slug": MARKETS["BTC"].slug(T0 + 300 * COUNT, FIVE_MINUTES),
        "window_start": T0 + 300 * COUNT,
        "source": "polymarket", "symbol": "BTC", "window": "5m", "rule": "spot",
        "lookback_s": None, "price_to_beat": 1.0, "outcome": None, "outcome_source": None,
        "updated_at": now,
    })  # fmt: skip
    with engine.begin() as conn:
        conn.execute(insert(store.windows), rows)
        conn.execute(insert(store.checkpoints), points)


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    found = create_engine(database_url)
    fill(found)
    yield found
    found.dispose()


@pytest.fixture
def windows_app(database_url: str, engine: Engine) -> Iterator[Flask]:
    """BTC and ETH served from the filled store, guests held to 5 a minute."""
    app = create_app({**BASE_CONFIG, "DATABASE_URL": database_url, "SYMBOLS": "BTC,ETH",
                      "GUEST_RATE_LIMIT": "5 per minute"})  # fmt: skip
    yield app
    with app.app_context():
        from app.extensions import db

        db.engine.dispose()


class Caller:
    """A client that asks from a new address each time: the guest limit never answers first."""

    def __init__(self, app: Flask) -> None:
        self.client: FlaskClient = app.test_client()
        self.n = 0

    def get(self, query: dict[str, Any] | str = "", **kwargs: Any) -> Any:
        self.n += 1
        address = {"REMOTE_ADDR": f"10.1.{self.n // 250}.{self.n % 250 + 1}"}
        return self.client.get(WINDOWS, query_string=query, environ_base=address, **kwargs)

    def page(self, query: dict[str, Any] | str = "") -> dict[str, Any]:
        response = self.get(query)
        assert response.status_code == 200, response.data
        return validated("windows", response.data)

    def refused(self, query: dict[str, Any] | str, **kwargs: Any) -> str:
        response = self.get(query, **kwargs)
        assert response.status_code == 400, response.data
        code: str = validated("error", response.data)["code"]
        return code


@pytest.fixture
def caller(windows_app: Flask) -> Caller:
    return Caller(windows_app)


def starts(body: dict[str, Any]) -> list[int]:
    return [w["windowStart"] for w in body["windows"]]


def test_the_first_served_markets_windows_newest_first_with_their_checkpoints(
    caller: Caller,
) -> None:
    body = caller.page()
    assert (body["symbol"], body["source"], body["next"]) == ("BTC", "simulated", None)
    assert starts(body) == [T0 + 300 * i for i in reversed(range(COUNT))]  # not polymarket's
    newest, first = body["windows"][0], body["windows"][-1]
    assert newest["outcome"] is None and newest["outcomeSource"] is None
    assert first == {
        "slug": f"btc-updown-5m-{T0}", "windowStart": T0, "windowEnd": T0 + 300,
        "rule": "twap", "lookbackS": 60, "priceToBeat": 100.0, "outcome": "down",
        "outcomeSource": "feed",
        "checkpoints": [{"remS": rem, "pUp": 0.5, "marketMid": 0.49, "sigma": 0.001,
                         "price": 100.5} for rem in REMS],
    }  # fmt: skip
    assert body["windows"][-2]["lookbackS"] is None  # spot
    eth = caller.page({"symbol": "eth"})
    assert eth["symbol"] == "ETH" and eth["windows"][0]["slug"].startswith("eth-updown-5m-")


@pytest.mark.parametrize("as_iso", [False, True])
def test_from_and_to_as_unix_seconds_or_iso(caller: Caller, as_iso: bool) -> None:
    low, high = T0 + 300 * 3, T0 + 300 * 7
    show = iso if as_iso else str
    body = caller.page({"from": show(low), "to": show(high)})
    assert starts(body) == [T0 + 300 * i for i in (6, 5, 4, 3)]  # from inclusive, to exclusive
    assert starts(caller.page({"from": show(low + 1)}))[-1] == T0 + 300 * 4
    assert starts(caller.page({"to": show(high + 1)}))[0] == high
    assert datetime.fromtimestamp(T0, UTC) == datetime(2027, 1, 15, 8, 0, tzinfo=UTC)
    assert starts(caller.page({"from": "2027-01-15T08:10:00Z"}))[-1] == T0 + 600
    assert starts(caller.page({"from": "2027-01-15T11:10:00+03:00"}))[-1] == T0 + 600
    assert starts(caller.page({"from": "2027-01-15T08:10:00"}))[-1] == T0 + 600  # no zone: UTC


@pytest.mark.parametrize(
    "value",
    ["", "yesterday", "2027-13-01", "-5", "1.5e9", "\uff11\uff18\uff10\uff10", "2027-01-15T25:00Z"],
)
def test_a_bad_time_is_a_400(caller: Caller, value: str) -> None:
    assert caller.refused({"from": value}) == "invalid_time"
    assert caller.refused({"to": value}) == "invalid_time"


def test_from_after_to_or_given_twice_is_a_400(caller: Caller) -> None:
    assert caller.refused({"from": str(T0 + 1), "to": str(T0)}) == "invalid_time"
    assert caller.refused(f"from={T0}&from={T0}") == "invalid_time"


def test_limit_default_max_and_invalid(caller: Caller, engine: Engine) -> None:
    assert len(caller.page({"limit": "3"})["windows"]) == 3
    # BTC's windows after COUNT's (another source's, which saving again would leave as it
    # is): 1,099, more than a page of the maximum, in one statement, as save_window stores
    # them (its symbol, 5-minute length and time of update).
    added = [{"slug": MARKETS["BTC"].slug(T0 + 300 * i, FIVE_MINUTES), "window_start": T0 + 300 * i,
              "source": "simulated", "symbol": "BTC", "window": "5m",
              "updated_at": datetime.now(UTC)}
             for i in range(COUNT + 1, COUNT + 1100)]  # fmt: skip
    with engine.begin() as conn:
        conn.execute(insert(store.windows), added)
    default = caller.page()
    assert len(default["windows"]) == 100 and default["next"] is not None
    assert len(caller.page({"limit": "1000"})["windows"]) == 1000
    for bad in ("0", "1001", "-1", "ten", "", "1.0", " 5", "99999"):
        assert caller.refused({"limit": bad}) == "invalid_limit", bad
    assert caller.refused("limit=5&limit=6") == "invalid_limit"


@pytest.mark.parametrize("limit", [1, 5, 11, 12])
def test_paging_with_the_cursor_has_no_duplicate_and_no_gap(
    caller: Caller, engine: Engine, limit: int
) -> None:
    query: dict[str, Any] = {"symbol": "ETH", "limit": str(limit), "from": str(T0 + 300)}
    seen: list[int] = []
    body = caller.page(query)
    pages = 1
    newer = T0 + 300 * COUNT  # recorded after the first page: the next pages do not shift
    with engine.begin() as conn:
        slug = MARKETS["ETH"].slug(newer, FIVE_MINUTES)
        store.save_window(conn, {"slug": slug, "window_start": newer,
                                 "source": "simulated"})  # fmt: skip
    while body["next"] is not None:
        seen += starts(body)
        assert len(body["windows"]) == limit
        body = caller.page({**query, "cursor": body["next"]})
        pages += 1
    seen += starts(body)
    assert seen == [T0 + 300 * i for i in reversed(range(1, COUNT))]
    assert pages == -(-(COUNT - 1) // limit)  # exactly as many pages as needed
    assert starts(caller.page(query))[0] == newer  # a new first page has it


def test_a_tampered_foreign_or_mismatched_cursor_is_a_400(
    caller: Caller, windows_app: Flask
) -> None:
    cursors = services_of(windows_app).cursors
    good = caller.page({"limit": "2"})["next"]
    assert good is not None
    body, check = good.split(".")
    edited = cursor._b64(cursor._unb64(body).replace(b"BTC", b"ETH")) + "." + check
    for bad in (
        "",
        "abc",
        "a.b",
        good[:-1],
        good + "A",
        edited,
        good.replace(".", ""),
        "é." + check,
        cursors.encode(cursor.Cursor("BTC", None, None, 5))[:-2] + "AA",
    ):
        assert caller.refused({"cursor": bad, "limit": "2"}) == "invalid_cursor", bad
    # Another query's cursor: another symbol, or another span.
    assert caller.refused({"cursor": good, "symbol": "ETH"}) == "invalid_cursor"
    assert caller.refused({"cursor": good, "from": str(T0)}) == "invalid_cursor"
    assert caller.refused(f"cursor={good}&cursor={good}") == "invalid_cursor"
    # The same query with another page size is fine.
    assert len(caller.page({"cursor": good, "limit": "3"})["windows"]) == 3


@pytest.mark.parametrize("value", ["doge", "xrp", "btc,eth", "", " btc"])
def test_an_unknown_symbol_is_a_400(caller: Caller, value: str) -> None:
    assert caller.refused({"symbol": value}) == "invalid_symbol"


def read_csv(response: Any) -> list[dict[str, str]]:
    assert response.status_code == 200
    assert response.mimetype == "text/csv"
    assert response.is_streamed  # a generator: written a window at a time
    text = response.get_data(as_text=True)
    assert text.startswith(",".join(HEADER) + "\r\n")
    return list(csv.DictReader(io.StringIO(text)))


@pytest.mark.parametrize(
    ("query", "headers"),
    [({"format": "csv"}, {}), ({}, {"Accept": "text/csv"}),
     ({}, {"Accept": "application/json;q=0.5, text/csv"})],
)  # fmt: skip
def test_csv_one_line_per_checkpoint_with_its_windows_columns(
    caller: Caller, query: dict[str, str], headers: dict[str, str]
) -> None:
    lines = read_csv(caller.get({"symbol": "eth", "limit": "2", **query}, headers=headers))
    assert len(lines) == 2 * len(REMS)
    newest = T0 + 300 * (COUNT - 1)
    assert lines[0] == {
        "symbol": "ETH", "source": "simulated", "slug": f"eth-updown-5m-{newest}",
        "windowStart": str(newest), "windowEnd": str(newest + 300), "rule": "spot",
        "lookbackS": "", "priceToBeat": "111.0", "outcome": "", "outcomeSource": "",
        "remS": "290", "pUp": "0.61", "marketMid": "0.49", "sigma": "0.001", "price": "111.5",
    }  # fmt: skip
    assert [line["remS"] for line in lines[:9]] == [str(rem) for rem in REMS]
    assert lines[9]["windowStart"] == str(newest - 300) and lines[9]["outcome"] == "down"


def test_csv_pages_like_json_and_json_stays_the_default(caller: Caller) -> None:
    response = caller.get({"format": "csv", "limit": "5"})
    following = response.headers["X-Next-Cursor"]
    assert len(read_csv(response)) == 5 * len(REMS)
    rest = read_csv(caller.get({"format": "csv", "limit": "100", "cursor": following}))
    assert len(rest) == (COUNT - 5) * len(REMS)
    for accept in ("*/*", "application/json", "text/csv;q=0.1, application/json", ""):
        response = caller.get(headers={"Accept": accept} if accept else {})
        assert response.mimetype == "application/json", accept
    json_wins = caller.get({"format": "json"}, headers={"Accept": "text/csv"})
    assert json_wins.mimetype == "application/json"
    assert caller.refused({"format": "xml"}) == "invalid_format"


def test_a_window_without_checkpoints_is_one_csv_line(caller: Caller, engine: Engine) -> None:
    start = T0 + 300 * (COUNT + 1)  # after polymarket's window (the same slug at COUNT)
    with engine.begin() as conn:
        slug = MARKETS["BTC"].slug(start, FIVE_MINUTES)
        store.save_window(conn, {"slug": slug, "window_start": start,
                                 "source": "simulated", "rule": "spot"})  # fmt: skip
    [line] = read_csv(caller.get({"format": "csv", "limit": "1"}))
    assert (line["windowStart"], line["remS"], line["pUp"]) == (str(start), "", "")
    assert caller.page({"limit": "1"})["windows"][0]["checkpoints"] == []


def test_prices_are_exported_to_their_sources_decimals(caller: Caller, engine: Engine) -> None:
    """Issue 50, point 5: a window recorded with float noise (a TWAP mean, before rows were
    rounded) is exported to the Chainlink stream's 8 decimals, in JSON and in CSV."""
    start = T0 + 300 * (COUNT + 1)
    slug = MARKETS["BTC"].slug(start, FIVE_MINUTES)
    with engine.begin() as conn:
        store.save_window(conn, {"slug": slug, "window_start": start, "source": "simulated",
                                 "rule": "twap", "price_to_beat": 100050.94263611984})  # fmt: skip
        conn.execute(insert(store.checkpoints), [{
            "slug": slug, "rem_s": 60, "p_up": 0.5, "market_mid": 0.5, "sigma": 0.001,
            "price": 100051.12345678912, "price_to_beat": 100050.94263611984,
            "recorded_at": datetime.now(UTC),
        }])  # fmt: skip
    newest = caller.page({"limit": "1"})["windows"][0]
    assert newest["priceToBeat"] == 100050.94263612
    assert newest["checkpoints"][0]["price"] == 100051.12345679
    [line] = read_csv(caller.get({"format": "csv", "limit": "1"}))
    assert (line["priceToBeat"], line["price"]) == ("100050.94263612", "100051.12345679")


def test_reads_count_like_a_guests_latest_read(windows_app: Flask) -> None:
    client = windows_app.test_client()
    for remaining in (4, 3, 2, 1, 0):
        ok = client.get(WINDOWS, query_string={"limit": "1"})
        assert ok.status_code == 200
        assert ok.headers["X-RateLimit-Limit"] == "5"
        assert ok.headers["X-RateLimit-Remaining"] == str(remaining)
    refused = client.get(WINDOWS, query_string={"format": "csv"})
    assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1
    assert validated("error", refused.data)["code"] == "rate_limited"
    assert client.get(WINDOWS, query_string={"symbol": "doge"}).status_code == 400  # no slot
    # A key changes nothing: the endpoint is public, counted by address.
    keyed = client.get(WINDOWS, headers={"X-API-Key": "pbk_" + "C" * 43})
    assert keyed.status_code == 429
    other = client.get(WINDOWS, environ_base={"REMOTE_ADDR": "10.9.9.9"})
    assert other.status_code == 200
    # flask-limiter's key names the endpoint: the export has a window of its own, and the
    # same address still reads the board.
    assert client.get("/api/probboard/latest").status_code == 200


def test_the_recorder_stores_a_twap_windows_lookback(database_url: str) -> None:
    engine = create_engine(database_url)
    recorder = Recorder(engine, "polymarket", 3000)
    row = live_row("btc-updown-5m-1", T0, twap_lookback_s=30, rem_secs=290.0,
                   settlement="twap", price_to_beat=100.0, model_p_up=0.5)  # fmt: skip
    recorder.observe(row, T0 + 10, {})
    later = live_row("btc-updown-5m-1", T0, twap_lookback_s=None, rem_secs=240.0,
                     settlement="twap", price_to_beat=100.0, model_p_up=0.5)  # fmt: skip
    recorder.observe(later, T0 + 60, {})
    assert recorder.flush()
    recorder.close()
    with engine.connect() as conn:
        stored = conn.execute(store.windows.select()).mappings().one()
    engine.dispose()
    assert (stored["rule"], stored["lookback_s"]) == ("twap", 30)


def test_a_store_that_cannot_be_read_is_a_503(windows_app: Flask, database_url: str) -> None:
    if not database_url.startswith("sqlite"):
        pytest.skip("dropping the table once is enough")
    engine = create_engine(database_url)
    with engine.begin() as conn:
        conn.execute(store.checkpoints.delete())
        store.checkpoints.drop(conn)
    engine.dispose()
    response = Caller(windows_app).get()
    assert response.status_code == 503
    body = validated("error", response.data)
    assert body["code"] == "record_unavailable" and body["retryAfterMs"] == 5000


@pytest.mark.parametrize(
    ("query", "accept", "media"),
    [
        ({}, None, "application/json"),
        ({}, "text/csv", "text/csv"),
        ({}, "text/csv;q=0.5, application/json", "application/json"),
        ({"format": "csv"}, None, "text/csv"),
    ],
)
def test_the_answer_varies_on_accept(
    caller: Caller, query: dict[str, str], accept: str | None, media: str
) -> None:
    """JSON or CSV is picked by ``Accept``: a shared cache must key on it (issue 46)."""
    headers = {"Accept": accept} if accept else {}
    response = caller.get(query, headers=headers)
    assert response.status_code == 200 and response.mimetype == media
    assert "accept" in {v.strip().lower() for v in response.headers["Vary"].split(",")}
