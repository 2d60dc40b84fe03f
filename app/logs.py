"""The one configured logger: readable lines or JSON lines, a request id, no secrets.

Every record carries the request id of the request it was logged in (``-`` outside one).
A redaction filter masks anything that looks like an API key, a bearer token, a session
token or a cookie value, so a careless ``log.info("%s", headers)`` cannot leak one.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
import uuid

from flask import Flask, Response, g, has_request_context, request

from app.config import Settings

REQUEST_ID_HEADER = "X-Request-ID"
_VALID_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
# (pattern, replacement) pairs, applied in order.
_SECRETS = (
    (re.compile(r"\b(pbk_|pbs_)[A-Za-z0-9_-]+"), r"\1[redacted]"),
    (re.compile(r"(?i)\b(bearer\s+)[^\s\"',;]+"), r"\1[redacted]"),
    (
        re.compile(
            r"(?i)\b((?:x-api-key|authorization|cookie|set-cookie|probboard_session)"
            r"[\"']?\s*[:=]\s*[\"']?)(?!\[redacted\])[^\s\"',;]+"
        ),
        r"\1[redacted]",
    ),
)
_HANDLER_NAME = "probboard"


def redact(text: str) -> str:
    """``text`` with key-, token- and cookie-like substrings masked."""
    for pattern, replacement in _SECRETS:
        text = pattern.sub(replacement, text)
    return text


def current_request_id() -> str:
    """The id of the request being served, or ``-``."""
    if has_request_context():
        return str(g.get("request_id", "-"))
    return "-"


class _ContextFilter(logging.Filter):
    """Adds ``request_id`` and redacts the rendered message."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = current_request_id()
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line."""

    def format(self, record: logging.LogRecord) -> str:
        """Render ``record`` as a JSON line."""
        entry = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "request_id": getattr(record, "request_id", "-"),
            "msg": record.getMessage(),
        }
        if record.exc_info:
            entry["exc"] = redact(self.formatException(record.exc_info))
        return json.dumps(entry)


class TextFormatter(logging.Formatter):
    """Readable lines; tracebacks are redacted too."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s")

    def formatException(self, ei: object) -> str:  # noqa: N802
        """Format a traceback with secrets masked."""
        return redact(super().formatException(ei))  # type: ignore[arg-type]


def configure_logging(settings: Settings) -> None:
    """Install the probboard handler on the root logger (idempotent: replaces our own)."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if handler.get_name() == _HANDLER_NAME:
            root.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(JsonFormatter() if settings.log_format == "json" else TextFormatter())
    handler.addFilter(_ContextFilter())
    root.addHandler(handler)
    root.setLevel(settings.log_level)


def _assign_request_id() -> None:
    incoming = request.headers.get(REQUEST_ID_HEADER, "")
    g.request_id = incoming if _VALID_REQUEST_ID.match(incoming) else uuid.uuid4().hex


def _return_request_id(response: Response) -> Response:
    response.headers[REQUEST_ID_HEADER] = g.get("request_id", "-")
    return response


def init_app(app: Flask, settings: Settings) -> None:
    """Configure logging and give every request an id, echoed in ``X-Request-ID``."""
    configure_logging(settings)
    app.before_request(_assign_request_id)
    app.after_request(_return_request_id)
