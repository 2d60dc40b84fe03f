"""``/api/probboard/latest`` and ``/api/health`` on the embedded (memory://) board bus."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

import app.api.latest as latest_view
from app.board.snapshot import parse_snapshot
from app.board.timefmt import now_ms
from app.bus import BoardBus
from app.markets import parse_symbols
from app.refresher.loop import Refresher
from app.refresher.sources.simulated import SimulatedSource
from app.services import services_of
from app.web import create_app
from tests.conftest import BASE_CONFIG
from tests.support.contract import validated

LATEST = "/api/probboard/latest"
# 2026-01-01 00:00:00.123 UTC
T0_MS = 1_767_225_600_123
SERVED_AT = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
UPDATED_AT = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3}$")
BOARD_ITEM_FIELDS = {
    "symbol", "slot", "p_up_pct", "p_down_pct", "up_bid", "up_ask", "down_bid", "down_ask",
    "up_token_id", "down_token_id", "rem_secs", "dataAgeMs", "isStale", "latencyLevel",
}  # fmt: skip


# -- helpers -----------------------------------------------------------------------------


def row(ts_ms: int, **overrides: Any) -> dict[str, Any]:
    """A complete published BTC row whose data time is ``ts_ms``."""
    item: dict[str, Any] = {
        "symbol": "BTC",
        "slot": ts_ms // 300_000 * 300,  # the window start in unix seconds
        "p_up_pct": 61.25,
        "p_down_pct": 38.75,
        "up_bid": 0.6,
        "up_ask": 0.61,
        "down_bid": 0.39,
        "down_ask": 0.4,
        "up_token_id": "1" + "2" * 76,
        "down_token_id": "9" + "8" * 76,
        "rem_secs": 120.5,
        "ts": ts_ms,
    }
    item.update(overrides)
    return item


def board(seq: int, ts_ms: int, items: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A published board document."""
    return {
        "seq": seq,
        "ts": ts_ms,
        "source": "test",
        "items": [row(ts_ms)] if items is None else items,
    }


def bus_of(app: Flask) -> BoardBus:
    bus: BoardBus = services_of(app).bus
    return bus


def publish(app: Flask, document: dict[str, Any] | str) -> None:
    """Publish ``document`` (a dict is serialised) on the app's bus."""
    raw = document if isinstance(document, str) else json.dumps(document)
    bus_of(app).publish(raw)


def get_board(client: FlaskClient, **kwargs: Any) -> tuple[TestResponse, dict[str, Any]]:
    response = client.get(LATEST, **kwargs)
    assert response.status_code == 200
    assert response.mimetype == "application/json"
    return response, validated("board", response.data)


def utc_updated_at(epoch_ms: int) -> str:
    """Independent rendering of ``updatedAt``: UTC, milliseconds."""
    moment = datetime.fromtimestamp(epoch_ms / 1000, tz=UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{epoch_ms % 1000:03d}"


@pytest.fixture
def set_now(monkeypatch: pytest.MonkeyPatch) -> Callable[[int], None]:
    """Fix the serve-time clock of the latest endpoint at an epoch-ms value."""

    def setter(epoch_ms: int) -> None:
        monkeypatch.setattr(latest_view, "now_ms", lambda: epoch_ms)

    return setter


# -- before any board ---------------------------------------------------------------------


def test_before_any_board(client: FlaskClient) -> None:
    response, body = get_board(client)

    assert response.headers["Cache-Control"] == "no-store"
    assert body["ok"] is True
    assert body["plan"] == "guest"
    assert body["planLabel"] == "Guest"
    assert body["refreshMs"] == 5000
    assert body["items"] == []
    assert body["updatedAt"] is None
    assert body["dataAgeMs"] is None
    assert body["latencyLevel"] == "danger"
    assert body["isStale"] is True
    assert body["staleThresholdMs"] == 3000
    assert body["severeStaleThresholdMs"] == 15000
    assert SERVED_AT.match(body["servedAt"])


# -- a published board ----------------------------------------------------------------------


def test_board_from_the_refresher_is_served_in_full(
    app: Flask, client: FlaskClient, set_now: Callable[[int], None]
) -> None:
    refresher = Refresher(
        SimulatedSource(parse_symbols("BTC"), seed=7), bus_of(app), 500, clock=lambda: T0_MS / 1000
    )
    assert refresher.tick() is True
    snapshot = bus_of(app).latest()
    assert snapshot is not None
    published = snapshot.document
    set_now(T0_MS + 1234)

    response, body = get_board(client)

    assert response.headers["Cache-Control"] == "no-store"
    assert body["plan"] == "guest"
    assert body["planLabel"] == "Guest"
    assert body["refreshMs"] == 5000
    assert body["updatedAt"] == "2026-01-01 00:00:00.123"
    assert body["updatedAt"] == utc_updated_at(published["ts"])
    assert body["servedAt"] == "2026-01-01T00:00:01.357Z"
    assert body["dataAgeMs"] == 1234
    assert body["isStale"] is False
    assert body["latencyLevel"] == "ok"
    assert len(body["items"]) == 1
    item = body["items"][0]
    assert set(item) >= BOARD_ITEM_FIELDS
    assert item == {
        **published["items"][0],
        "dataAgeMs": 1234,
        "isStale": False,
        "latencyLevel": "ok",
    }
    assert item["symbol"] == "BTC"
    assert item["slot"] == T0_MS // 1000 // 300 * 300  # the window start
    assert item["p_up_pct"] + item["p_down_pct"] == 100
    assert len(item["up_token_id"]) == 77 and item["up_token_id"].isdigit()
    assert len(item["down_token_id"]) == 77 and item["down_token_id"].isdigit()
    assert 0 < item["rem_secs"] <= 300


def test_published_values_come_back_unchanged(
    app: Flask, client: FlaskClient, set_now: Callable[[int], None]
) -> None:
    published = row(T0_MS, p_up_pct=12.5, p_down_pct=87.5, up_bid=0.11, extra={"k": [1, 2]})
    publish(app, board(1, T0_MS, [published]))
    set_now(T0_MS)

    _, body = get_board(client)

    assert body["items"] == [{**published, "dataAgeMs": 0, "isStale": False, "latencyLevel": "ok"}]


@pytest.mark.parametrize(
    ("ts_ms", "expected"),
    [
        (T0_MS, "2026-01-01 00:00:00.123"),
        (951_782_400_999, "2000-02-29 00:00:00.999"),
        (1_719_791_999_000, "2024-06-30 23:59:59.000"),
        (0, "1970-01-01 00:00:00.000"),
        (1_000, "1970-01-01 00:00:01.000"),
    ],
)
def test_updated_at_is_the_board_ts_in_utc(
    app: Flask,
    client: FlaskClient,
    set_now: Callable[[int], None],
    ts_ms: int,
    expected: str,
) -> None:
    publish(app, board(5, ts_ms))
    set_now(T0_MS)

    _, body = get_board(client)

    assert UPDATED_AT.match(body["updatedAt"])
    assert body["updatedAt"] == expected == utc_updated_at(ts_ms)
    assert body["servedAt"] == "2026-01-01T00:00:00.123Z"


def test_served_at_is_iso_utc_with_milliseconds(app: Flask, client: FlaskClient) -> None:
    publish(app, board(1, now_ms()))

    _, body = get_board(client)

    assert SERVED_AT.match(body["servedAt"])
    served = datetime.strptime(body["servedAt"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    updated = datetime.strptime(body["updatedAt"], "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=UTC)
    assert served >= updated


# -- staleness ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("age_ms", "is_stale", "level"),
    [
        (0, False, "ok"),
        (2999, False, "ok"),
        (3000, False, "ok"),
        (3001, True, "warn"),
        (14_999, True, "warn"),
        (15_000, True, "warn"),
        (15_001, True, "danger"),
        (3_600_000, True, "danger"),
    ],
)
def test_staleness_levels_at_the_thresholds(
    app: Flask,
    client: FlaskClient,
    set_now: Callable[[int], None],
    age_ms: int,
    is_stale: bool,
    level: str,
) -> None:
    publish(app, board(1, T0_MS))
    set_now(T0_MS + age_ms)

    _, body = get_board(client)

    assert body["dataAgeMs"] == age_ms
    assert body["isStale"] is is_stale
    assert body["latencyLevel"] == level
    [item] = body["items"]
    assert item["dataAgeMs"] == age_ms
    assert item["isStale"] is is_stale
    assert item["latencyLevel"] == level


def test_board_from_the_future_counts_as_fresh(
    app: Flask, client: FlaskClient, set_now: Callable[[int], None]
) -> None:
    publish(app, board(1, T0_MS + 5000))
    set_now(T0_MS)

    _, body = get_board(client)

    assert body["dataAgeMs"] == 0
    assert body["latencyLevel"] == "ok"
    assert body["items"][0]["dataAgeMs"] == 0


def test_staleness_transitions_on_the_wall_clock(app: Flask, client: FlaskClient) -> None:
    """Boards whose data lies further and further in the past: ok, then warn, then danger."""
    seen = []
    for seq, age_ms in enumerate((0, 8_000, 60_000), start=1):
        ts = now_ms() - age_ms
        publish(app, board(seq, ts))
        _, body = get_board(client)
        assert body["dataAgeMs"] >= age_ms
        assert body["items"][0]["dataAgeMs"] >= age_ms
        seen.append((body["latencyLevel"], body["isStale"], body["items"][0]["latencyLevel"]))

    assert seen == [("ok", False, "ok"), ("warn", True, "warn"), ("danger", True, "danger")]


def test_staleness_per_item_and_the_board_takes_the_worst(
    app: Flask, client: FlaskClient, set_now: Callable[[int], None]
) -> None:
    items = [row(T0_MS), row(T0_MS - 5_000), row(T0_MS - 20_000)]
    publish(app, board(1, T0_MS, items))
    set_now(T0_MS + 100)

    _, body = get_board(client)

    levels = [(i["dataAgeMs"], i["isStale"], i["latencyLevel"]) for i in body["items"]]
    assert levels == [(100, False, "ok"), (5_100, True, "warn"), (20_100, True, "danger")]
    assert body["dataAgeMs"] == 20_100
    assert body["isStale"] is True
    assert body["latencyLevel"] == "danger"


def test_a_stale_item_makes_a_fresh_board_stale(
    app: Flask, client: FlaskClient, set_now: Callable[[int], None]
) -> None:
    publish(app, board(1, T0_MS, [row(T0_MS - 4_000)]))
    set_now(T0_MS)

    _, body = get_board(client)

    assert body["dataAgeMs"] == 4_000
    assert (body["isStale"], body["latencyLevel"]) == (True, "warn")


def test_thresholds_come_from_the_configuration(set_now: Callable[[int], None]) -> None:
    app = create_app(
        {**BASE_CONFIG, "STALE_THRESHOLD_MS": "1000", "SEVERE_STALE_THRESHOLD_MS": "2000"}
    )
    publish(app, board(1, T0_MS))
    client = app.test_client()
    levels = []
    for age in (1000, 1001, 2000, 2001):
        set_now(T0_MS + age)
        _, body = get_board(client)
        assert body["staleThresholdMs"] == 1000
        assert body["severeStaleThresholdMs"] == 2000
        levels.append(body["latencyLevel"])

    assert levels == ["ok", "warn", "warn", "danger"]


# -- which board is kept ----------------------------------------------------------------------


def test_a_newer_board_replaces_the_previous_one(
    app: Flask, client: FlaskClient, set_now: Callable[[int], None]
) -> None:
    publish(app, board(1, T0_MS, [row(T0_MS, p_up_pct=10.0, p_down_pct=90.0)]))
    publish(app, board(2, T0_MS + 500, [row(T0_MS + 500, p_up_pct=70.0, p_down_pct=30.0)]))
    set_now(T0_MS + 500)

    _, body = get_board(client)

    assert body["items"][0]["p_up_pct"] == 70.0
    assert body["updatedAt"] == "2026-01-01 00:00:00.623"


@pytest.mark.parametrize("late_seq", [9, 10])
def test_an_older_board_published_late_is_ignored(
    app: Flask, client: FlaskClient, set_now: Callable[[int], None], late_seq: int
) -> None:
    publish(app, board(10, T0_MS, [row(T0_MS, p_up_pct=61.0, p_down_pct=39.0)]))
    # Lower (or equal) seq, even with a later data time: not newer.
    publish(app, board(late_seq, T0_MS + 900, [row(T0_MS + 900, p_up_pct=5.0, p_down_pct=95.0)]))
    set_now(T0_MS + 1000)

    _, body = get_board(client)

    assert body["items"][0]["p_up_pct"] == 61.0
    assert body["updatedAt"] == utc_updated_at(T0_MS)
    assert body["dataAgeMs"] == 1000


def _replace(document: dict[str, Any], old: str, new: str) -> str:
    text = json.dumps(document)
    assert old in text
    return text.replace(old, new, 1)


NEXT_TS = T0_MS + 1000
INVALID_BOARDS: dict[str, str] = {
    "not json": "{this is not json",
    "truncated json": json.dumps(board(2, NEXT_TS))[:-3],
    "empty string": "",
    "json null": "null",
    "json array": json.dumps([board(2, NEXT_TS)]),
    "NaN probability": _replace(board(2, NEXT_TS), '"p_up_pct": 61.25', '"p_up_pct": NaN'),
    "Infinity slot": _replace(board(2, NEXT_TS), '"slot": ', '"slot": Infinity, "x": '),
    "overflowing number": _replace(board(2, NEXT_TS), '"rem_secs": 120.5', '"rem_secs": 1e400'),
    "probabilities add to 101": json.dumps(
        board(2, NEXT_TS, [row(NEXT_TS, p_up_pct=61.0, p_down_pct=40.0)])
    ),
    "missing symbol": json.dumps(
        board(2, NEXT_TS, [{k: v for k, v in row(NEXT_TS).items() if k != "symbol"}])
    ),
    "unknown symbol": json.dumps(board(2, NEXT_TS, [row(NEXT_TS, symbol="DOGE")])),
    "string probability": json.dumps(board(2, NEXT_TS, [row(NEXT_TS, p_up_pct="61.25")])),
    "string price": json.dumps(board(2, NEXT_TS, [row(NEXT_TS, up_bid="0.6")])),
    "bool price": json.dumps(board(2, NEXT_TS, [row(NEXT_TS, up_ask=True)])),
    "string seq": _replace(board(2, NEXT_TS), '"seq": 2', '"seq": "2"'),
    "string ts": _replace(board(2, NEXT_TS), f'"ts": {NEXT_TS}, "source"', '"ts": "x", "source"'),
    "float ts": _replace(board(2, NEXT_TS), f'"ts": {NEXT_TS}, "source"', '"ts": 1.5, "source"'),
    "price above 1": json.dumps(board(2, NEXT_TS, [row(NEXT_TS, down_ask=1.5)])),
    "negative probability": json.dumps(
        board(2, NEXT_TS, [row(NEXT_TS, p_up_pct=-10.0, p_down_pct=110.0)])
    ),
    "token id not digits": json.dumps(board(2, NEXT_TS, [row(NEXT_TS, up_token_id="0xabc")])),
    "rem_secs above 300": json.dumps(board(2, NEXT_TS, [row(NEXT_TS, rem_secs=301)])),
    "item without ts": json.dumps(
        board(2, NEXT_TS, [{k: v for k, v in row(NEXT_TS).items() if k != "ts"}])
    ),
    "serve-time field in a row": json.dumps(board(2, NEXT_TS, [row(NEXT_TS, isStale=False)])),
    "missing items": json.dumps({"seq": 2, "ts": NEXT_TS, "source": "test"}),
    "unknown top-level field": json.dumps({**board(2, NEXT_TS), "plan": "vip_pro"}),
    "negative seq": json.dumps(board(-1, NEXT_TS)),
    # Nested 100k deep: json.loads raises RecursionError, not ValueError.
    "deeply nested json": "[" * 100_000 + "]" * 100_000,
    # Beyond time_t: formatting updatedAt raises OverflowError, not ValueError.
    "ts beyond time_t": json.dumps(board(2, 10**30)),
    # Year 10000: updatedAt would be "10000-01-01 ..." and break the BoardResponse contract.
    "ts after year 9999": json.dumps(board(2, 253_402_300_800_000)),
}


@pytest.mark.parametrize("raw", INVALID_BOARDS.values(), ids=INVALID_BOARDS.keys())
def test_an_invalid_board_is_dropped_and_the_previous_one_kept(
    app: Flask, client: FlaskClient, set_now: Callable[[int], None], raw: str
) -> None:
    publish(app, board(1, T0_MS, [row(T0_MS, p_up_pct=55.5, p_down_pct=44.5)]))
    set_now(T0_MS + 2000)

    publish(app, raw)
    _, body = get_board(client)

    snapshot = bus_of(app).latest()
    assert snapshot is not None and snapshot.seq == 1
    assert body["updatedAt"] == utc_updated_at(T0_MS)
    assert body["dataAgeMs"] == 2000
    assert [i["p_up_pct"] for i in body["items"]] == [55.5]


def test_an_invalid_first_board_leaves_no_board(app: Flask, client: FlaskClient) -> None:
    publish(app, json.dumps(board(1, T0_MS, [row(T0_MS, p_down_pct=1.0)])))

    _, body = get_board(client)

    assert bus_of(app).latest() is None
    assert body["items"] == []
    assert body["updatedAt"] is None


def test_every_invalid_board_would_also_fail_the_parser() -> None:
    """The inputs above are invalid for the parser itself, not only for this bus."""
    for name, raw in INVALID_BOARDS.items():
        if name in ("deeply nested json", "ts beyond time_t", "ts after year 9999"):
            continue  # these are the ones the parser lets through or crashes on
        with pytest.raises(ValueError):
            parse_snapshot(raw)


# -- health and plans --------------------------------------------------------------------------


def test_health_on_the_memory_bus(client: FlaskClient) -> None:
    response = client.get("/api/health")

    assert response.status_code == 200
    assert response.mimetype == "application/json"
    assert response.headers["Cache-Control"] == "no-store"
    body = validated("health", response.data)
    assert body["ok"] is True
    assert body["redisReady"] is True
    assert "embedded" in body["redisStatus"]
    assert body["refreshMs"] == {"guest": 5000, "user": 2000, "vip_pro": 500}
    assert body["symbols"] == ["btc"]
    assert body["source"] == "simulated"  # BOARD_SOURCE's default
    assert body["sourceLabel"] == "simulated"


def test_health_names_the_live_source(tmp_path: Path) -> None:
    """The extension field follows BOARD_SOURCE: a page and a client can tell a simulated
    board from the markets' own before reading a row."""
    app = create_app(
        {
            **BASE_CONFIG,
            "BOARD_SOURCE": "polymarket",
            "DATABASE_URL": f"sqlite:///{tmp_path / 'app.sqlite3'}",
        }
    )
    body = validated("health", app.test_client().get("/api/health").data)
    assert body["source"] == "polymarket"
    assert body["sourceLabel"] == "live"  # Polymarket's and Binance's own addresses


@pytest.mark.parametrize(
    ("host", "label"),
    [
        ("127.0.0.1", "live · fake upstream on this machine"),
        ("localhost", "live · fake upstream on this machine"),
        ("[::1]", "live · fake upstream on this machine"),
        ("10.0.0.7", "live"),  # another machine, if a private one
    ],
)
def test_health_says_when_the_live_upstreams_are_this_machines(
    tmp_path: Path, host: str, label: str
) -> None:
    """Issue 50: "live" only when the upstreams are not all on this machine; against the
    bundled fakes on loopback the label says so (the page's badge reads it)."""
    upstreams = {
        "POLYMARKET_GAMMA_URL": f"http://{host}:4001",
        "POLYMARKET_CLOB_URL": f"http://{host}:4002",
        "POLYMARKET_CLOB_WS_URL": f"ws://{host}:4003/ws/market",
        "POLYMARKET_RTDS_URL": f"ws://{host}:4004",
        "POLYMARKET_SITE_URL": f"http://{host}:4005",
        "BINANCE_REST_URL": f"http://{host}:4006",
    }
    config = {**BASE_CONFIG, "BOARD_SOURCE": "polymarket", **upstreams}
    app = create_app(config | {"DATABASE_URL": f"sqlite:///{tmp_path / 'app.sqlite3'}"})
    body = validated("health", app.test_client().get("/api/health").data)
    assert body["sourceLabel"] == label
    # One upstream elsewhere is enough to be live.
    mixed = config | {"BINANCE_REST_URL": "https://data-api.binance.vision"}
    app = create_app(mixed | {"DATABASE_URL": f"sqlite:///{tmp_path / 'mixed.sqlite3'}"})
    assert validated("health", app.test_client().get("/api/health").data)["sourceLabel"] == "live"


def test_refresh_intervals_per_plan_follow_the_configuration() -> None:
    app = create_app(
        {
            **BASE_CONFIG,
            "REFRESH_MS_GUEST": "9000",
            "REFRESH_MS_USER": "3000",
            "REFRESH_MS_VIP_PRO": "750",
        }
    )
    client = app.test_client()

    health = validated("health", client.get("/api/health").data)
    _, latest = get_board(client)

    assert health["refreshMs"] == {"guest": 9000, "user": 3000, "vip_pro": 750}
    assert latest["refreshMs"] == 9000
    assert latest["plan"] == "guest"


@pytest.mark.parametrize(
    ("plan", "label", "refresh_ms"),
    [
        ("guest", "Guest", 5000),
        ("user", "User", 2000),
        ("vip_pro", "VIP Pro", 500),
        ("admin", "Admin", 500),
    ],
)
def test_board_rendered_for_each_plan(app: Flask, plan: str, label: str, refresh_ms: int) -> None:
    publish(app, board(1, T0_MS))
    renderer = services_of(app).renderer

    body = validated("board", renderer.render(bus_of(app).latest(), plan, T0_MS + 10))

    assert (body["plan"], body["planLabel"], body["refreshMs"]) == (plan, label, refresh_ms)
    assert body["dataAgeMs"] == 10
    assert body["items"][0]["up_token_id"] == row(T0_MS)["up_token_id"]


# -- X-Request-ID ------------------------------------------------------------------------------


KIND_OF_PATH = {LATEST: "board", "/api/health": "health", "/no/such/path": "error"}


@pytest.mark.parametrize("request_id", ["abc", "req-42_x.y:z", "A" * 128, "0" * 32])
@pytest.mark.parametrize("path", [LATEST, "/api/health", "/no/such/path"])
def test_a_sane_request_id_is_echoed(client: FlaskClient, request_id: str, path: str) -> None:
    response = client.get(path, headers={"X-Request-ID": request_id})

    validated(KIND_OF_PATH[path], response.data)
    assert response.headers["X-Request-ID"] == request_id


def test_a_request_id_is_generated_when_missing(client: FlaskClient) -> None:
    first, _ = get_board(client)
    second, _ = get_board(client)

    ids = [first.headers["X-Request-ID"], second.headers["X-Request-ID"]]
    assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids)
    assert ids[0] != ids[1]


@pytest.mark.parametrize(
    "request_id",
    [
        "a\nb",
        "abc\n",
        "abc\r\nX-Injected: 1",
        "x" * 500,
        "A" * 129,
        "",
        "has space",
        "<script>alert(1)</script>",
        "caf\u00e9",
        "id;rm -rf",
    ],
    ids=repr,
)
def test_a_malicious_request_id_is_replaced(client: FlaskClient, request_id: str) -> None:
    # environ_overrides: the test client's header object refuses newlines itself.
    response = client.get(LATEST, environ_overrides={"HTTP_X_REQUEST_ID": request_id})

    assert response.status_code == 200
    validated("board", response.data)
    returned = response.headers.get("X-Request-ID", "")
    assert re.fullmatch(r"[0-9a-f]{32}", returned)
    assert returned != request_id
