"""The one error module: every failure leaves the service as an ErrorResponse JSON body.

Routing errors (404, 405), errors raised by views (``ApiError``) and unexpected exceptions
all pass through here, so no client ever sees an HTML error page. Headers that carry
meaning, such as ``Allow`` on 405 and ``Retry-After`` on 429, are kept.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping

from flask import Flask, Response, has_request_context, request
from werkzeug.exceptions import HTTPException

log = logging.getLogger(__name__)

# Stable machine-readable codes for the HTTP errors werkzeug raises on its own.
HTTP_CODES: dict[int, str] = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    413: "payload_too_large",
    414: "uri_too_long",
    415: "unsupported_media_type",
    429: "rate_limited",
    431: "request_header_fields_too_large",
    500: "internal_error",
    503: "service_unavailable",
}

# Headers of an HTTPException worth carrying over to the JSON response.
KEPT_HEADERS = ("Allow", "Retry-After", "WWW-Authenticate")


class ApiError(Exception):
    """An error a view raises on purpose; rendered as an ErrorResponse."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        retry_after_ms: int | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.retry_after_ms = retry_after_ms
        self.headers = dict(headers or {})


def error_response(
    status: int,
    code: str,
    message: str,
    retry_after_ms: int | None = None,
    headers: Mapping[str, str] | None = None,
) -> Response:
    """Build an ErrorResponse; a ``retry_after_ms`` also sets ``Retry-After`` in whole seconds."""
    body: dict[str, object] = {"ok": False, "code": code, "error": message}
    if has_request_context():  # the metrics name a refusal by its code
        request.environ[ERROR_KEY] = code
    out_headers = dict(headers or {})
    if retry_after_ms is not None:
        retry_after_ms = max(1, int(retry_after_ms))
        body["retryAfterMs"] = retry_after_ms
        out_headers["Retry-After"] = str(max(1, math.ceil(retry_after_ms / 1000)))
    return json_response(json.dumps(body, separators=(",", ":")), status, out_headers)


ERROR_KEY = "probboard.error"  # the code of the error answered (read by app.metrics.web)
_JSON_HEADERS = (("Content-Type", "application/json"), ("Cache-Control", "no-store"))


def json_response(
    body: str | bytes, status: int = 200, headers: Mapping[str, str] | None = None
) -> Response:
    """The one shape of every API answer: JSON, never cached (``Cache-Control: no-store``)."""
    fixed = _JSON_HEADERS if headers is None else [*_JSON_HEADERS, *headers.items()]
    return Response(body, status, fixed)


def too_many_requests(message: str, retry_after_ms: int, code: str = "rate_limited") -> ApiError:
    """The 429 of every limit (guests, accounts, failed keys, open streams)."""
    return ApiError(429, code, message, retry_after_ms=max(1, retry_after_ms))


# What gunicorn's own refusals mean to a client (it answers them before the app runs).
_GUNICORN_MESSAGES: dict[int, str] = {
    400: "The request could not be parsed as HTTP.",
    403: "The request was refused.",
    414: "The request line is too long.",
    417: "The expectation in the request cannot be met.",
    431: "The request's header fields are too large or too many.",
    500: "Internal server error.",
    501: "The request uses a transfer coding that is not supported.",
}


def gunicorn_error_bytes(status: int, reason: str) -> bytes:
    """A complete HTTP/1.1 ErrorResponse for an error gunicorn answers itself (it closes)."""
    body = json.dumps(
        {
            "ok": False,
            "code": HTTP_CODES.get(status, f"http_{status}"),
            "error": _GUNICORN_MESSAGES.get(status, reason),
        },
        separators=(",", ":"),
    ).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\n"
        "Connection: close\r\n"
        "Content-Type: application/json\r\n"
        "Cache-Control: no-store\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode("latin-1") + body


def api_error_response(error: ApiError) -> Response:
    """The ErrorResponse for ``error`` (what raising it from a view would answer)."""
    return error_response(
        error.status, error.code, error.message, error.retry_after_ms, error.headers
    )


def _handle_http_exception(error: HTTPException) -> Response:
    status = error.code or 500
    code = HTTP_CODES.get(status, f"http_{status}")
    message = error.description or error.name
    if status == 404:
        message = "No such endpoint. See /api/health for a live check."
    elif status == 405:
        message = "Method not allowed on this endpoint."
    headers: dict[str, str] = {}
    original = error.get_response().headers
    for name in KEPT_HEADERS:
        if name in original:
            headers[name] = original[name]
    return error_response(status, code, message, headers=headers)


def _handle_unexpected(error: Exception) -> Response:
    log.exception("unhandled error: %s", type(error).__name__)
    return error_response(500, "internal_error", "Internal server error.")


def init_app(app: Flask) -> None:
    """Register the handlers that turn every error into an ErrorResponse."""
    app.register_error_handler(ApiError, api_error_response)
    app.register_error_handler(HTTPException, _handle_http_exception)
    app.register_error_handler(Exception, _handle_unexpected)
