"""The OpenAPI 3.1 document, generated with apispec from the marshmallow schemas.

The four endpoints of the interface exactly as it gives them (records, both key schemes,
every error answer), and what Probboard adds, each marked ``x-probboard-extension``: the
other endpoints, the ``symbol`` parameters, every error status with its ``code`` values
(``openapi_errors.py``), the response headers (request id, rate limits, ``Retry-After``),
``Last-Event-ID`` and the row's extra fields. The ``symbol`` patterns name the served
markets, so the document is built per ``SYMBOLS``, once per process, on first request
(apispec is loaded only then).
"""

from __future__ import annotations

from typing import Any

from apispec import APISpec
from apispec.ext.marshmallow import MarshmallowPlugin

from app.calibration.periods import DEFAULT as DEFAULT_PERIOD
from app.calibration.periods import SPANS
from app.markets import Market, Span
from app.schemas import EXTENSION
from app.schemas.board import BoardResponseSchema
from app.schemas.calibration import CalibrationResponseSchema
from app.schemas.error import ErrorResponseSchema
from app.schemas.health import HealthResponseSchema
from app.schemas.keys import KeyVerificationResponseSchema
from app.schemas.openapi_errors import STATUSES, errors_of
from app.schemas.openapi_windows import WINDOWS_SUMMARY, windows_ok, windows_parameters
from app.schemas.trail import TrailResponseSchema
from app.schemas.windows import WindowsResponseSchema

VERSION = "1.0.0"  # the interface's version
KEY_SCHEMES: list[dict[str, list[str]]] = [{"ApiKeyHeader": []}, {"BearerAuth": []}]
HEADERS = "#/components/headers/"
RATE_LIMIT_HEADERS = ("X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset")
_HEADER_TEXTS = {
    "X-Request-ID": "The request's id: the caller's when sane (1-128 of `A-Za-z0-9._:-`), "
    "else a new one; in every log line of the request.",
    "Retry-After": "Seconds to wait, at least 1.",
    "X-RateLimit-Limit": "Requests allowed in the window of the tightest limit.",
    "X-RateLimit-Remaining": "Requests left in that window.",
    "X-RateLimit-Reset": "When that window has room again (unix seconds).",
    "WWW-Authenticate": "The bearer challenge.",
    "Allow": "The methods the path answers.",
    "X-Next-Cursor": "The `cursor` of the next page (absent on the last one).",
}
_HEADER_SCHEMAS: dict[str, dict[str, Any]] = {
    "Retry-After": {"type": "integer", "minimum": 1},
    "X-RateLimit-Limit": {"type": "integer", "minimum": 1},
    "X-RateLimit-Remaining": {"type": "integer", "minimum": 0},
    "X-RateLimit-Reset": {"type": "integer", "minimum": 0},
}


def _header_ref(name: str, required: bool) -> dict[str, Any]:
    # A header object may not be a $ref and also say "required": the component says it.
    return {"$ref": HEADERS + name + ("" if required else "-optional")}


def _answer(
    description: str, media: str, schema: dict[str, Any], headers: dict[str, Any]
) -> dict[str, Any]:
    return {"description": description, "headers": headers, "content": {media: {"schema": schema}}}


def _ref(schema: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{schema}"}


def _ok_headers(limited: bool) -> dict[str, Any]:
    headers = {"X-Request-ID": _header_ref("X-Request-ID", True)}
    if limited:  # not for admin, nor while the counters cannot be read
        headers |= {name: _header_ref(name, False) for name in RATE_LIMIT_HEADERS}
    return headers


def _json(schema: str, description: str, limited: bool = False) -> dict[str, Any]:
    return _answer(description, "application/json", _ref(schema), _ok_headers(limited))


def _text(media: str, description: str) -> dict[str, Any]:
    return _answer(description, media, {"type": "string"}, _ok_headers(False))


def _errors(path: str) -> dict[str, Any]:
    answers = {}
    for status, codes in errors_of(path).items():
        kind = STATUSES[status]
        headers = {"X-Request-ID": _header_ref("X-Request-ID", not kind.from_gunicorn)}
        if kind.retry:
            headers["Retry-After"] = _header_ref("Retry-After", True)
        if status == 429 and path in (
            "/api/probboard/latest",
            "/api/probboard/windows",
            "/api/keys/verify",
        ):
            headers |= {name: _header_ref(name, False) for name in RATE_LIMIT_HEADERS}
        if kind.challenge:
            headers["WWW-Authenticate"] = _header_ref("WWW-Authenticate", True)
        if kind.allow:
            headers["Allow"] = _header_ref("Allow", True)
        # The ErrorResponse, its `code` held to the values this endpoint answers with.
        schema = _ref("ErrorResponse") | {"properties": {"code": {"enum": list(codes)}}}
        listed = ", ".join(f"`{code}`" for code in codes)
        description = f"{kind.description} Codes: {listed}."
        answers[str(status)] = _answer(description, "application/json", schema, headers)
    return answers


def _operation(
    path: str,
    summary: str,
    ok: dict[str, Any],
    security: list[dict[str, list[str]]] | None = None,
    extension: bool = False,
    parameters: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    operation: dict[str, Any] = {"summary": summary, "responses": {"200": ok, **_errors(path)}}
    operation["security"] = security if security is not None else []
    if parameters:
        operation["parameters"] = parameters
    if extension:
        operation[EXTENSION] = True
    return {"get": operation}


def _name_pattern(markets: tuple[Market, ...]) -> str:
    """Any served symbol in any case (JSON Schema patterns have no flags)."""
    names = ("".join(f"[{c.upper()}{c.lower()}]" for c in m.symbol) for m in markets)
    return f"(?:{'|'.join(names)})"


def symbol_parameter(markets: tuple[Market, ...], several: bool) -> dict[str, Any]:
    """``?symbol=``: exactly the values ``app.api.symbols`` accepts (anything else: 400)."""
    name = _name_pattern(markets)
    served = ", ".join(m.symbol for m in markets)
    if several:
        pattern = f"^{name}(?:,{name})*$"
        text = (
            f"Only these rows: served symbols ({served}), comma-separated, case-insensitive; "
            "answered in board order, a name given twice once. Without it, the full board. "
            "Anything else (empty, unknown, spaces, the parameter twice) is 400 "
            "`invalid_symbol`."
        )
    else:
        pattern = f"^{name}$"
        text = (
            f"The market: one served symbol ({served}), case-insensitive; the first when "
            "absent. Anything else is 400 `invalid_symbol`."
        )
    return {
        "name": "symbol",
        "in": "query",
        "required": False,
        "description": text,
        "schema": {"type": "string", "pattern": pattern},
        EXTENSION: True,
    }


def window_parameter(windows: tuple[Span, ...], board: bool = True) -> dict[str, Any]:
    """``?window=``: exactly the values ``app.api.window_param`` accepts (else: 400); of the
    board (``/latest``, the stream) or of the track record (``board=False``)."""
    names = "|".join("".join(f"[{c.upper()}{c.lower()}]" for c in s.name) for s in windows)
    served = ", ".join(s.name for s in windows)
    what, as_before = "board", "exactly as the interface describes it"
    if not board:
        what = "track record"
        as_before = "exactly as before there were others (each length's windows apart, scored "
        as_before += "at its own checkpoints: 15m's from 870 s left)"
    return {
        "name": "window",
        "in": "query",
        "required": False,
        "description": (
            f"The window's {what}: one served window ({served}), case-insensitive. Without "
            f"it, the 5-minute {what} {as_before} (the first served window when 5m is not "
            "served). Anything else is 400 `invalid_window`."
        ),
        "schema": {"type": "string", "pattern": f"^(?:{names})$"},
        EXTENSION: True,
    }


PERIOD = {
    "name": "period",
    "in": "query",
    "required": False,
    "description": (
        "The windows scored: those that started within the last `24h`, `7d` or `30d`, or "
        "`all` (the default). Anything else, or the parameter twice, is 400 `invalid_period`."
    ),
    "schema": {"type": "string", "enum": list(SPANS), "default": DEFAULT_PERIOD},
    EXTENSION: True,
}


LAST_EVENT_ID = {
    "name": "Last-Event-ID",
    "in": "header",
    "required": False,
    "description": (
        "The id of the last event received: a board's seq within the last 2 minutes gets "
        "every board published after it first; any other value, the current board."
    ),
    "schema": {"type": "string"},
}


def _components(spec: APISpec) -> None:
    spec.components.security_scheme(
        "ApiKeyHeader", {"type": "apiKey", "in": "header", "name": "X-API-Key"}
    )
    spec.components.security_scheme("BearerAuth", {"type": "http", "scheme": "bearer"})
    spec.components.security_scheme(
        "SessionCookie",
        {
            "type": "apiKey",
            "in": "cookie",
            "name": "probboard_session",
            "description": f"A session made by the operator CLI ({EXTENSION}).",
        },
    )
    for name, text in _HEADER_TEXTS.items():
        header = {"description": text, "schema": _HEADER_SCHEMAS.get(name, {"type": "string"})}
        spec.components.header(name, header | {"required": True})
        spec.components.header(name + "-optional", header | {"required": False})
    for name, record in (
        ("HealthResponse", HealthResponseSchema),
        ("KeyVerificationResponse", KeyVerificationResponseSchema),
        ("BoardResponse", BoardResponseSchema),
        ("ErrorResponse", ErrorResponseSchema),
        ("CalibrationResponse", CalibrationResponseSchema),
        ("WindowsResponse", WindowsResponseSchema),
        ("TrailResponse", TrailResponseSchema),
    ):
        spec.components.schema(name, schema=record)


STREAM_OK = (
    "Server-Sent Events: `retry:` first, then `event: board` with `id:` (the board's seq) and "
    "a serialized BoardResponse in `data:` (with `?symbol=`, only those rows), for every new "
    "board; comments keep the connection alive. Send `Last-Event-ID` to get the boards missed."
)


def _paths(spec: APISpec, markets: tuple[Market, ...], windows: tuple[Span, ...]) -> None:
    spec.path(
        "/api/health",
        operations=_operation(
            "/api/health",
            "Liveness and readiness, and the refresh interval per plan.",
            _json("HealthResponse", "The service answers."),
        ),
    )
    spec.path(
        "/api/keys/verify",
        operations=_operation(
            "/api/keys/verify",
            "Check an API key: its owner, plan and masked form.",
            _json("KeyVerificationResponse", "The key is valid."),
            KEY_SCHEMES,
        ),
    )
    spec.path(
        "/api/probboard/latest",
        operations=_operation(
            "/api/probboard/latest",
            "The full board under the caller's plan (guest without credentials), or the rows "
            "`symbol` names.",
            _json("BoardResponse", "The board.", limited=True),
            [{}, *KEY_SCHEMES, {"SessionCookie": []}],
            parameters=[symbol_parameter(markets, several=True), window_parameter(windows)],
        ),
    )
    spec.path(
        "/api/probboard/stream",
        operations=_operation(
            "/api/probboard/stream",
            "The board, pushed as it changes (vip_pro).",
            _text("text/event-stream", STREAM_OK),
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
        operations=_operation(
            "/api/probboard/calibration",
            "The model's track record: scores by time left, reliability of model and market.",
            _json("CalibrationResponse", "The track record."),
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
        operations=_operation(
            "/api/probboard/windows",
            WINDOWS_SUMMARY,
            windows_ok(_ref("WindowsResponse"), _ok_headers(True), _header_ref),
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
        operations=_operation(
            "/api/probboard/trail",
            "The current window's path of each market (or of those `symbol` names), one "
            "point per plan refresh interval, for a page opened mid-window; limited as a "
            "board read.",
            _json("TrailResponse", "The paths.", limited=True),
            [{}, *KEY_SCHEMES, {"SessionCookie": []}],
            extension=True,
            parameters=[symbol_parameter(markets, several=True)],
        ),
    )
    spec.path(
        "/api/openapi.json",
        operations=_operation(
            "/api/openapi.json",
            "This document.",
            _answer(
                "The OpenAPI document.", "application/json", {"type": "object"}, _ok_headers(False)
            ),
            extension=True,
        ),
    )
    spec.path(
        "/metrics",
        operations=_operation(
            "/metrics",
            "Prometheus metrics, for the addresses in METRICS_ALLOW only.",
            _text("text/plain", "The Prometheus text format."),
            extension=True,
        ),
    )
    spec.path(
        "/",
        operations=_operation(
            "/", "The board as a web page.", _text("text/html", "The page."), extension=True
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
    _components(spec)
    _paths(spec, markets, windows)
    return spec.to_dict()
