"""Every failure is an ErrorResponse JSON body with a stable code, never an HTML page."""

from __future__ import annotations

import pytest
from flask import Flask, abort
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from app.errors import ApiError
from tests.support.contract import validated

ENDPOINTS = ("/api/health", "/api/probboard/latest")


def assert_error(response: TestResponse, status: int, code: str) -> dict[str, object]:
    """``response`` is an ErrorResponse with ``status`` and ``code``; return its body."""
    assert response.status_code == status
    assert response.mimetype == "application/json"
    assert response.headers["Cache-Control"] == "no-store"
    body = validated("error", response.data)
    assert body["ok"] is False
    assert body["code"] == code
    assert isinstance(body["error"], str) and body["error"].strip()
    assert b"<html" not in response.data.lower()
    return body


def test_unknown_path_is_a_json_404(client: FlaskClient) -> None:
    response = client.get("/api/nope")

    body = assert_error(response, 404, "not_found")
    assert "/api/health" in str(body["error"])


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH"])
def test_unknown_path_with_any_method_is_a_json_404(client: FlaskClient, method: str) -> None:
    assert_error(client.open("/does/not/exist", method=method), 404, "not_found")


@pytest.mark.parametrize("path", ENDPOINTS)
@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH"])
def test_wrong_method_is_a_json_405_with_allow(client: FlaskClient, path: str, method: str) -> None:
    response = client.open(path, method=method, data=b'{"x": 1}', content_type="application/json")

    assert_error(response, 405, "method_not_allowed")
    allowed = {m.strip() for m in response.headers["Allow"].split(",")}
    assert "GET" in allowed
    assert method not in allowed


@pytest.mark.parametrize("path", ENDPOINTS)
def test_head_works_without_a_body(client: FlaskClient, path: str) -> None:
    get = client.get(path)
    head = client.head(path)

    assert head.status_code == 200
    assert head.data == b""
    assert head.mimetype == "application/json"
    assert head.headers["Cache-Control"] == "no-store"
    # Same resource as GET, which carries a real body.
    assert get.status_code == 200
    validated("health" if path == "/api/health" else "board", get.data)


@pytest.mark.parametrize("path", ENDPOINTS)
def test_options_lists_the_allowed_methods(client: FlaskClient, path: str) -> None:
    response = client.options(path)

    assert response.status_code == 200
    allowed = {m.strip() for m in response.headers["Allow"].split(",")}
    assert {"GET", "HEAD", "OPTIONS"} <= allowed
    assert "POST" not in allowed
    assert response.data == b""


def test_unexpected_exception_is_a_json_500_without_details(app: Flask) -> None:
    @app.get("/_test/boom")
    def boom() -> str:
        raise RuntimeError("database password is hunter2")

    response = app.test_client().get("/_test/boom", headers={"X-Request-ID": "boom-1"})

    assert_error(response, 500, "internal_error")
    assert b"hunter2" not in response.data
    assert b"Traceback" not in response.data
    assert response.headers["X-Request-ID"] == "boom-1"


def test_exception_in_a_view_never_gives_html(app: Flask) -> None:
    @app.get("/_test/zero")
    def zero() -> str:
        return str(1 // 0)

    response = app.test_client().get("/_test/zero", headers={"Accept": "text/html"})

    assert_error(response, 500, "internal_error")


def test_api_error_keeps_its_status_code_and_retry_after(app: Flask) -> None:
    @app.get("/_test/slow-down")
    def slow_down() -> str:
        raise ApiError(429, "rate_limited", "Too many requests.", retry_after_ms=1500)

    response = app.test_client().get("/_test/slow-down")

    body = assert_error(response, 429, "rate_limited")
    assert body["error"] == "Too many requests."
    assert body["retryAfterMs"] == 1500
    assert response.headers["Retry-After"] == "2"


def test_http_exception_raised_in_a_view_gets_a_stable_code(app: Flask) -> None:
    @app.get("/_test/forbidden")
    def forbidden() -> str:
        abort(403)

    @app.get("/_test/teapot")
    def teapot() -> str:
        abort(418)

    client = app.test_client()
    assert_error(client.get("/_test/forbidden"), 403, "forbidden")
    assert_error(client.get("/_test/teapot"), 418, "http_418")


ODD_PATHS = [
    "/api/%ff%fe",
    "/..%2f..",
    "/../../etc/passwd",
    "/api/health/../../..",
    "/%00",
    "/api/probboard/latest%00",
    "/%",
    "/%zz",
    "/api/health/",
    "/API/HEALTH",
    "/\u00e9\u00e8",
    "/api/%E2%80%AE",
    "/" + "a" * 5000,
    "/api/" + "%2e%2e/" * 700,
]


@pytest.mark.parametrize("path", ODD_PATHS, ids=lambda p: p[:24])
def test_odd_paths_never_give_5xx(client: FlaskClient, path: str) -> None:
    response = client.get(path)

    assert response.status_code < 500
    assert response.mimetype == "application/json"
    if response.status_code == 200:
        validated("health", response.data)
    else:
        validated("error", response.data)
        assert response.status_code in (400, 404, 414)


def test_the_page_is_only_at_the_root(client: FlaskClient) -> None:
    # (werkzeug's test client turns "//" into an empty path, which is "/"; over HTTP "//"
    # reaches the app as "//", so it is checked through the WSGI environ directly.)
    assert client.get("/").mimetype == "text/html"
    response = client.get("/", environ_overrides={"PATH_INFO": "//"})
    assert response.status_code == 404
    validated("error", response.data)


@pytest.mark.parametrize("path", ["/api//health", "/api//probboard//latest"])
def test_double_slash_paths_answer_json_not_an_html_redirect_page(
    client: FlaskClient, path: str
) -> None:
    # The interface: every body is JSON except the stream. werkzeug merges the slashes
    # with a 308 whose body is an HTML "Redirecting..." page unless the app handles it.
    response = client.get(path)

    assert response.status_code < 500
    assert b"<html" not in response.data.lower()
    if response.data:
        assert response.mimetype == "application/json"
    if 300 <= response.status_code < 400:
        assert response.headers["Location"].endswith(path.replace("//", "/"))
    elif response.status_code == 200:
        validated("health" if "health" in path else "board", response.data)
    else:
        validated("error", response.data)
