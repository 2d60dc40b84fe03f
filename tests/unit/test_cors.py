"""CORS on the read endpoints (``app/cors.py``): ``CORS_ORIGINS``, preflights, errors, limits.

Browsers are played by headers: ``Origin`` on every cross-origin request, and for a
preflight ``OPTIONS`` with ``Access-Control-Request-Method`` (and ``-Headers``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from flask import Flask
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from app.config import ConfigError, load_settings
from app.extensions import db
from app.markets import parse_symbols
from app.refresher.loop import Refresher
from app.refresher.sources.simulated import SimulatedSource
from app.services import services_of
from app.web import create_app
from tests.conftest import BASE_CONFIG
from tests.support.contract import validated

LATEST = "/api/probboard/latest"
STREAM = "/api/probboard/stream"
VERIFY = "/api/keys/verify"
READ_PATHS = (
    LATEST,
    STREAM,
    "/api/probboard/calibration",
    "/api/probboard/trail",
    "/api/health",
    VERIFY,
    "/api/openapi.json",
)
SITE = "https://example.org"
OTHER_SITE = "https://other.example"
EXPOSED = {
    "X-RateLimit-Limit",
    "X-RateLimit-Remaining",
    "X-RateLimit-Reset",
    "Retry-After",
    "X-Request-ID",
    "X-Next-Cursor",
}
ALLOW_ORIGIN = "Access-Control-Allow-Origin"


def make_app(tmp_path: Path, **config: str) -> Flask:
    """An app on the memory bus (its SQLite file has no schema: guests only), one board."""
    app = create_app(
        {**BASE_CONFIG, "DATABASE_URL": f"sqlite:///{tmp_path / 'app.sqlite3'}", **config}
    )
    with app.app_context():
        assert Refresher(
            SimulatedSource(parse_symbols("BTC"), seed=1), services_of(app).bus, 500
        ).tick()
    return app


def preflight(
    client: FlaskClient, path: str = LATEST, origin: str = SITE, headers: str | None = None
) -> TestResponse:
    """What a browser sends before a GET that carries ``headers`` (comma-separated names)."""
    sent = {"Origin": origin, "Access-Control-Request-Method": "GET"}
    if headers is not None:
        sent["Access-Control-Request-Headers"] = headers
    return client.options(path, headers=sent)


def cors_headers(response: TestResponse) -> dict[str, str]:
    """Every ``Access-Control-*`` header of ``response``."""
    return {k: v for k, v in response.headers.items() if k.startswith("Access-Control-")}


def exposed(response: TestResponse) -> set[str]:
    return {h.strip() for h in response.headers["Access-Control-Expose-Headers"].split(",")}


# -- CORS_ORIGINS --------------------------------------------------------------------------------


def test_cors_origins_default_to_every_origin() -> None:
    assert load_settings({}).cors_origins == ("*",)
    assert load_settings({"CORS_ORIGINS": "  "}).cors_origins == ("*",)
    assert load_settings({"CORS_ORIGINS": " * "}).cors_origins == ("*",)


def test_cors_origins_list_is_parsed_and_normalised() -> None:
    settings = load_settings(
        {"CORS_ORIGINS": " https://Example.org, http://localhost:3000,http://[::1]:8000 ,"}
    )

    assert settings.cors_origins == (
        "https://example.org",
        "http://localhost:3000",
        "http://[::1]:8000",
    )


@pytest.mark.parametrize(
    "value",
    [
        "example.org",  # no scheme
        "ftp://example.org",
        "https://example.org/",  # a path: browsers never send one
        "https://example.org/app",
        "https://example.org?x=1",
        "https://user@example.org",
        "https://example.org:443",  # the default port: the Origin header leaves it out
        "http://example.org:80",
        "https://example.org:0",
        "https://example.org:70000",
        "https://example.org:port",
        "https://exa mple.org",
        "null",  # sandboxed frames and files: allowing it would allow any of them
        "*, https://example.org",
        "https://example.org,https://EXAMPLE.org",  # listed twice
        ",",
        "https://*.example.org",
    ],
)
def test_bad_cors_origins_stop_start_up_naming_the_variable(value: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings({"CORS_ORIGINS": value})
    assert caught.value.variable == "CORS_ORIGINS"
    assert str(caught.value).startswith("CORS_ORIGINS: ")

    with pytest.raises(ConfigError) as at_start:
        create_app(
            {**BASE_CONFIG, "DATABASE_URL": f"sqlite:///{tmp_path}/a.db", "CORS_ORIGINS": value}
        )
    assert at_start.value.variable == "CORS_ORIGINS"


# -- every origin (the default) ------------------------------------------------------------------


@pytest.fixture
def open_app(tmp_path: Path) -> Flask:
    """The default: ``CORS_ORIGINS`` unset."""
    return make_app(tmp_path)


@pytest.mark.parametrize("path", READ_PATHS)
def test_a_preflight_of_every_read_endpoint_is_204_with_the_cors_headers(
    open_app: Flask, path: str
) -> None:
    response = preflight(open_app.test_client(), path, headers="x-api-key, x-request-id")

    assert response.status_code == 204, response.get_data()
    assert response.get_data() == b""
    assert response.headers[ALLOW_ORIGIN] == "*"
    methods = {m.strip() for m in response.headers["Access-Control-Allow-Methods"].split(",")}
    assert methods == {"GET", "HEAD", "OPTIONS"}
    assert response.headers["Access-Control-Allow-Headers"] == "x-api-key, x-request-id"
    assert response.headers["Access-Control-Max-Age"] == "600"
    assert "Access-Control-Allow-Credentials" not in response.headers
    # "*" is the same answer for every origin: nothing for a cache to tell apart.
    assert "Origin" not in response.headers.get("Vary", "")


def test_a_preflight_allows_both_key_schemes_and_no_other_header(open_app: Flask) -> None:
    asked = "authorization, content-type, x-api-key, x-custom"
    response = preflight(open_app.test_client(), headers=asked)

    assert response.status_code == 204
    allowed = response.headers["Access-Control-Allow-Headers"]
    assert allowed == "authorization, content-type, x-api-key"


def test_a_preflight_of_the_stream_allows_last_event_id(open_app: Flask) -> None:
    response = preflight(open_app.test_client(), STREAM, headers="last-event-id, x-api-key")

    assert response.status_code == 204
    assert response.headers[ALLOW_ORIGIN] == "*"
    assert response.headers["Access-Control-Allow-Headers"] == "last-event-id, x-api-key"


def test_an_options_with_only_an_origin_is_answered_as_a_preflight(open_app: Flask) -> None:
    """The issue's check: curl -H 'Origin: https://example.org' -X OPTIONS .../latest."""
    response = open_app.test_client().options(LATEST, headers={"Origin": SITE})

    assert response.status_code == 204, response.get_data()
    assert response.get_data() == b""
    assert response.headers[ALLOW_ORIGIN] == "*"
    methods = {m.strip() for m in response.headers["Access-Control-Allow-Methods"].split(",")}
    assert methods == {"GET", "HEAD", "OPTIONS"}
    allowed = {
        h.strip().lower() for h in response.headers["Access-Control-Allow-Headers"].split(",")
    }
    assert {"authorization", "x-api-key", "last-event-id", "x-request-id"} <= allowed
    assert exposed(response) == EXPOSED
    assert "Access-Control-Allow-Credentials" not in response.headers


def test_a_preflight_for_a_method_that_is_not_read_is_not_granted(open_app: Flask) -> None:
    response = open_app.test_client().options(
        LATEST, headers={"Origin": SITE, "Access-Control-Request-Method": "DELETE"}
    )

    assert response.status_code == 200  # Flask's own answer to OPTIONS, as without CORS
    assert "Access-Control-Allow-Methods" not in response.headers


def test_a_read_with_an_origin_may_read_the_limits_and_the_request_id(open_app: Flask) -> None:
    response = open_app.test_client().get(LATEST, headers={"Origin": SITE})

    assert response.status_code == 200
    validated("board", response.get_data())
    assert response.headers[ALLOW_ORIGIN] == "*"
    assert exposed(response) == EXPOSED
    assert "X-RateLimit-Remaining" in response.headers
    # Merged with the credentials' Vary, not replaced.
    assert response.headers.getlist("Vary") == ["Authorization, X-API-Key, Cookie"]


def test_requests_without_an_origin_get_no_cors_headers(open_app: Flask) -> None:
    client = open_app.test_client()
    read = client.get(LATEST)
    plain_options = client.options(LATEST)

    assert cors_headers(read) == {}
    # A plain OPTIONS (no Origin) keeps Flask's answer: 200 and Allow.
    assert plain_options.status_code == 200
    assert set(plain_options.headers["Allow"].replace(" ", "").split(",")) == {
        "GET",
        "HEAD",
        "OPTIONS",
    }
    assert cors_headers(plain_options) == {}


@pytest.mark.parametrize("path", ["/metrics", "/", "/static/board.css"])
def test_metrics_and_the_page_get_no_cors(open_app: Flask, path: str) -> None:
    client = open_app.test_client()

    assert cors_headers(client.get(path, headers={"Origin": SITE})) == {}
    assert cors_headers(preflight(client, path)) == {}


@pytest.mark.parametrize(
    ("path", "headers", "status", "code"),
    [
        (VERIFY, {}, 401, "missing_credentials"),
        (STREAM, {}, 401, "missing_credentials"),
        (VERIFY, {"Authorization": "Basic abc"}, 401, "malformed_authorization"),
        ("/api/probboard/calibration?symbol=DOGE", {}, 400, "invalid_symbol"),
        ("/api/probboard/nothing", {}, 404, "not_found"),
    ],
)
def test_errors_of_read_endpoints_carry_the_cors_headers(
    open_app: Flask, path: str, headers: dict[str, str], status: int, code: str
) -> None:
    response = open_app.test_client().get(path, headers={"Origin": SITE, **headers})

    assert response.status_code == status
    assert validated("error", response.get_data())["code"] == code
    assert response.headers[ALLOW_ORIGIN] == "*"
    assert exposed(response) == EXPOSED


# -- limits: preflights are free, refusals readable ----------------------------------------------


def test_preflights_are_not_counted_and_never_429_and_the_429_is_readable(
    tmp_path: Path,
) -> None:
    # Per day: no window edge falls between these few requests.
    client = make_app(tmp_path, GUEST_RATE_LIMIT="3 per day").test_client()
    assert client.get(LATEST).status_code == 200
    assert client.get(LATEST).status_code == 200
    for _ in range(10):
        assert preflight(client, headers="x-api-key").status_code == 204
    assert (
        client.get(LATEST).status_code == 200
    )  # the third read: no preflight used a slot of the limit

    refused = client.get(LATEST, headers={"Origin": SITE})
    assert refused.status_code == 429
    assert validated("error", refused.get_data())["code"] == "rate_limited"
    assert refused.headers[ALLOW_ORIGIN] == "*"
    assert {"Retry-After", "X-RateLimit-Reset"} <= exposed(refused)
    assert int(refused.headers["Retry-After"]) >= 1
    # The limit exhausted: a preflight is still granted.
    again = preflight(client, headers="x-api-key")
    assert again.status_code == 204
    assert again.headers[ALLOW_ORIGIN] == "*"


@pytest.fixture
def key_app(database_url: str) -> Iterator[Flask]:
    """An app on a migrated accounts database that blocks an address at its 2nd bad key."""
    app = create_app({**BASE_CONFIG, "DATABASE_URL": database_url, "AUTH_FAILURE_LIMIT": "1/day"})
    yield app
    with app.app_context():
        db.session.remove()
        db.engine.dispose()


def test_preflights_never_count_as_failed_keys(key_app: Flask) -> None:
    client = key_app.test_client()
    for path in (VERIFY, STREAM, LATEST):
        for _ in range(5):
            response = preflight(client, path, headers="authorization, x-api-key")
            assert response.status_code == 204
            assert response.headers[ALLOW_ORIGIN] == "*"

    bad_key = {"Origin": SITE, "X-API-Key": "pbk_" + "Q" * 43}
    first = client.get(VERIFY, headers=bad_key)
    assert first.status_code == 401  # the first failure: no preflight was counted before it
    assert validated("error", first.get_data())["code"] == "invalid_key"
    assert first.headers[ALLOW_ORIGIN] == "*"
    blocked = client.get(VERIFY, headers=bad_key)
    assert blocked.status_code == 429  # the failed-key throttle's refusal, readable too
    assert blocked.headers[ALLOW_ORIGIN] == "*"
    assert "Retry-After" in exposed(blocked)


def key_of(app: Flask, name: str, plan: str) -> str:
    """A key of a new account on ``plan`` (keys are made on vip_pro), with the operator CLI."""
    runner = app.test_cli_runner()

    def cli(*args: str) -> str:
        result = runner.invoke(args=list(args))
        assert result.exit_code == 0, (args, result.output)
        return str(result.stdout)

    cli("users", "create", name, "--plan", "vip_pro")
    key = cli("keys", "create", name).splitlines()[-1]
    if plan != "vip_pro":
        cli("users", "set-plan", name, plan)
    return key


def test_a_page_may_open_the_stream_with_a_key_and_read_its_refusals(key_app: Flask) -> None:
    client = key_app.test_client()
    vip, user = key_of(key_app, "vic", "vip_pro"), key_of(key_app, "ursula", "user")

    # HEAD: the stream's own headers, without holding a stream open in the test.
    opened = client.head(STREAM, headers={"Origin": SITE, "X-API-Key": vip})
    assert opened.status_code == 200
    assert opened.mimetype == "text/event-stream"
    assert opened.headers[ALLOW_ORIGIN] == "*"
    refused = client.get(STREAM, headers={"Origin": SITE, "X-API-Key": user})
    assert refused.status_code == 403
    assert validated("error", refused.get_data())["code"] == "vip_pro_required"
    assert refused.headers[ALLOW_ORIGIN] == "*"


# -- a list of origins --------------------------------------------------------------------------


@pytest.fixture
def listed_app(tmp_path: Path) -> Flask:
    """Two origins allowed, one of them IPv6 (a literal, though it holds brackets)."""
    return make_app(tmp_path, CORS_ORIGINS=f"{SITE},http://[::1]:8000")


@pytest.mark.parametrize("origin", [SITE, "http://[::1]:8000", "HTTPS://EXAMPLE.ORG"])
def test_a_listed_origin_is_allowed_by_name(listed_app: Flask, origin: str) -> None:
    client = listed_app.test_client()
    granted = preflight(client, origin=origin, headers="x-api-key")
    read = client.get(LATEST, headers={"Origin": origin})

    assert granted.status_code == 204
    assert granted.headers[ALLOW_ORIGIN] == origin
    assert read.headers[ALLOW_ORIGIN] == origin
    assert exposed(read) == EXPOSED
    # One Vary, the credentials' and the origin's.
    assert read.headers.getlist("Vary") == ["Authorization, X-API-Key, Cookie, Origin"]
    assert granted.headers.getlist("Vary") == ["Origin"]


@pytest.mark.parametrize(
    "origin",
    [
        OTHER_SITE,
        "http://example.org",  # another scheme is another origin
        "https://example.org:8443",
        "https://example.org.evil.test",
        "https://exampleXorg",
        "http://[::1]:8001",
        "http://1:8000",  # the brackets are literal, not a regex class
        "null",
    ],
)
def test_an_origin_not_listed_gets_no_cors_allow_headers(listed_app: Flask, origin: str) -> None:
    client = listed_app.test_client()
    refused = preflight(client, origin=origin, headers="x-api-key")
    read = client.get(LATEST, headers={"Origin": origin})

    assert refused.status_code == 200  # Flask's own OPTIONS answer, not a granted preflight
    assert cors_headers(refused) == {}
    assert read.status_code == 200  # served as to anyone; the browser keeps it from the page
    assert cors_headers(read) == {}
    # The answer depends on the Origin: a cache must tell them apart.
    assert read.headers.getlist("Vary") == ["Authorization, X-API-Key, Cookie, Origin"]


# -- credentials ----------------------------------------------------------------------------------


@pytest.mark.parametrize("origins", ["*", SITE])
def test_credentials_are_never_allowed(tmp_path: Path, origins: str) -> None:
    client = make_app(tmp_path, CORS_ORIGINS=origins).test_client()
    with_cookie = {"Origin": SITE, "Cookie": "probboard_session=anything"}
    answers = [
        preflight(client, headers="authorization"),
        client.get(LATEST, headers=with_cookie),
        client.get("/api/health", headers=with_cookie),
    ]

    for answer in answers:
        assert answer.headers[ALLOW_ORIGIN] in ("*", SITE)
        assert "Access-Control-Allow-Credentials" not in answer.headers
