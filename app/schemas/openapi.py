"""The OpenAPI 3.1 document, generated with apispec from the marshmallow schemas.

The four endpoints of the interface exactly as it gives them (records, both key schemes,
every error answer), and what Probboard adds, each marked ``x-probboard-extension``: the
other endpoints, the ``symbol`` parameters, every error status with its ``code`` values
(``openapi_errors.py``), the response headers (request id, rate limits, ``Retry-After``),
``Last-Event-ID`` and the row's extra fields. The ``symbol`` patterns name the served
markets, so the document is built per ``SYMBOLS``, once per process, on first request
(apispec is loaded only then).

This module holds the paths, one entry per endpoint, and the document around them; the
answers and components they are built from are in ``openapi_answers.py``, the shared
parameters in ``openapi_parameters.py``, the error answers in ``openapi_errors.py`` and the
windows export's in ``openapi_windows.py``.
"""

from __future__ import annotations

from typing import Any

from apispec import APISpec
from apispec.ext.marshmallow import MarshmallowPlugin

from app.markets import Market, Span
from app.schemas import EXTENSION
from app.schemas.openapi_alerts import alerts_paths
from app.schemas.openapi_answers import (
    KEY_SCHEMES,
    answer,
    components,
    header_ref,
    json_ok,
    ok_headers,
    operation,
    ref,
    text_ok,
)
from app.schemas.openapi_parameters import (
    LAST_EVENT_ID,
    PERIOD,
    symbol_parameter,
    window_parameter,
)
from app.schemas.openapi_windows import WINDOWS_SUMMARY, windows_ok, windows_parameters

# Re-exported: the parameters are named from here (``app.api.symbols``), as before the split.
__all__ = ["VERSION", "build_spec", "symbol_parameter", "window_parameter"]

VERSION = "1.0.0"  # the interface's version


STREAM_OK = (
    "Server-Sent Events: `retry:` first, then `event: board` with `id:` (the board's seq) and "
    "a serialized BoardResponse in `data:` (with `?symbol=`, only those rows), for every new "
    "board; comments keep the connection alive. Send `Last-Event-ID` to get the boards missed."
)


def _paths(spec: APISpec, markets: tuple[Market, ...], windows: tuple[Span, ...]) -> None:
    spec.path(
        "/api/health",
        operations=operation(
            "/api/health",
            "Liveness and readiness, and the refresh interval per plan.",
            json_ok("HealthResponse", "The service answers."),
        ),
    )
    spec.path(
        "/api/keys/verify",
        operations=operation(
            "/api/keys/verify",
            "Check an API key: its owner, plan and masked form.",
            json_ok("KeyVerificationResponse", "The key is valid."),
            KEY_SCHEMES,
        ),
    )
    spec.path(
        "/api/probboard/latest",
        operations=operation(
            "/api/probboard/latest",
            "The full board under the caller's plan (guest without credentials), or the rows "
            "`symbol` names.",
            json_ok("BoardResponse", "The board.", limited=True),
            [{}, *KEY_SCHEMES, {"SessionCookie": []}],
            parameters=[symbol_parameter(markets, several=True), window_parameter(windows)],
        ),
    )
    spec.path(
        "/api/probboard/stream",
        operations=operation(
            "/api/probboard/stream",
            "The board, pushed as it changes (vip_pro).",
            text_ok("text/event-stream", STREAM_OK),
            KEY_SCHEMES,
            parameters=[
                symbol_parameter(markets, several=True),
                window_parameter(windows),
                LAST_EVENT_ID,
            ],
        ),
    )
    spec.path(
        "/api/probboard/calibration",
        operations=operation(
            "/api/probboard/calibration",
            "The model's track record: scores by time left, reliability of model and market.",
            json_ok("CalibrationResponse", "The track record."),
            extension=True,
            parameters=[
                symbol_parameter(markets, several=False),
                window_parameter(windows, board=False),
                PERIOD,
            ],
        ),
    )
    spec.path(
        "/api/probboard/windows",
        operations=operation(
            "/api/probboard/windows",
            WINDOWS_SUMMARY,
            windows_ok(ref("WindowsResponse"), ok_headers(True), header_ref),
            extension=True,
            parameters=[
                symbol_parameter(markets, several=False),
                window_parameter(windows, board=False),
                *windows_parameters(),
            ],
        ),
    )
    spec.path(
        "/api/probboard/trail",
        operations=operation(
            "/api/probboard/trail",
            "The current window's path of each market (or of those `symbol` names), of one "
            "window kind (`window`), one point per plan refresh interval (never finer than "
            "the kind's own step), for a page opened mid-window; limited as a board read.",
            json_ok("TrailResponse", "The paths.", limited=True),
            [{}, *KEY_SCHEMES, {"SessionCookie": []}],
            extension=True,
            parameters=[symbol_parameter(markets, several=True), window_parameter(windows)],
        ),
    )
    spec.path(
        "/api/openapi.json",
        operations=operation(
            "/api/openapi.json",
            "This document.",
            answer(
                "The OpenAPI document.", "application/json", {"type": "object"}, ok_headers(False)
            ),
            extension=True,
        ),
    )
    spec.path(
        "/metrics",
        operations=operation(
            "/metrics",
            "Prometheus metrics, for the addresses in METRICS_ALLOW only.",
            text_ok("text/plain", "The Prometheus text format."),
            extension=True,
        ),
    )
    spec.path(
        "/",
        operations=operation(
            "/", "The board as a web page.", text_ok("text/html", "The page."), extension=True
        ),
    )


def build_spec(markets: tuple[Market, ...], windows: tuple[Span, ...]) -> dict[str, Any]:
    """The whole document for a service serving ``markets`` over ``windows``
    (``GET /api/openapi.json``)."""
    spec = APISpec(
        title="Probboard",
        version=VERSION,
        openapi_version="3.1.0",
        plugins=[MarshmallowPlugin()],
        info={
            "description": (
                "Short-horizon probabilities that a coin (SYMBOLS) goes up or down in the current "
                "5-minute window, next to the Polymarket UP and DOWN prices. Operations, "
                f"parameters and fields marked `{EXTENSION}` are Probboard's additions to the "
                "interface. Every error is an ErrorResponse with a stable `code`; a path not "
                "listed answers 404 `not_found`, an unexpected failure 500 `internal_error`."
            )
        },
    )
    components(spec)
    _paths(spec, markets, windows)
    alerts_paths(spec, markets, windows)
    return spec.to_dict()
