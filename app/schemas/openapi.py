"""The OpenAPI 3.1 document, generated with apispec from the marshmallow schemas.

The four endpoints of the interface exactly as it gives them (records, both key schemes,
every error answer), and the endpoints Probboard adds, each marked ``x-probboard-extension``.
Built once per process, on first request (apispec is loaded only then).
"""

from __future__ import annotations

from typing import Any

from apispec import APISpec
from apispec.ext.marshmallow import MarshmallowPlugin

from app.schemas.board import BoardResponseSchema
from app.schemas.calibration import CalibrationResponseSchema
from app.schemas.error import ErrorResponseSchema
from app.schemas.health import HealthResponseSchema
from app.schemas.keys import KeyVerificationResponseSchema

VERSION = "1.0.0"  # the interface's version
EXTENSION = "x-probboard-extension"
KEY_SCHEMES: list[dict[str, list[str]]] = [{"ApiKeyHeader": []}, {"BearerAuth": []}]

# Each error answer: its description, and whether it carries Retry-After.
_ERRORS: dict[str, tuple[str, bool]] = {
    "400": ("The request could not be parsed (a malformed request line or header).", False),
    "401": ("The key (or the credentials presented) is missing or invalid.", False),
    "403": ("The caller lacks the entitlement (or the address is not allowed).", False),
    "429": ("Over a limit; `Retry-After` gives the seconds to wait.", True),
    "503": ("A dependency cannot answer right now; retry after `Retry-After` seconds.", True),
}


def _answer(description: str, media: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"description": description, "content": {media: {"schema": schema}}}


def _json(schema: str, description: str) -> dict[str, Any]:
    return _answer(description, "application/json", {"$ref": f"#/components/schemas/{schema}"})


def _text(media: str, description: str) -> dict[str, Any]:
    return _answer(description, media, {"type": "string"})


def _errors(*statuses: str) -> dict[str, Any]:
    answers = {}
    for status in statuses:
        description, retry = _ERRORS[status]
        answer = _json("ErrorResponse", description)
        if retry:
            answer["headers"] = {"Retry-After": {"$ref": "#/components/headers/RetryAfter"}}
        answers[status] = answer
    return answers


def _operation(
    summary: str,
    ok: dict[str, Any],
    errors: tuple[str, ...],
    security: list[dict[str, list[str]]] | None = None,
    extension: bool = False,
) -> dict[str, Any]:
    operation: dict[str, Any] = {"summary": summary, "responses": {"200": ok, **_errors(*errors)}}
    operation["security"] = security if security is not None else []
    if extension:
        operation[EXTENSION] = True
    return {"get": operation}


def build_spec() -> dict[str, Any]:
    """The whole document as a dict (``GET /api/openapi.json`` serves it)."""
    spec = APISpec(
        title="Probboard",
        version=VERSION,
        openapi_version="3.1.0",
        plugins=[MarshmallowPlugin()],
        info={
            "description": (
                "Short-horizon probabilities that a coin (SYMBOLS) goes up or down in the current "
                "5-minute window, next to the Polymarket UP and DOWN prices. Operations "
                f"marked `{EXTENSION}` are Probboard's additions to the interface."
            )
        },
    )
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
    spec.components.header(
        "RetryAfter",
        {
            "description": "Seconds to wait, at least 1.",
            "schema": {"type": "integer", "minimum": 1},
        },
    )
    for name, schema in (
        ("HealthResponse", HealthResponseSchema),
        ("KeyVerificationResponse", KeyVerificationResponseSchema),
        ("BoardResponse", BoardResponseSchema),
        ("ErrorResponse", ErrorResponseSchema),
        ("CalibrationResponse", CalibrationResponseSchema),
    ):
        spec.components.schema(name, schema=schema)

    spec.path(
        "/api/health",
        operations=_operation(
            "Liveness and readiness, and the refresh interval per plan.",
            _json("HealthResponse", "The service answers."),
            (),
        ),
    )
    spec.path(
        "/api/keys/verify",
        operations=_operation(
            "Check an API key: its owner, plan and masked form.",
            _json("KeyVerificationResponse", "The key is valid."),
            ("400", "401", "429", "503"),
            KEY_SCHEMES,
        ),
    )
    spec.path(
        "/api/probboard/latest",
        operations=_operation(
            "The full board under the caller's plan (guest without credentials).",
            _json("BoardResponse", "The board."),
            ("400", "401", "429", "503"),
            [{}, *KEY_SCHEMES, {"SessionCookie": []}],
        ),
    )
    stream_ok = _text(
        "text/event-stream",
        (
            "Server-Sent Events: `retry:` first, then `event: board` with `id:` (the board's "
            "seq) and a serialized BoardResponse in `data:`, for every new board; comments "
            "keep the connection alive. Send `Last-Event-ID` to get the boards missed."
        ),
    )
    spec.path(
        "/api/probboard/stream",
        operations=_operation(
            "The board, pushed as it changes (vip_pro).",
            stream_ok,
            ("400", "401", "403", "429", "503"),
            KEY_SCHEMES,
        ),
    )
    spec.path(
        "/api/probboard/calibration",
        operations=_operation(
            "The model's track record: scores by time left, reliability of model and market.",
            _json("CalibrationResponse", "The track record."),
            ("503",),
            extension=True,
        ),
    )
    spec.path(
        "/api/openapi.json",
        operations=_operation(
            "This document.",
            _answer("The OpenAPI document.", "application/json", {"type": "object"}),
            (),
            extension=True,
        ),
    )
    spec.path(
        "/metrics",
        operations=_operation(
            "Prometheus metrics, for the addresses in METRICS_ALLOW only.",
            _text("text/plain", "The Prometheus text format."),
            ("403",),
            extension=True,
        ),
    )
    spec.path(
        "/",
        operations=_operation(
            "The board as a web page.",
            _text("text/html", "The page."),
            (),
            extension=True,
        ),
    )
    return spec.to_dict()
