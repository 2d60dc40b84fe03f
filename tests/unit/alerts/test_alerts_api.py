"""``/api/alerts`` (issue 51, point 1): a key holder's alerts, on a migrated accounts database
(SQLite, then PostgreSQL), through the real app; every answer validated by its schema.

Targets are address literals (no resolver is asked): a public one, and loopback ones the
allow-list admits or not.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import create_engine, text

from app.schemas import check
from app.schemas.alerts import (
    AlertCreatedSchema,
    AlertListSchema,
    AlertOneSchema,
    DeliveriesSchema,
)
from app.web import create_app
from tests.conftest import BASE_CONFIG
from tests.support.contract import validated
from tests.unit.test_cors import key_of

ALERTS = "/api/alerts"
PUBLIC = "https://93.184.216.34/hooks/probboard"  # an address literal on the internet
GOOD = {"url": PUBLIC, "symbol": "btc", "condition": "p_up_above", "level": 60}


@pytest.fixture
def app(database_url: str) -> Iterator[Flask]:
    config = {**BASE_CONFIG, "DATABASE_URL": database_url, "SYMBOLS": "BTC,ETH",
              "WINDOWS": "5m,15m", "ALERTS_LIMIT_USER": "2",
              "ALERTS_ALLOWED_HOSTS": "127.0.0.2"}  # fmt: skip
    found = create_app(config)
    yield found
    with found.app_context():
        from app.extensions import db

        db.session.remove()
        db.engine.dispose()


def post(client: FlaskClient, key: str, body: Any, raw: bytes | None = None) -> Any:
    data = raw if raw is not None else json.dumps(body).encode()
    return client.post(ALERTS, data=data, headers={"X-API-Key": key},
                       content_type="application/json")  # fmt: skip


def code_of(answer: Any) -> str:
    return str(validated("error", answer.data)["code"])


def test_create_read_pause_and_delete(app: Flask, database_url: str) -> None:
    client, vic = app.test_client(), key_of(app, "vic", "vip_pro")
    made = post(client, vic, GOOD)
    assert made.status_code == 201, made.data
    body = made.get_json()
    check(AlertCreatedSchema(), body, "created")
    alert, secret = body["alert"], body["secret"]
    assert made.headers["Location"] == f"{ALERTS}/{alert['id']}"
    assert made.headers["Cache-Control"] == "no-store"
    assert {k: alert[k] for k in ("url", "symbol", "window", "condition", "level", "side",
                                  "format", "status", "pausedReason")} == {
        "url": PUBLIC, "symbol": "BTC", "window": "5m", "condition": "p_up_above",
        "level": 60.0, "side": None, "format": "json", "status": "active",
        "pausedReason": None,
    }  # fmt: skip
    # Shown once: never again in an answer, and not in the database in the clear.
    listed = client.get(ALERTS, headers={"Authorization": f"Bearer {vic}"})
    check(AlertListSchema(), listed.get_json(), "list")
    assert [a["id"] for a in listed.get_json()["alerts"]] == [alert["id"]]
    assert secret not in listed.get_data(as_text=True)
    engine = create_engine(database_url)
    with engine.connect() as conn:
        stored = conn.execute(text("SELECT secret_encrypted FROM alerts")).scalar_one()
    engine.dispose()
    assert secret not in stored and secret.removeprefix("whsec_") not in stored

    one = client.get(f"{ALERTS}/{alert['id']}", headers={"X-API-Key": vic})
    check(AlertOneSchema(), one.get_json(), "one")
    paused = client.patch(f"{ALERTS}/{alert['id']}", json={"status": "paused"},
                          headers={"X-API-Key": vic})  # fmt: skip
    assert paused.status_code == 200, paused.data
    assert paused.get_json()["alert"]["status"] == "paused"
    assert paused.get_json()["alert"]["pausedReason"] == "paused by its owner"
    deliveries = client.get(f"{ALERTS}/{alert['id']}/deliveries", headers={"X-API-Key": vic})
    check(DeliveriesSchema(), deliveries.get_json(), "deliveries")
    assert deliveries.get_json()["deliveries"] == []
    gone = client.delete(f"{ALERTS}/{alert['id']}", headers={"X-API-Key": vic})
    assert gone.status_code == 204 and gone.data == b""
    missing = client.get(f"{ALERTS}/{alert['id']}", headers={"X-API-Key": vic})
    assert missing.status_code == 404 and code_of(missing) == "alert_not_found"


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"url": "ftp://93.184.216.34/x"}, "invalid_url"),
        ({"url": "https://10.1.2.3/hook"}, "invalid_url"),  # private
        ({"url": "https://169.254.169.254/latest"}, "invalid_url"),  # metadata
        ({"url": "https://[::1]/hook"}, "invalid_url"),  # loopback
        ({"url": "https://[::ffff:127.0.0.1]/hook"}, "invalid_url"),  # mapped loopback
        ({"url": "http://93.184.216.34/hook"}, "invalid_url"),  # not https
        ({"url": "https://user:pw@93.184.216.34/"}, "invalid_url"),
        ({"url": 7}, "invalid_url"),
        ({"symbol": "DOGE"}, "invalid_symbol"),
        ({"window": "1h"}, "invalid_window"),  # not served here
        ({"condition": "p_up_near"}, "invalid_condition"),
        ({"level": 120}, "invalid_level"),
        ({"level": "60"}, "invalid_level"),
        ({"level": None}, "invalid_level"),
        ({"side": "up"}, "invalid_side"),  # a P(up) line takes none
        ({"condition": "edge_above"}, "invalid_side"),  # an edge needs one
        ({"condition": "stale"}, "invalid_level"),  # a stale alert takes no level
        ({"format": "xml"}, "invalid_format"),
        ({"colour": "red"}, "invalid_body"),
    ],
)
def test_each_bad_field_is_a_400_naming_it(app: Flask, change: dict[str, Any], code: str) -> None:
    client, vic = app.test_client(), key_of(app, "vic", "vip_pro")
    answer = post(client, vic, {**GOOD, **change})
    assert answer.status_code == 400, answer.data
    assert code_of(answer) == code
    assert client.get(ALERTS, headers={"X-API-Key": vic}).get_json()["alerts"] == []


@pytest.mark.parametrize("raw", [b"", b"not json", b"[1, 2]", b'"x"', b"\xff\xfe"])
def test_a_body_that_is_no_json_object_is_a_400(app: Flask, raw: bytes) -> None:
    client, vic = app.test_client(), key_of(app, "vic", "vip_pro")
    answer = post(client, vic, None, raw)
    assert answer.status_code == 400 and code_of(answer) == "invalid_body"


def test_keys_only_ownership_and_the_plans_limit(app: Flask) -> None:
    client = app.test_client()
    vic, ursula = key_of(app, "vic", "vip_pro"), key_of(app, "ursula", "user")
    assert client.post(ALERTS, json=GOOD).status_code == 401  # no key: a guest
    assert client.get(ALERTS, headers={"X-API-Key": "pbk_nope"}).status_code == 401
    made = post(client, vic, GOOD).get_json()["alert"]
    # Another account's alert: 403, whatever the method.
    for method in ("get", "delete", "patch"):
        answer = getattr(client, method)(
            f"{ALERTS}/{made['id']}", headers={"X-API-Key": ursula}, json={"status": "paused"}
        )
        assert answer.status_code == 403 and code_of(answer) == "not_your_alert", method
    assert client.get(f"{ALERTS}/{made['id']}/deliveries",
                      headers={"X-API-Key": ursula}).status_code == 403  # fmt: skip
    # The user plan holds 2 here (ALERTS_LIMIT_USER).
    for _ in range(2):
        assert post(client, ursula, GOOD).status_code == 201
    over = post(client, ursula, GOOD)
    assert over.status_code == 409 and code_of(over) == "alert_limit"


def test_private_targets_only_through_the_allow_list(app: Flask) -> None:
    client, vic = app.test_client(), key_of(app, "vic", "vip_pro")
    allowed = post(client, vic, {**GOOD, "url": "http://127.0.0.2:8999/hook"})
    assert allowed.status_code == 201, allowed.data  # ALERTS_ALLOWED_HOSTS=127.0.0.2, http too
    refused = post(client, vic, {**GOOD, "url": "http://127.0.0.1:8999/hook"})
    assert refused.status_code == 400 and code_of(refused) == "invalid_url"
    assert "not a public address" in validated("error", refused.data)["error"]
