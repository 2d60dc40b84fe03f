"""Forged ``/windows`` cursors: each one a 400 ``invalid_cursor``, counted by the guest limit.

Before issue 46 the cursor's checksum was keyed with a constant that anyone could read in the
source, so an attacker could sign anything: 1,100 ``[`` (RecursionError), a ``before`` of
2^63 (OverflowError), bytes that are not UTF-8. ``forged`` signs as that constant did; the
service's own key signs the rest (``WindowCursors.sign``), as if the key had leaked: a payload
the service would never mint is still a 400. On a migrated database of the test's own
(SQLite, then PostgreSQL).
"""

from __future__ import annotations

import base64
import hashlib
import logging
from collections.abc import Iterator

import pytest
from flask import Flask
from sqlalchemy.engine import Engine
from werkzeug.test import TestResponse

from app.web import create_app
from harness.processes import RedisServer
from tests.conftest import BASE_CONFIG, COUNTED_ON_REDIS
from tests.support.contract import validated
from tests.unit.calibration.test_windows import WINDOWS, Caller, fill

CONSTANT_KEY = b"probboard/windows-cursor"  # the key every cursor was signed with before
HUGE = 2**63


def b64(raw: bytes) -> str:
    """URL-safe base64 without padding, as cursors are written."""
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def forged(payload: bytes) -> str:
    """``payload`` signed as the constant-keyed checksum signed a cursor: what anyone could
    compute from the source."""
    digest = hashlib.blake2b(payload, key=CONSTANT_KEY, digest_size=9).digest()
    return f"{b64(payload)}.{b64(digest)}"


# Payloads no cursor of this service ever carried, each once a 500 (or a page it never served).
PAYLOADS = {
    "deep": b"[" * 1100,  # RecursionError in json.loads
    "huge before": f'[1,"BTC",null,null,{HUGE}]'.encode(),  # OverflowError binding it
    "huge from": f'[1,"BTC",{HUGE},null,5]'.encode(),
    "negative before": b'[1,"BTC",null,null,-5]',
    "not utf-8": b'[1,"\xff",null,null,5]',
    "bool version": b'[true,"BTC",null,null,5]',  # True == 1
    "float before": b'[1,"BTC",null,null,5.0]',
    "infinite before": b'[1,"BTC",null,null,1e400]',
    "other version": b'[2,"BTC",null,null,5]',
    "object": b'{"before":5}',
    "nan": b"NaN",
    "unknown window": b'[1,"BTC",null,null,5,"1h"]',
    "unserved symbol": b'[1,"DOGE",null,null,5]',
    "padded": b'[1,"BTC",null,null,5]' + b" " * 600,  # valid JSON, over the length cap
}


@pytest.fixture
def filled(database_url: str) -> Iterator[str]:
    """``database_url``, migrated and filled with BTC's and ETH's windows."""
    from sqlalchemy import create_engine

    engine: Engine = create_engine(database_url)
    fill(engine)
    engine.dispose()
    yield database_url


def make_app(database_url: str, **config: str) -> Flask:
    """BTC and ETH served from the filled store (guests held to 1,000 a minute)."""
    return create_app({**BASE_CONFIG, "DATABASE_URL": database_url, "SYMBOLS": "BTC,ETH",
                       "GUEST_RATE_LIMIT": "1000 per minute", **config})  # fmt: skip


@pytest.fixture
def app(filled: str) -> Iterator[Flask]:
    """The windows app on the filled store."""
    found = make_app(filled)
    yield found
    dispose(found)


def dispose(app: Flask) -> None:
    """Close the app's database connections."""
    with app.app_context():
        from app.extensions import db

        db.engine.dispose()


def code_of(response: TestResponse) -> str:
    """The ErrorResponse code of a 400 (failing on any other status)."""
    assert response.status_code == 400, (response.status_code, response.data[:300])
    found: str = validated("error", response.data)["code"]
    return found


@pytest.mark.parametrize("name", list(PAYLOADS))
def test_a_cursor_signed_with_the_old_constant_key_is_a_400(app: Flask, name: str) -> None:
    response = Caller(app).get({"cursor": forged(PAYLOADS[name])})
    assert code_of(response) == "invalid_cursor"


@pytest.mark.parametrize("name", list(PAYLOADS))
def test_a_payload_never_minted_is_a_400_even_signed_with_the_key(app: Flask, name: str) -> None:
    from app.services import services_of

    signed = services_of(app).cursors.sign(PAYLOADS[name])
    assert code_of(Caller(app).get({"cursor": signed})) == "invalid_cursor"


def test_over_length_bad_base64_and_edited_cursors_are_400s(app: Flask) -> None:
    caller = Caller(app)
    good = caller.page({"limit": "2"})["next"]
    assert good is not None and len(good) < 128
    body, check = good.split(".")
    for bad in (
        good + "A" * 300,  # over the cap: refused before any decoding
        "A" * 10_000,
        "!!!!." + check,  # not base64
        body + ".!!!!",
        body + "=." + check,  # padding is never written
        body[:-1] + ("B" if body[-1] != "B" else "C") + "." + check,  # one character edited
        body + "." + check[::-1],
        " " + good,
        good + "\n",
    ):
        assert code_of(caller.get({"cursor": bad, "limit": "2"})) == "invalid_cursor", bad
    assert len(caller.page({"cursor": good, "limit": "2"})["windows"]) == 2  # still good


def test_a_cursor_signed_under_another_secret_key_is_a_400(filled: str) -> None:
    minting, other = make_app(filled), make_app(filled, SECRET_KEY="another-secret-0123456789")
    try:
        good = Caller(minting).page({"limit": "2"})["next"]
        assert good is not None
        assert code_of(Caller(other).get({"cursor": good})) == "invalid_cursor"
        same_key = make_app(filled)  # another process with the same SECRET_KEY takes it
        assert Caller(same_key).page({"cursor": good})["windows"]
        dispose(same_key)
    finally:
        dispose(minting)
        dispose(other)


def test_25_forged_cursors_from_one_address_are_400s_then_429s_and_log_nothing(
    filled: str, fresh_redis: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    """The attack of the issue: from one address limited to 10 a minute, 25 forged cursors
    (once 25 500s and 48 KB of tracebacks). The cursor is read after the guest limit."""
    app = make_app(
        filled, REDIS_URL=fresh_redis.url, GUEST_RATE_LIMIT="10 per minute", **COUNTED_ON_REDIS
    )
    client = app.test_client()
    cursors = [forged(payload) for payload in PAYLOADS.values()]
    caplog.set_level(logging.INFO)
    try:
        answers = []
        for i in range(25):
            response = client.get(WINDOWS, query_string={"cursor": cursors[i % len(cursors)]})
            answers.append((response.status_code, validated("error", response.data)["code"]))
    finally:
        dispose(app)
    assert answers[:10] == [(400, "invalid_cursor")] * 10
    assert answers[10:] == [(429, "rate_limited")] * 15
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert "Traceback" not in caplog.text
