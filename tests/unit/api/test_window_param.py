"""``?window=`` on ``/api/probboard/latest`` (issue 39, memory bus): with ``WINDOWS=5m,15m``
the board without the parameter is the 5-minute board byte for byte; ``?window=15m`` is the
15-minute board (the same records, ``slot`` a multiple of 900, ``rem_secs`` up to 900); an
unknown or unserved window is a 400 ``invalid_window`` that costs no rate-limit slot."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from flask import Flask

import app.api.latest as latest_view
from app.markets import parse_symbols, parse_windows
from app.refresher.loop import Refresher
from app.refresher.sources.simulated import SimulatedSource
from app.services import services_of
from app.web import create_app
from tests.conftest import BASE_CONFIG
from tests.support.contract import validated

LATEST = "/api/probboard/latest"
NOW_S = 1_795_516_799.25  # 300.75 s left in its 15-minute window, 0.75 s in its 5-minute one


def _app(tmp_path: Path, windows: str, monkeypatch: pytest.MonkeyPatch, **config: str) -> Flask:
    """An app serving BTC and ETH over ``windows``, its board published once at ``NOW_S`` by a
    simulated refresher of the same windows, served 100 ms later."""
    database = f"sqlite:///{tmp_path / f'{windows}.sqlite3'}"
    settings = {"SYMBOLS": "BTC,ETH", "WINDOWS": windows, "DATABASE_URL": database} | config
    app = create_app({**BASE_CONFIG, **settings})
    source = SimulatedSource(parse_symbols("BTC,ETH"), seed=5, spans=parse_windows(windows))
    assert Refresher(source, services_of(app).bus, 500, clock=lambda: NOW_S).tick()
    monkeypatch.setattr(latest_view, "now_ms", lambda: int(NOW_S * 1000) + 100)
    return app


def _get(app: Flask, query: str = "") -> tuple[int, bytes]:
    response = app.test_client().get(f"{LATEST}{query}")
    return response.status_code, response.data


def test_the_default_board_is_the_five_minute_board_byte_for_byte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    five = _app(tmp_path, "5m", monkeypatch)
    both = _app(tmp_path, "5m,15m", monkeypatch)
    status, body = _get(both)
    assert status == 200
    assert body == _get(five)[1]
    items = validated("board", body)["items"]
    assert [(item["symbol"], item["slot"] % 300) for item in items] == [("BTC", 0), ("ETH", 0)]
    assert all("window" not in item for item in items)
    assert _get(both, "?window=5m")[1] == body  # asked for by name: the same board


def test_the_fifteen_minute_board_has_its_own_windows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    both = _app(tmp_path, "5m,15m", monkeypatch)
    status, body = _get(both, "?window=15M")
    assert status == 200
    items = validated("board", body)["items"]
    assert [item["symbol"] for item in items] == ["BTC", "ETH"]
    five = {item["symbol"]: item for item in json.loads(_get(both)[1])["items"]}
    for item in items:
        assert item["window"] == "15m"
        assert item["slot"] % 900 == 0 and item["windowEnd"] == item["slot"] + 900
        assert item["rem_secs"] == pytest.approx(item["slot"] + 900 - NOW_S, abs=0.001)
        assert item["rem_secs"] > 300  # a countdown no 5-minute window has
        assert item["up_token_id"] != five[item["symbol"]]["up_token_id"]
        assert item["price"] == five[item["symbol"]]["price"]  # one coin, one price


@pytest.mark.parametrize("query", ["?window=1h", "?window=", "?window=5m&window=15m",
                                   "?window=15m%20", "?window=%C5%BF5m"])  # fmt: skip
def test_an_unknown_window_is_a_400_that_costs_no_slot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, query: str
) -> None:
    both = _app(tmp_path, "5m,15m", monkeypatch, GUEST_RATE_LIMIT="1 per minute")
    status, body = _get(both, query)
    assert status == 400
    error: dict[str, Any] = validated("error", body)
    assert error["code"] == "invalid_window"
    twice = query.count("window=") > 1
    assert ("given once" if twice else "5m, 15m") in error["error"]
    assert _get(both)[0] == 200  # the guest's one request a minute is still there


def test_a_window_not_served_is_refused_and_health_lists_the_served(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    five = _app(tmp_path, "5m", monkeypatch)
    status, body = _get(five, "?window=15m")
    assert status == 400 and validated("error", body)["code"] == "invalid_window"
    health = five.test_client().get("/api/health")
    assert validated("health", health.data)["windows"] == ["5m"]
    both = _app(tmp_path, "15m,5m", monkeypatch)
    assert json.loads(both.test_client().get("/api/health").data)["windows"] == ["15m", "5m"]
    # 5m is served, so it stays the default whatever the order of WINDOWS.
    assert all("window" not in item for item in json.loads(_get(both)[1])["items"])
