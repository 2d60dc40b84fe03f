"""Logging: JSON or text lines with the request id, and no secret ever written out."""

from __future__ import annotations

import json
import logging
import re
from typing import Any

import pytest
from flask import Flask, request
from flask.testing import FlaskClient

from app.logs import redact
from app.web import create_app
from tests.conftest import BASE_CONFIG
from tests.support.contract import validated
from tests.support.encoding import percent_decodings, percent_encoded
from tests.support.logs import captured_log

API_KEY = "pbk_Secr3tKeyValue0123456789abcdefXYZ"
API_KEY_TAIL = API_KEY.removeprefix("pbk_")
BEARER_KEY = "pbk_AnotherBearerKey9876543210zyxw"
SESSION = "eyJ1c2VyIjo0Mn0.Zk9x1A.s3ss10n-V4lue_HMAC"
JSON_KEYS = {"ts", "level", "logger", "request_id", "msg"}
TS_PATTERN = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")

view_log = logging.getLogger("tests.logging.view")


def json_lines(text: str) -> list[dict[str, Any]]:
    """Every line of ``text`` parsed as a JSON object with the documented keys."""
    entries = []
    for line in text.splitlines():
        entry = json.loads(line)
        assert isinstance(entry, dict)
        assert set(entry) >= JSON_KEYS, entry
        assert TS_PATTERN.match(entry["ts"])
        entries.append(entry)
    return entries


def json_app() -> Flask:
    return create_app({**BASE_CONFIG, "LOG_FORMAT": "json"})


def add_logging_route(app: Flask) -> None:
    @app.get("/_test/log")
    def log_something() -> tuple[str, int]:
        view_log.info("handled the thing")
        view_log.warning("count=%d", 3)
        return "", 204


def add_careless_routes(app: Flask) -> None:
    @app.get("/_test/careless")
    def careless() -> tuple[str, int]:
        view_log.info("headers: %s", dict(request.headers))
        view_log.info("raw headers: %s", request.headers)
        view_log.warning("json headers: " + json.dumps(dict(request.headers)))
        view_log.info("environ: %r", {k: v for k, v in request.environ.items() if k.isupper()})
        return "", 204

    @app.get("/_test/cookies")
    def cookies() -> tuple[str, int]:
        view_log.info("cookies: %s", request.cookies)
        view_log.info("cookie dict: %s", request.cookies.to_dict())
        return "", 204


SECRET_HEADERS = {"X-API-Key": API_KEY, "Authorization": f"Bearer {BEARER_KEY}"}


def assert_no_secret(text: str) -> None:
    for secret in (API_KEY, API_KEY_TAIL, BEARER_KEY, SESSION, SESSION[:16]):
        assert secret not in text


# -- JSON lines and the request id -------------------------------------------------------------


def test_json_lines_carry_the_request_id() -> None:
    app = json_app()
    add_logging_route(app)
    client = app.test_client()

    with captured_log() as buffer:
        view_log.info("outside any request")
        given = client.get("/_test/log", headers={"X-Request-ID": "req-json-1"})
        generated = client.get("/_test/log")

    assert given.status_code == generated.status_code == 204
    entries = json_lines(buffer.getvalue())
    mine = [
        (e["request_id"], e["level"], e["msg"]) for e in entries if e["logger"] == view_log.name
    ]
    generated_id = generated.headers["X-Request-ID"]
    assert re.fullmatch(r"[0-9a-f]{32}", generated_id)
    assert mine == [
        ("-", "INFO", "outside any request"),
        ("req-json-1", "INFO", "handled the thing"),
        ("req-json-1", "WARNING", "count=3"),
        (generated_id, "INFO", "handled the thing"),
        (generated_id, "WARNING", "count=3"),
    ]


def test_an_unhandled_error_is_one_json_entry_with_a_redacted_traceback() -> None:
    app = json_app()

    @app.get("/_test/boom")
    def boom() -> str:
        raise RuntimeError(f"upstream refused key {API_KEY} for cookie probboard_session={SESSION}")

    with captured_log() as buffer:
        response = app.test_client().get("/_test/boom", headers={"X-Request-ID": "boom-7"})

    assert response.status_code == 500
    assert validated("error", response.data)["code"] == "internal_error"
    output = buffer.getvalue()
    assert_no_secret(output)
    [entry] = [e for e in json_lines(output) if e["logger"] == "app.errors"]
    assert entry["level"] == "ERROR"
    assert entry["request_id"] == "boom-7"
    assert entry["msg"] == "unhandled error: RuntimeError"
    assert "Traceback" in entry["exc"] and "RuntimeError: upstream refused key" in entry["exc"]
    assert "pbk_[redacted]" in entry["exc"]


def test_text_lines_carry_the_request_id(app: Flask) -> None:
    add_logging_route(app)

    with captured_log() as buffer:
        app.test_client().get("/_test/log", headers={"X-Request-ID": "req-text-9"})

    lines = [line for line in buffer.getvalue().splitlines() if view_log.name in line]
    assert len(lines) == 2
    assert all("[req-text-9]" in line for line in lines)
    assert lines[0].endswith("INFO tests.logging.view [req-text-9] handled the thing")
    assert lines[1].endswith("WARNING tests.logging.view [req-text-9] count=3")


def test_the_log_level_filters_lines() -> None:
    app = create_app({**BASE_CONFIG, "LOG_FORMAT": "json", "LOG_LEVEL": "warning"})
    add_logging_route(app)

    with captured_log() as buffer:
        app.test_client().get("/_test/log")

    entries = [e for e in json_lines(buffer.getvalue()) if e["logger"] == view_log.name]
    assert [(e["level"], e["msg"]) for e in entries] == [("WARNING", "count=3")]


def test_creating_apps_again_keeps_a_single_handler() -> None:
    for _ in range(3):
        create_app(BASE_CONFIG)
    json_app()

    with captured_log() as buffer:
        view_log.warning("once")

    assert [e["msg"] for e in json_lines(buffer.getvalue())] == ["once"]


# -- redaction --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "secret", "kept"),
    [
        (f"key {API_KEY} used", API_KEY_TAIL, "pbk_[redacted]"),
        ("session pbs_SeSsIoNtOkEn_123", "SeSsIoNtOkEn_123", "pbs_[redacted]"),
        (f"Authorization: Bearer {BEARER_KEY}", BEARER_KEY.removeprefix("pbk_"), "[redacted]"),
        ("authorization: bearer abc.def-ghi_jkl", "abc.def-ghi_jkl", "[redacted]"),
        ("Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig", "eyJhbGciOiJIUzI1NiJ9", "Bearer [redacted]"),
        ("X-API-Key: plainkey123", "plainkey123", "X-API-Key: [redacted]"),
        ("x-api-key=plainkey123", "plainkey123", "[redacted]"),
        ('{"X-Api-Key": "plainkey123"}', "plainkey123", "[redacted]"),
        ("{'X-Api-Key': 'plainkey123'}", "plainkey123", "[redacted]"),
        (f"Cookie: probboard_session={SESSION}", SESSION, "[redacted]"),
        (f"{{'Cookie': 'probboard_session={SESSION}'}}", SESSION, "[redacted]"),
        (f"Cookie: theme=dark; probboard_session={SESSION}", SESSION, "[redacted]"),
        (f"Set-Cookie: probboard_session={SESSION}; HttpOnly", SESSION, "[redacted]"),
        (f"{{'probboard_session': '{SESSION}'}}", SESSION, "[redacted]"),
    ],
)
def test_redact_masks_keys_tokens_and_cookies(text: str, secret: str, kept: str) -> None:
    cleaned = redact(text)

    assert secret not in cleaned
    assert kept in cleaned
    assert redact(cleaned) == cleaned  # idempotent


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("Cookie: theme=dark; remember_token=r3m3mb3r-s3cr3t", "r3m3mb3r-s3cr3t"),
        ("Cookie: probboard_session=x; csrf_token=csrfS3cr3t", "csrfS3cr3t"),
        ("Authorization: Basic dXNlcjpodW50ZXIy", "dXNlcjpodW50ZXIy"),
        ("Authorization: Token t0k3nV4lu3", "t0k3nV4lu3"),
    ],
)
def test_redact_masks_the_whole_value_of_a_sensitive_header(text: str, secret: str) -> None:
    """Every cookie of a Cookie header and any Authorization scheme, not just the first word."""
    assert secret not in redact(text)


@pytest.mark.parametrize(
    "text",
    [
        "GET /api/probboard/latest 200 in 3ms",
        "refresher started: source=simulated tick=500ms",
        "board seq=1767225600123 p_up=61.25",
        "GET /search?q=100%25%20sure&x=%41%42%43 HTTP/1.1",
        "progress 50% done, 100%",
        "GET /api/probboard/latest?k=pbk HTTP/1.1",
        "bad escapes %zz %4 %",
    ],
)
def test_redact_leaves_ordinary_text_alone(text: str) -> None:
    assert redact(text) == text


# -- a request carrying secrets ---------------------------------------------------------------


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_secrets_in_a_request_never_reach_the_log(log_format: str) -> None:
    app = create_app({**BASE_CONFIG, "LOG_FORMAT": log_format})
    add_careless_routes(app)
    client = app.test_client()
    client.set_cookie("probboard_session", SESSION)

    with captured_log() as buffer:
        response = client.get(
            "/_test/careless", headers={**SECRET_HEADERS, "X-Request-ID": "careless-1"}
        )

    assert response.status_code == 204
    output = buffer.getvalue()
    assert "headers: " in output and "environ: " in output
    assert "probboard_session" in output  # the cookie was logged, its value must not be
    assert "careless-1" in output
    assert "[redacted]" in output
    assert_no_secret(output)
    if log_format == "json":
        entries = json_lines(output)
        assert len([e for e in entries if e["logger"] == view_log.name]) == 4
        assert all(e["request_id"] == "careless-1" for e in entries)


def test_secrets_never_reach_the_log_on_the_app_fixture(app: Flask) -> None:
    add_careless_routes(app)
    client = app.test_client()
    client.set_cookie("probboard_session", SESSION)

    with captured_log() as buffer:
        response = client.get("/_test/careless", headers={"X-API-Key": API_KEY})
        latest = client.get("/api/probboard/latest", headers={"X-API-Key": API_KEY})

    assert response.status_code == 204
    # The key is unknown to this app's (unmigrated) store: refused, never served as guest.
    assert latest.status_code in (401, 503)
    assert validated("error", latest.data)["ok"] is False
    output = buffer.getvalue()
    assert "probboard_session" in output  # the cookie was logged, its value was not
    assert_no_secret(output)


def test_the_session_cookie_value_never_reaches_the_log(app: Flask) -> None:
    """``log.info("%s", request.cookies)`` is as careless as logging the headers."""
    add_careless_routes(app)
    client = app.test_client()
    client.set_cookie("probboard_session", SESSION)

    with captured_log() as buffer:
        response = client.get("/_test/cookies")

    assert response.status_code == 204
    output = buffer.getvalue()
    assert "cookies: " in output and "cookie dict: " in output
    assert "probboard_session" in output
    assert_no_secret(output)


# -- keys and tokens wherever they stand (no word boundary needed) ------------------------------

LOOSE_BODY = "Jq7Lm2Pz9Rt4Vw6Yb1Nc3Df5Gh8Kx0Ma_-QsEuIoAyT"  # 43 characters, like a real body
LOOSE_FORMS = {
    "bearer-%20-in-a-query": "GET /api/probboard/latest?auth=Bearer%20pbk_{body} HTTP/1.1",
    "after-a-letter": "GET /api/probboard/latest?token=xpbk_{body} HTTP/1.1",
    "after-a-digit": "GET /api/probboard/latest?k=1pbk_{body} HTTP/1.1",
    "inside-a-word": "GET /api/probboard/latest?x=abcpbk_{body} HTTP/1.1",
    "url-encoded-underscore": "GET /api/probboard/latest?k=pbk%5F{body} HTTP/1.1",
    "url-encoded-underscore-lower-case": "GET /api/probboard/latest?k=pbk%5f{body} HTTP/1.1",
    "session-after-a-letter": "GET /api/probboard/latest?session=xpbs_{body} HTTP/1.1",
    "session-url-encoded-underscore": "GET /api/probboard/latest?s=pbs%5F{body} HTTP/1.1",
    "session-bearer-%20": "GET /api/probboard/latest?auth=Bearer%20pbs_{body} HTTP/1.1",
    "access-log-line": (
        '127.0.0.1 - xpbk_{body} [23/Nov/2026:22:21:55 +0000] "GET /api/keys/verify HTTP/1.1" '
        '401 69 "https://probboard.example/account?key=1pbk_{body}" "probe/1.0 (abcpbs_{body})"'
    ),
    "gunicorn-invalid-request-line": (
        "Invalid request from ip=127.0.0.1: Invalid HTTP request line: "
        "'GARBAGE /api/keys/verify?auth=Bearer%20pbk_{body}'"
    ),
}


def body_windows(body: str, size: int = 8) -> set[str]:
    """Every run of ``size`` consecutive characters of ``body``."""
    return {body[i : i + size] for i in range(len(body) - size + 1)}


@pytest.mark.parametrize("form", list(LOOSE_FORMS))
def test_redact_masks_a_key_without_a_word_boundary_before_it(form: str) -> None:
    """Figure: characters of the body left by redact = 0 runs of 8, for each form."""
    text = LOOSE_FORMS[form].format(body=LOOSE_BODY)
    cleaned = redact(text)

    left = sorted(w for w in body_windows(LOOSE_BODY) if w in cleaned)
    assert not left, f"{form}: {cleaned!r} still holds {left[:3]}"


# -- percent-encoded keys (decoded before matching, masked where they stand) --------------------


PERCENT_FORMS = {
    "one-prefix-letter": "GET /api/probboard/latest?k=p%62k_{body} HTTP/1.1",
    "prefix-letter-lower-case-hex": "GET /api/probboard/latest?k=pb%6b_{body} HTTP/1.1",
    "whole-prefix": "GET /api/probboard/latest?k=%70%62%6B%5F{body} HTTP/1.1",
    "prefix-plain-body-encoded": "GET /api/probboard/latest?k=pbk_{encoded} HTTP/1.1",
    "prefix-and-body-encoded": "GET /api/probboard/latest?k={encoded_key} HTTP/1.1",
    "double-encoded": "GET /api/probboard/latest?k=p%2562k%255F{body} HTTP/1.1",
    "session-prefix-letter": "GET /api/probboard/latest?s=p%62s_{body} HTTP/1.1",
    "upper-case-prefix": "GET /api/probboard/latest?k=%50B%4B_{body} HTTP/1.1",
    "after-a-letter": "GET /api/probboard/latest?k=xp%62k_{body} HTTP/1.1",
    "access-log-line": (
        '127.0.0.1 - - [23/Nov/2026:22:21:55 +0000] "GET /api/keys/verify?k=p%62k_{body} '
        'HTTP/1.1" 401 69 "https://x.example/?key=%70bk%5f{body}" "probe/1.0"'
    ),
}


@pytest.mark.parametrize("form", list(PERCENT_FORMS))
def test_redact_masks_a_percent_encoded_key(form: str) -> None:
    """Figure: runs of 8 characters of the body left, in the line or any decoding of it = 0."""
    text = PERCENT_FORMS[form].format(
        body=LOOSE_BODY,
        encoded=percent_encoded(LOOSE_BODY),
        encoded_key=percent_encoded("pbk_" + LOOSE_BODY),
    )
    cleaned = redact(text)

    left = sorted(
        w for view in percent_decodings(cleaned) for w in body_windows(LOOSE_BODY) if w in view
    )
    assert not left, f"{form}: {cleaned!r} still holds {left[:3]}"
    assert "[redacted]" in cleaned
    assert redact(cleaned) == cleaned  # idempotent


def test_redact_masks_only_the_span_of_an_encoded_key() -> None:
    """What stands around the key, and its prefix as written, are kept byte for byte."""
    text = f"GET /a%20b?k=p%62k_{LOOSE_BODY}&next=%41%42 HTTP/1.1"

    assert redact(text) == "GET /a%20b?k=p%62k_[redacted]&next=%41%42 HTTP/1.1"


# -- a request id that holds a key is never taken -----------------------------------------------

SECRET_REQUEST_IDS = {
    "an API key": "pbk_" + LOOSE_BODY,
    "a session token": "pbs_" + LOOSE_BODY,
    "a key after letters": "req-pbk_" + LOOSE_BODY,
    "an upper-case prefix": "PBK_" + LOOSE_BODY,
}


@pytest.mark.parametrize("log_format", ["text", "json"])
@pytest.mark.parametrize("name", list(SECRET_REQUEST_IDS))
def test_a_request_id_holding_a_key_is_replaced_and_never_logged(
    name: str, log_format: str
) -> None:
    """The id field of a log line is not the message: the key must not reach it either."""
    app = create_app({**BASE_CONFIG, "LOG_FORMAT": log_format})
    add_logging_route(app)
    given = SECRET_REQUEST_IDS[name]

    with captured_log() as buffer:
        response = app.test_client().get("/_test/log", headers={"X-Request-ID": given})

    assert response.status_code == 204
    returned = response.headers["X-Request-ID"]
    assert re.fullmatch(r"[0-9a-f]{32}", returned), returned
    output = buffer.getvalue()
    left = sorted(w for w in body_windows(LOOSE_BODY) if w in output)
    assert not left, f"{name}: the log holds {left[:3]}:\n{output}"
    mine = [line for line in output.splitlines() if "handled the thing" in line]
    assert len(mine) == 1 and returned in mine[0]


@pytest.mark.parametrize("request_id", ["pbk", "pbk-123", "pbs.7", "my-trace-pbk"])
def test_a_plain_request_id_near_the_key_prefix_is_kept(
    client: FlaskClient, request_id: str
) -> None:
    """Only what the log mask would touch is refused: a plain id that merely starts alike stays."""
    response = client.get("/api/health", headers={"X-Request-ID": request_id})

    assert response.headers["X-Request-ID"] == request_id
