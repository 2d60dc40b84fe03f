"""``?symbol=`` on ``/api/probboard/latest`` (memory bus): only the rows asked for, in board
order, with board-level fields of those rows; anything but served symbols is a 400
``invalid_symbol`` that costs no rate-limit slot; without it, the full board as before."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from app.web import create_app
from tests.conftest import BASE_CONFIG
from tests.support.contract import validated
from tests.unit.api.test_latest_memory import LATEST, T0_MS, board, publish, row

CALIBRATION = "/api/probboard/calibration"


def make_app(tmp_path: Path, **config: str) -> Flask:
    """An app serving BTC, ETH and SOL (XRP is a known market it does not serve)."""
    database = f"sqlite:///{tmp_path / 'app.sqlite3'}"
    settings = {"SYMBOLS": "BTC,ETH,SOL", "DATABASE_URL": database} | config
    return create_app({**BASE_CONFIG, **settings})


@pytest.fixture
def three(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FlaskClient:
    """A client of an app whose board holds BTC (fresh), ETH (4 s old) and SOL (fresh), at a
    fixed serve time."""
    import app.api.latest as latest_view

    app = make_app(tmp_path)
    items = [
        row(T0_MS, symbol="BTC"),
        row(T0_MS - 4_000, symbol="ETH", p_up_pct=40.0, p_down_pct=60.0),
        row(T0_MS, symbol="SOL", up_bid=0.1),
    ]
    publish(app, board(7, T0_MS, items))
    monkeypatch.setattr(latest_view, "now_ms", lambda: T0_MS + 100)
    return app.test_client()


def body_of(client: FlaskClient, query: str) -> dict[str, Any]:
    """The validated BoardResponse of ``/latest?query``."""
    response = client.get(f"{LATEST}?{query}")
    assert response.status_code == 200, response.data
    return validated("board", response.data)


def test_one_symbol_answers_its_row_exactly_as_the_full_board_has_it(three: FlaskClient) -> None:
    full = body_of(three, "")
    only = body_of(three, "symbol=eth")
    assert [item["symbol"] for item in only["items"]] == ["ETH"]
    assert only["items"][0] == full["items"][1]  # the same pre-serialised row
    for name in ("ok", "plan", "planLabel", "refreshMs", "updatedAt", "servedAt"):
        assert only[name] == full[name], name


@pytest.mark.parametrize(
    ("query", "symbols"),
    [
        ("symbol=SOL,btc", ["BTC", "SOL"]),  # board order, whatever the order asked
        ("symbol=sOl,eTh,BTC", ["BTC", "ETH", "SOL"]),
        ("symbol=eth,ETH", ["ETH"]),  # a name twice counts once
        ("symbol=btc&other=1", ["BTC"]),  # other parameters are ignored, as before
    ],
)
def test_several_symbols_come_in_board_order(
    three: FlaskClient, query: str, symbols: list[str]
) -> None:
    assert [item["symbol"] for item in body_of(three, query)["items"]] == symbols


def test_every_symbol_asked_is_the_full_board_byte_for_byte(three: FlaskClient) -> None:
    full = three.get(LATEST)
    every = three.get(f"{LATEST}?symbol=btc,eth,sol")
    assert every.data == full.data
    assert three.get(f"{LATEST}?unrelated=1").data == full.data


def test_board_level_staleness_is_that_of_the_rows_served(three: FlaskClient) -> None:
    full = body_of(three, "")
    assert (full["dataAgeMs"], full["isStale"], full["latencyLevel"]) == (4_100, True, "warn")
    fresh = body_of(three, "symbol=btc,sol")
    assert (fresh["dataAgeMs"], fresh["isStale"], fresh["latencyLevel"]) == (100, False, "ok")
    eth = body_of(three, "symbol=ETH")
    assert (eth["dataAgeMs"], eth["isStale"], eth["latencyLevel"]) == (4_100, True, "warn")
    # The board's own fields that are not about rows stay the board's.
    assert fresh["newestInputMs"] == full["newestInputMs"]


def test_a_served_symbol_missing_from_the_board_gives_no_row(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    publish(app, board(3, T0_MS, [row(T0_MS, symbol="BTC")]))  # a board without ETH yet
    body = body_of(app.test_client(), "symbol=eth")
    assert body["items"] == []


def test_before_any_board_a_filtered_answer_is_the_empty_board(tmp_path: Path) -> None:
    body = body_of(make_app(tmp_path).test_client(), "symbol=eth")
    assert (body["items"], body["updatedAt"], body["latencyLevel"]) == ([], None, "danger")


INVALID = [
    "symbol=",  # empty
    "symbol",  # no value
    "symbol=DOGE",  # unknown
    "symbol=XRP",  # a known market this service does not serve
    "symbol=eth,",  # an empty name
    "symbol=,eth",
    "symbol=eth,,btc",
    "symbol=%20eth",  # spaces are not trimmed
    "symbol=eth%20",
    "symbol=eth;btc",
    "symbol=eth&symbol=btc",  # the parameter twice: send eth,btc
    "symbol=btc&symbol=btc",
    "symbol=%C5%BFol",  # U+017F (long s) "ol": upper() would make it SOL
    "symbol=BTC%00",
    "symbol=" + "B" * 5000,
]


@pytest.mark.parametrize("query", INVALID)
def test_anything_but_served_symbols_is_400_invalid_symbol(three: FlaskClient, query: str) -> None:
    response = three.get(f"{LATEST}?{query}")
    assert response.status_code == 400, (query, response.data)
    body = validated("error", response.data)
    assert body["code"] == "invalid_symbol"
    assert body["error"].endswith("of the served: BTC, ETH, SOL."), body
    assert response.headers["Cache-Control"] == "no-store"
    assert "X-Request-ID" in response.headers


def test_a_bad_symbol_costs_a_guest_no_rate_limit_slot(tmp_path: Path) -> None:
    app = make_app(tmp_path, GUEST_RATE_LIMIT="2 per minute")
    publish(app, board(1, T0_MS, [row(T0_MS)]))
    client = app.test_client()
    for _ in range(5):
        assert client.get(f"{LATEST}?symbol=doge").status_code == 400
    first = client.get(f"{LATEST}?symbol=btc")
    assert first.status_code == 200
    assert first.headers["X-RateLimit-Remaining"] == "1"
    assert client.get(LATEST).status_code == 200
    refused = client.get(f"{LATEST}?symbol=btc")
    assert refused.status_code == 429
    # Over the limit, a bad symbol is still told so (the parameter is read first).
    assert client.get(f"{LATEST}?symbol=doge").status_code == 400


def test_credentials_are_judged_before_the_symbol(three: FlaskClient) -> None:
    response = three.get(f"{LATEST}?symbol=doge", headers={"X-API-Key": "pbk_" + "Q" * 43})
    assert response.status_code in (401, 503)  # the key is refused (or cannot be checked)
    assert json.loads(response.data)["code"] != "invalid_symbol"


@pytest.mark.parametrize(
    "query", ["symbol=btc,eth", "symbol=btc&symbol=btc", "symbol=btc,btc", "symbol=XRP"]
)
def test_the_track_record_takes_exactly_one_served_symbol(tmp_path: Path, query: str) -> None:
    client = make_app(tmp_path).test_client()
    response = client.get(f"{CALIBRATION}?{query}")
    assert response.status_code == 400, response.data
    assert validated("error", response.data)["code"] == "invalid_symbol"
