"""The OpenAPI document's building blocks: the response headers, a path's answers (its 200 and
every error it gives, ``openapi_errors.py``), one operation, and the shared components (the
security schemes, the headers, the record schemas)."""

from __future__ import annotations

from typing import Any

from apispec import APISpec

from app.schemas import EXTENSION
from app.schemas.board import BoardResponseSchema
from app.schemas.calibration import CalibrationResponseSchema
from app.schemas.error import ErrorResponseSchema
from app.schemas.health import HealthResponseSchema
from app.schemas.keys import KeyVerificationResponseSchema
from app.schemas.openapi_errors import STATUSES, errors_of
from app.schemas.trail import TrailResponseSchema
from app.schemas.windows import WindowsResponseSchema

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


def header_ref(name: str, required: bool) -> dict[str, Any]:
    """A reference to the header component ``name`` (its optional twin unless ``required``)."""
    # A header object may not be a $ref and also say "required": the component says it.
    return {"$ref": HEADERS + name + ("" if required else "-optional")}


def answer(
    description: str, media: str, schema: dict[str, Any], headers: dict[str, Any]
) -> dict[str, Any]:
    """One answer: ``description``, a body of ``media`` and ``schema``, and ``headers``."""
    return {"description": description, "headers": headers, "content": {media: {"schema": schema}}}


def ref(schema: str) -> dict[str, Any]:
    """A reference to the schema component ``schema``."""
    return {"$ref": f"#/components/schemas/{schema}"}


def ok_headers(limited: bool) -> dict[str, Any]:
    """A success's headers: the request id, and the rate limits' when ``limited``."""
    headers = {"X-Request-ID": header_ref("X-Request-ID", True)}
    if limited:  # not for admin, nor while the counters cannot be read
        headers |= {name: header_ref(name, False) for name in RATE_LIMIT_HEADERS}
    return headers


def json_ok(schema: str, description: str, limited: bool = False) -> dict[str, Any]:
    """A JSON success of the record ``schema``."""
    return answer(description, "application/json", ref(schema), ok_headers(limited))


def text_ok(media: str, description: str) -> dict[str, Any]:
    """A text success of type ``media``."""
    return answer(description, media, {"type": "string"}, ok_headers(False))


def _errors(path: str) -> dict[str, Any]:
    answers = {}
    for status, codes in errors_of(path).items():
        kind = STATUSES[status]
        headers = {"X-Request-ID": header_ref("X-Request-ID", not kind.from_gunicorn)}
        if kind.retry:
            headers["Retry-After"] = header_ref("Retry-After", True)
        if status == 429 and path in (
            "/api/probboard/latest",
            "/api/probboard/windows",
            "/api/keys/verify",
        ):
            headers |= {name: header_ref(name, False) for name in RATE_LIMIT_HEADERS}
        if kind.challenge:
            headers["WWW-Authenticate"] = header_ref("WWW-Authenticate", True)
        if kind.allow:
            headers["Allow"] = header_ref("Allow", True)
        # The ErrorResponse, its `code` held to the values this endpoint answers with.
        schema = ref("ErrorResponse") | {"properties": {"code": {"enum": list(codes)}}}
        listed = ", ".join(f"`{code}`" for code in codes)
        description = f"{kind.description} Codes: {listed}."
        answers[str(status)] = answer(description, "application/json", schema, headers)
    return answers


def operation(
    path: str,
    summary: str,
    ok: dict[str, Any],
    security: list[dict[str, list[str]]] | None = None,
    extension: bool = False,
    parameters: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The GET operation of ``path``: its 200 ``ok`` and every error it answers with."""
    entry: dict[str, Any] = {"summary": summary, "responses": {"200": ok, **_errors(path)}}
    entry["security"] = security if security is not None else []
    if parameters:
        entry["parameters"] = parameters
    if extension:
        entry[EXTENSION] = True
    return {"get": entry}


def components(spec: APISpec) -> None:
    """Add the security schemes, the headers and the record schemas to ``spec``."""
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
