"""Prometheus metrics in one process: ``GET /metrics``, its allow list, and every series.

prometheus_client's default registry is global to the test process, so each test reads a
series before and after what it does and asserts on the difference.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from flask import Flask
from flask.testing import FlaskClient
from prometheus_client import REGISTRY
from sqlalchemy.exc import OperationalError, SQLAlchemyError

import app.api.latest as latest_view
import app.web as web_module
from app.accounts.db_deadline import DatabaseGuard, DatabaseTimeoutError
from app.board.row import BoardRow
from app.bus import BoardBus
from app.bus.memory import MemoryBoardBus
from app.config import ConfigError, load_settings
from app.markets import parse_symbols
from app.metrics.refresher import serve
from app.redis_pool import RedisFallback
from app.refresher.loop import Refresher
from app.refresher.sources.simulated import SimulatedSource
from app.services import services_of
from app.web import create_app
from harness.processes import free_port
from tests.conftest import BASE_CONFIG
from tests.support.contract import validated
from tests.unit.api.test_latest_memory import row

LATEST = "/api/probboard/latest"
STREAM = "/api/probboard/stream"
METRICS = "/metrics"
OUTSIDER = "203.0.113.5"
# 2026-01-01 00:00:00.123 UTC
T0_MS = 1_767_225_600_123
BOUNDARY = 1_800_000_000  # a window boundary (a multiple of 300 s)


@pytest.fixture(autouse=True)
def _no_multiprocess_dir(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """These tests read this process's registry: never a multiprocess folder."""
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
    yield


# -- helpers ------------------------------------------------------------------------------


def value(name: str, labels: dict[str, str] | None = None) -> float:
    """A sample of the default registry; 0 while the series does not exist yet."""
    found = REGISTRY.get_sample_value(name, labels or {})
    return 0.0 if found is None else found


def requests_total(endpoint: str, status: str, plan: str) -> float:
    return value(
        "probboard_http_requests_total", {"endpoint": endpoint, "status": status, "plan": plan}
    )


def app_with(tmp_path: Path, **settings: str) -> Flask:
    """An app on the memory bus (no embedded refresher) with ``settings`` on top."""
    return create_app(
        {**BASE_CONFIG, "DATABASE_URL": f"sqlite:///{tmp_path / 'app.sqlite3'}", **settings}
    )


def board(seq: int, ts_ms: int) -> dict[str, Any]:
    """A published board document with one complete BTC row whose data time is ``ts_ms``."""
    return {"seq": seq, "ts": ts_ms, "source": "test", "items": [row(ts_ms)]}


def bus_of(app: Flask) -> BoardBus:
    bus: BoardBus = services_of(app).bus
    return bus


def refused(client: FlaskClient, address: str, **kwargs: Any) -> dict[str, Any]:
    """``GET /metrics`` from ``address``: a 403 ErrorResponse, returned parsed."""
    response = client.get(METRICS, environ_base={"REMOTE_ADDR": address}, **kwargs)
    assert response.status_code == 403, response.data
    assert response.mimetype == "application/json"
    body = validated("error", response.data)
    assert body["code"] == "metrics_forbidden"
    assert body["ok"] is False
    return body


def admitted(client: FlaskClient, address: str, **kwargs: Any) -> str:
    """``GET /metrics`` from ``address``: 200 in the text format; the body."""
    response = client.get(METRICS, environ_base={"REMOTE_ADDR": address}, **kwargs)
    assert response.status_code == 200, response.data
    assert response.headers["Content-Type"].startswith("text/plain; version=")
    return response.get_data(as_text=True)


# -- GET /metrics and who may read it ---------------------------------------------------------


def test_metrics_from_loopback_is_the_text_format(client: FlaskClient) -> None:
    client.get(LATEST)  # at least one request counted

    response = client.get(METRICS, environ_base={"REMOTE_ADDR": "127.0.0.1"})

    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("text/plain; version=")
    assert response.headers["Cache-Control"] == "no-store"
    text = response.get_data(as_text=True)
    assert "# TYPE probboard_http_requests_total counter" in text
    assert 'probboard_http_requests_total{endpoint="latest"' in text


def test_metrics_from_ipv6_loopback_is_served(client: FlaskClient) -> None:
    assert "probboard_http_requests_total" in admitted(client, "::1")


def test_metrics_from_an_outside_address_is_refused(client: FlaskClient) -> None:
    response = client.get(METRICS, environ_base={"REMOTE_ADDR": OUTSIDER})

    assert response.status_code == 403
    body = validated("error", response.data)
    assert body["code"] == "metrics_forbidden"
    assert b"probboard_" not in response.data


def test_an_empty_allow_list_refuses_everyone(tmp_path: Path) -> None:
    client = app_with(tmp_path, METRICS_ALLOW="").test_client()

    refused(client, "127.0.0.1")
    refused(client, "::1")


def test_an_allowed_network_admits_its_addresses_only(tmp_path: Path) -> None:
    client = app_with(tmp_path, METRICS_ALLOW="10.0.0.0/8").test_client()

    assert "probboard_http_requests_total" in admitted(client, "10.1.2.3")
    refused(client, "11.1.2.3")
    refused(client, "127.0.0.1")  # the default loopback is replaced, not added to


def test_behind_a_trusted_proxy_no_header_unlocks_the_metrics(tmp_path: Path) -> None:
    """Issue 46: the socket peer is judged; a trusted proxy's header can only refuse."""
    client = app_with(
        tmp_path, TRUSTED_PROXIES="127.0.0.1/32,192.0.2.0/24", TRUSTED_PROXY_HOPS="2"
    ).test_client()

    # A trusted proxy elsewhere forwards "a loopback client": the peer is not allowed.
    refused(client, "192.0.2.10", headers={"X-Forwarded-For": "127.0.0.1"})
    refused(client, "192.0.2.10", headers={"X-Forwarded-For": "127.0.0.1, ::1"})
    # The proxy on loopback forwards an outside client: refused, though loopback is allowed
    # (nginx on the same host never hands the metrics to the clients it forwards).
    refused(client, "127.0.0.1", headers={"X-Forwarded-For": OUTSIDER})
    # The proxy's own scrape, or a header of junk (no client but itself), is the peer's.
    admitted(client, "127.0.0.1")
    admitted(client, "127.0.0.1", headers={"X-Forwarded-For": "garbage"})


def test_an_allowed_peer_is_served_whatever_header_it_sends(tmp_path: Path) -> None:
    """Issue 46: loopback, not a trusted proxy, with X-Forwarded-For: 8.8.8.8 is served."""
    client = app_with(tmp_path, TRUSTED_PROXIES="10.0.0.0/24").test_client()

    admitted(client, "127.0.0.1", headers={"X-Forwarded-For": "8.8.8.8"})
    admitted(client, "::ffff:127.0.0.1", headers={"X-Forwarded-For": "8.8.8.8"})


def test_without_trusted_proxies_a_forwarded_header_is_ignored(client: FlaskClient) -> None:
    refused(client, OUTSIDER, headers={"X-Forwarded-For": "127.0.0.1"})
    admitted(client, "127.0.0.1", headers={"X-Forwarded-For": OUTSIDER})


def test_a_refusal_is_counted_under_the_metrics_endpoint(client: FlaskClient) -> None:
    before = requests_total("metrics", "403", "none")

    refused(client, OUTSIDER)

    assert requests_total("metrics", "403", "none") == before + 1


# -- configuration ------------------------------------------------------------------------------


def test_metrics_settings_defaults() -> None:
    settings = load_settings({})

    assert settings.metrics_allow == ("127.0.0.1/32", "::1/128")
    assert settings.refresher_metrics_host == "127.0.0.1"
    assert settings.refresher_metrics_port == 9101


def test_metrics_settings_are_parsed() -> None:
    settings = load_settings(
        {
            "METRICS_ALLOW": " 10.0.0.0/8 , 192.0.2.7,fd00::/8 ",
            "REFRESHER_METRICS_HOST": "0.0.0.0",
            "REFRESHER_METRICS_PORT": "0",
        }
    )

    assert settings.metrics_allow == ("10.0.0.0/8", "192.0.2.7", "fd00::/8")
    assert settings.refresher_metrics_host == "0.0.0.0"
    assert settings.refresher_metrics_port == 0


def test_an_empty_allow_list_is_parsed_as_nobody() -> None:
    """``_networks``: "empty: nobody", not the loopback default."""
    assert load_settings({"METRICS_ALLOW": ""}).metrics_allow == ()


@pytest.mark.parametrize(
    ("variable", "bad"),
    [
        ("METRICS_ALLOW", "10.0.0.0/33"),
        ("METRICS_ALLOW", "nonsense"),
        ("METRICS_ALLOW", "127.0.0.1/32,nonsense"),
        ("REFRESHER_METRICS_HOST", "localhost"),
        ("REFRESHER_METRICS_HOST", "256.0.0.1"),
        ("REFRESHER_METRICS_PORT", "65536"),
        ("REFRESHER_METRICS_PORT", "-1"),
        ("REFRESHER_METRICS_PORT", "ninety"),
    ],
)
def test_bad_metrics_settings_name_the_variable(variable: str, bad: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings({variable: bad})

    assert caught.value.variable == variable
    assert variable in str(caught.value)


def test_create_app_refuses_a_bad_allow_list(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        app_with(tmp_path, METRICS_ALLOW="10.0.0.0/33")

    assert caught.value.variable == "METRICS_ALLOW"


# -- requests by endpoint, status and plan ---------------------------------------------------


def test_a_guest_latest_is_counted(client: FlaskClient) -> None:
    before = requests_total("latest", "200", "guest")
    count_before = value("probboard_http_request_duration_seconds_count", {"endpoint": "latest"})

    for _ in range(3):
        assert client.get(LATEST).status_code == 200

    assert requests_total("latest", "200", "guest") == before + 3
    after = value("probboard_http_request_duration_seconds_count", {"endpoint": "latest"})
    assert after == count_before + 3


def test_an_unknown_path_is_counted_as_other(client: FlaskClient) -> None:
    before = requests_total("other", "404", "none")

    assert client.get("/api/no-such-thing").status_code == 404

    assert requests_total("other", "404", "none") == before + 1


def test_labels_never_carry_a_path_or_a_key(accounts_app: Flask) -> None:
    client = accounts_app.test_client()
    secret = "pbk_" + "S3cr3t" * 7 + "z"
    path = "/api/x-7f3a9c1e-path"
    before = requests_total("other", "404", "none")

    assert client.get(f"{path}?key={secret}").status_code == 404
    assert client.get(f"/api/{secret}/zz-9q8w7e").status_code == 404
    assert client.get(LATEST, headers={"X-API-Key": secret}).status_code == 401

    assert requests_total("other", "404", "none") == before + 2
    text = admitted(client, "127.0.0.1")
    assert "pbk_" not in text
    assert "S3cr3t" not in text
    assert "x-7f3a9c1e-path" not in text
    assert "zz-9q8w7e" not in text
    for line in text.splitlines():
        if line.startswith("probboard_http_requests_total{"):
            assert 'endpoint="' in line
            endpoint = line.split('endpoint="', 1)[1].split('"', 1)[0]
            assert "/" not in endpoint, line


def test_a_stream_without_credentials_is_counted_as_a_refusal(client: FlaskClient) -> None:
    response = client.get(STREAM)
    assert response.status_code == 401
    code = validated("error", response.data)["code"]
    before_refusals = value("probboard_stream_refusals_total", {"reason": code})
    before_requests = requests_total("stream", "401", "none")

    again = client.get(STREAM)

    assert again.status_code == 401
    assert validated("error", again.data)["code"] == code
    assert value("probboard_stream_refusals_total", {"reason": code}) == before_refusals + 1
    assert requests_total("stream", "401", "none") == before_requests + 1


def test_a_stream_with_an_unknown_key_is_refused_by_its_code(accounts_app: Flask) -> None:
    client = accounts_app.test_client()
    unknown = "pbk_" + "Q" * 43
    response = client.get(STREAM, headers={"X-API-Key": unknown})
    assert response.status_code == 401
    code = validated("error", response.data)["code"]
    before = value("probboard_stream_refusals_total", {"reason": code})

    assert client.get(STREAM, headers={"X-API-Key": unknown}).status_code == 401

    assert value("probboard_stream_refusals_total", {"reason": code}) == before + 1


# -- board ages ----------------------------------------------------------------------------------


def test_board_ages_are_observed_when_received_and_when_served(
    app: Flask, client: FlaskClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    served = {"when": "served"}
    received = {"when": "received"}
    served_count = value("probboard_board_age_seconds_count", served)
    served_sum = value("probboard_board_age_seconds_sum", served)
    served_le_1 = value("probboard_board_age_seconds_bucket", {**served, "le": "1.0"})
    served_le_1_5 = value("probboard_board_age_seconds_bucket", {**served, "le": "1.5"})
    received_count = value("probboard_board_age_seconds_count", received)
    received_sum = value("probboard_board_age_seconds_sum", received)

    monkeypatch.setattr(web_module, "now_ms", lambda: T0_MS + 250)
    bus_of(app).publish(json.dumps(board(1, T0_MS)))
    monkeypatch.setattr(latest_view, "now_ms", lambda: T0_MS + 1234)
    response = client.get(LATEST)

    assert response.status_code == 200
    assert validated("board", response.data)["dataAgeMs"] == 1234
    assert value("probboard_board_age_seconds_count", received) == received_count + 1
    assert value("probboard_board_age_seconds_sum", received) == pytest.approx(received_sum + 0.25)
    assert value("probboard_board_age_seconds_count", served) == served_count + 1
    assert value("probboard_board_age_seconds_sum", served) == pytest.approx(served_sum + 1.234)
    assert value("probboard_board_age_seconds_bucket", {**served, "le": "1.0"}) == served_le_1
    assert value("probboard_board_age_seconds_bucket", {**served, "le": "1.5"}) == served_le_1_5 + 1


def test_no_board_no_served_age(client: FlaskClient) -> None:
    served = {"when": "served"}
    before = value("probboard_board_age_seconds_count", served)

    response = client.get(LATEST)

    assert response.status_code == 200
    assert validated("board", response.data)["items"] == []
    assert value("probboard_board_age_seconds_count", served) == before


# -- Redis fallbacks ------------------------------------------------------------------------------


def test_redis_fallback_gauge_and_error_counter() -> None:
    component = {"component": "metrics_test_storage"}
    fallback = RedisFallback("metrics-test storage", "local counters", probe_s=0.0)
    errors_before = value("probboard_redis_errors_total", component)
    assert value("probboard_redis_fallback", component) == 0.0

    def failing() -> str:
        raise redis.ConnectionError("Redis is away")

    assert fallback.call(failing, lambda: "local") == "local"
    assert fallback.down
    assert value("probboard_redis_fallback", component) == 1.0
    assert value("probboard_redis_errors_total", component) == errors_before + 1

    assert fallback.call(failing, lambda: "local") == "local"
    assert value("probboard_redis_fallback", component) == 1.0
    assert value("probboard_redis_errors_total", component) == errors_before + 2

    assert fallback.call(lambda: "redis", lambda: "local") == "redis"
    assert not fallback.down
    assert value("probboard_redis_fallback", component) == 0.0
    assert value("probboard_redis_errors_total", component) == errors_before + 2


def test_a_call_answered_locally_between_probes_is_no_redis_error() -> None:
    component = {"component": "metrics_probe_test"}
    fallback = RedisFallback("metrics probe test", "local", probe_s=3600.0)
    before = value("probboard_redis_errors_total", component)
    calls: list[str] = []

    def failing() -> str:
        calls.append("redis")
        raise redis.ConnectionError("Redis is away")

    fallback.call(failing, lambda: "local")
    fallback.call(failing, lambda: "local")  # down, not probing: Redis is not called

    assert calls == ["redis"]
    assert value("probboard_redis_errors_total", component) == before + 1
    assert value("probboard_redis_fallback", component) == 1.0


# -- database errors ------------------------------------------------------------------------------


@pytest.fixture
def guard() -> DatabaseGuard:
    return DatabaseGuard(contextlib.nullcontext, timeout_s=0.05)


def test_a_job_that_overruns_counts_a_database_timeout(guard: DatabaseGuard) -> None:
    before = value("probboard_database_errors_total", {"kind": "timeout"})
    errors_before = value("probboard_database_errors_total", {"kind": "error"})
    release = threading.Event()
    try:
        with pytest.raises(DatabaseTimeoutError):
            guard(lambda: release.wait(30))
    finally:
        release.set()

    assert value("probboard_database_errors_total", {"kind": "timeout"}) == before + 1
    assert value("probboard_database_errors_total", {"kind": "error"}) == errors_before


def test_a_failing_job_counts_a_database_error(guard: DatabaseGuard) -> None:
    before = value("probboard_database_errors_total", {"kind": "error"})
    timeouts_before = value("probboard_database_errors_total", {"kind": "timeout"})

    def job() -> None:
        raise OperationalError("SELECT 1", {}, Exception("connection refused"))

    slow = DatabaseGuard(contextlib.nullcontext, timeout_s=10.0)
    with pytest.raises(SQLAlchemyError):
        slow(job)

    assert value("probboard_database_errors_total", {"kind": "error"}) == before + 1
    assert value("probboard_database_errors_total", {"kind": "timeout"}) == timeouts_before


def test_a_job_that_answers_or_fails_otherwise_counts_nothing() -> None:
    kinds = [{"kind": "error"}, {"kind": "timeout"}]
    before = [value("probboard_database_errors_total", kind) for kind in kinds]
    guard = DatabaseGuard(contextlib.nullcontext, timeout_s=10.0)

    assert guard(lambda: 42) == 42

    def job() -> None:
        raise KeyError("not the database")

    with pytest.raises(KeyError):
        guard(job)

    assert [value("probboard_database_errors_total", kind) for kind in kinds] == before


# -- the refresher ------------------------------------------------------------------------------


def test_a_successful_tick_is_counted_and_its_delay_observed() -> None:
    boards = value("probboard_refresher_boards_total")
    delays = value("probboard_refresher_publish_delay_seconds_count")
    failures = value("probboard_refresher_publish_failures_total")
    bus = MemoryBoardBus()
    refresher = Refresher(
        SimulatedSource(parse_symbols("BTC"), seed=7), bus, 500, clock=lambda: BOUNDARY + 1.0
    )

    assert refresher.tick() is True

    assert bus.latest() is not None
    assert value("probboard_refresher_boards_total") == boards + 1
    assert value("probboard_refresher_publish_delay_seconds_count") == delays + 1
    assert value("probboard_refresher_publish_failures_total") == failures


class _BrokenSource:
    name = "broken"

    def winners(self) -> dict[str, bool]:
        return {}

    def rows(self, now: float) -> list[BoardRow]:
        raise RuntimeError("feed down")


def test_a_failing_tick_is_counted_as_a_publish_failure() -> None:
    boards = value("probboard_refresher_boards_total")
    failures = value("probboard_refresher_publish_failures_total")
    bus = MemoryBoardBus()
    refresher = Refresher(_BrokenSource(), bus, 500, clock=lambda: BOUNDARY + 1.0)

    assert refresher.tick() is False
    assert refresher.tick() is False

    assert bus.latest() is None
    assert value("probboard_refresher_publish_failures_total") == failures + 2
    assert value("probboard_refresher_boards_total") == boards


def test_serve_on_port_zero_is_off() -> None:
    assert serve(0) is False


def test_serve_on_a_taken_port_logs_and_returns_false(caplog: pytest.LogCaptureFixture) -> None:
    port = free_port()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        with caplog.at_level(logging.WARNING, logger="app.metrics.refresher"):
            assert serve(port) is False

    assert any(
        record.levelno == logging.WARNING and str(port) in record.getMessage()
        for record in caplog.records
    ), caplog.text


def test_an_ipv4_mapped_allow_list_admits_the_ipv4_peer(tmp_path: Path) -> None:
    """``::ffff:127.0.0.1`` is read as ``127.0.0.1/32``: peers are normalised to IPv4, so the
    mapped network as written would never match (the review of issue 46)."""
    client = app_with(tmp_path, METRICS_ALLOW="::ffff:127.0.0.1").test_client()

    admitted(client, "127.0.0.1")
    admitted(client, "::ffff:127.0.0.1")
    refused(client, OUTSIDER)
