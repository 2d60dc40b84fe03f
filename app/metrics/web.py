"""The web process's series, and the WSGI layer that counts every request.

``RequestMetrics`` wraps the app (outside Flask): each request is counted by endpoint, status
and plan, and its time to the response's headers goes into a histogram (for the stream,
that is the time to open it). Views say the plan in the environ (``PLAN_KEY``); an error
answer says its code (``ERROR_KEY``), which names a stream refusal's reason.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from prometheus_client import Counter, Gauge, Histogram

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

PLAN_KEY = "probboard.plan"
ERROR_KEY = "probboard.error"  # as app.errors sets it
STREAM_PATH = "/api/probboard/stream"
# Every path the service answers, by name; anything else is "other" (labels stay bounded).
ENDPOINTS = {
    "/api/probboard/latest": "latest",
    STREAM_PATH: "stream",
    "/api/keys/verify": "keys_verify",
    "/api/health": "health",
    "/api/probboard/calibration": "calibration",
    "/api/probboard/trail": "trail",
    "/api/probboard/windows": "windows",
    "/api/openapi.json": "openapi",
    "/metrics": "metrics",
    "/": "page",
}
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
AGE_BUCKETS = (0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 15.0, 30.0, 60.0)

REQUESTS = Counter(
    "probboard_http_requests_total",
    "Requests answered, by endpoint, status and plan.",
    ["endpoint", "status", "plan"],
)
LATENCY = Histogram(
    "probboard_http_request_duration_seconds",
    "Time to the response's headers, by endpoint (for the stream: time to open it).",
    ["endpoint"],
    buckets=LATENCY_BUCKETS,
)
STREAMS_OPEN = Gauge(
    "probboard_streams_open",
    "Streams open now.",
    multiprocess_mode="livesum",
)
STREAM_EVENTS = Counter(
    "probboard_stream_events_total", "Board events handed to open streams for writing."
)
STREAM_DROPS = Counter(
    "probboard_stream_drops_total",
    "Streams ended by the server: slow (a write timed out) or gone (the socket failed).",
    ["reason"],
)
STREAM_REFUSALS = Counter(
    "probboard_stream_refusals_total",
    "Stream requests refused, by the error code answered.",
    ["reason"],
)
BOARD_AGE = Histogram(
    "probboard_board_age_seconds",
    "Age of the board (now minus its ts) when a worker received it and when it served it.",
    ["when"],
    buckets=AGE_BUCKETS,
)
NEWEST_BOARD = Gauge(
    "probboard_board_newest_timestamp_seconds",
    "When the newest board a worker holds was made (its ts): time() minus this is its age.",
    multiprocess_mode="livemax",
)

_latency_by_endpoint = {name: LATENCY.labels(name) for name in {*ENDPOINTS.values(), "other"}}
_AGE_RECEIVED = BOARD_AGE.labels("received")
_AGE_SERVED = BOARD_AGE.labels("served")


def board_served(age_ms: int) -> None:
    """A board ``age_ms`` old was served."""
    _AGE_SERVED.observe(max(0, age_ms) / 1000)


def board_received(ts_ms: int, now_ms: int) -> None:
    """A worker received a board made at ``ts_ms`` from the bus (at ``now_ms``)."""
    _AGE_RECEIVED.observe(max(0, now_ms - ts_ms) / 1000)
    NEWEST_BOARD.set(ts_ms / 1000)


class RequestMetrics:
    """WSGI middleware: counts each request and times it to its headers (see the module)."""

    def __init__(self, app: WSGIApplication) -> None:
        self.app = app
        # The counter of each (endpoint, status, plan) seen, looked up once (a hot path).
        self._counters: dict[tuple[str, str, str], Any] = {}

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        """Serve ``environ``, counting the answer when its headers go out."""
        started = time.perf_counter()
        endpoint = ENDPOINTS.get(environ.get("PATH_INFO", ""), "other")

        def start(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            code = status[:3]
            labels = (endpoint, code, environ.get(PLAN_KEY, "none"))
            counter = self._counters.get(labels)
            if counter is None:
                counter = self._counters[labels] = REQUESTS.labels(*labels)
            counter.inc()
            _latency_by_endpoint[endpoint].observe(time.perf_counter() - started)
            if endpoint == "stream" and code != "200":
                STREAM_REFUSALS.labels(environ.get(ERROR_KEY, f"http_{code}")).inc()
            return start_response(status, headers, exc_info)

        return self.app(environ, start)
