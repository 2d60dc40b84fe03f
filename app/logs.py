"""The one configured logger: readable lines or JSON lines, a request id, no secrets.

Every record carries the request id of the request it was logged in (``-`` outside one).
A redaction filter masks anything that looks like an API key, a bearer token, a session
token or a cookie value, so a careless ``log.info("%s", headers)`` cannot leak one.
"""

from __future__ import annotations

import itertools
import json
import logging
import re
import secrets
import sys
import threading
import time
from collections.abc import Callable

from flask import Flask, Response, current_app, g, has_request_context, request

from app.config import Settings

REQUEST_ID_HEADER = "X-Request-ID"
_VALID_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
# A key or session token wherever it stands (after a letter, a digit, "%20" or "+"), its
# underscore and body characters possibly URL-encoded ("pbk%5F...", "%2D").
_TOKEN = re.compile(r"(?i)(pbk|pbs)(_|%5f)(?:[a-z0-9_-]|%[0-9a-f]{2})+")
# An Authorization scheme and its credentials, the space possibly encoded ("Bearer%20...").
_SCHEME = re.compile(r"(?i)\b(bearer|basic|token|digest)(\s+|%20|\+)[^\s\"',;&]+")
# A sensitive name, a separator (header, dict, JSON, tuple or k=v form), then the value: a
# quoted string up to its closing quote, or everything to the end of the line.
_SENSITIVE = re.compile(
    r"(?i)\b(x-api-key|proxy-authorization|authorization|set-cookie|cookie|probboard_session)"
    r"([\"']?\s*[:=,]\s*)(?:([\"'])(.*?)\3|([^\n]*))"
)
_HANDLER_NAME = "probboard"
REQUEST_IDS_KEY = "probboard.request_ids"
REPEAT_INTERVAL_S = 10.0


def _mask_sensitive(match: re.Match[str]) -> str:
    quote = match.group(3) or ""
    return f"{match.group(1)}{match.group(2)}{quote}[redacted]{quote}"


def redact(text: str) -> str:
    """``text`` with key-, token-, credential- and cookie-like values masked."""
    text = _SENSITIVE.sub(_mask_sensitive, text)
    text = _SCHEME.sub(lambda m: f"{m.group(1)}{m.group(2)}[redacted]", text)
    return _TOKEN.sub(r"\1\2[redacted]", text)


def current_request_id() -> str:
    """The id of the request being served (the caller's valid one, or a new one), or ``-``.

    Assigned on first use, so every response carries one whichever hook answered it
    (a blocked address is refused before any other hook runs).
    """
    if not has_request_context():
        return "-"
    request_id: str | None = g.get("request_id")
    if request_id is None:
        incoming = request.headers.get(REQUEST_ID_HEADER, "")
        if _VALID_REQUEST_ID.fullmatch(incoming):
            request_id = incoming
        else:
            new_id = current_app.extensions.get(REQUEST_IDS_KEY)
            request_id = new_id() if new_id is not None else secrets.token_hex(16)
        g.request_id = request_id
    return request_id


class RepeatFilter(logging.Filter):
    """Lets one record of a kind through per interval and counts the rest.

    A flood of refusals from one client would otherwise be a flood of log lines; the line
    that ends a quiet interval says how many were held back.
    """

    def __init__(self, interval_s: float = REPEAT_INTERVAL_S) -> None:
        super().__init__()
        self._interval_s = interval_s
        self._state: dict[str, tuple[float, int]] = {}  # template -> (last shown, held)
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        """True for the first record of its kind in an interval (with the count held back)."""
        kind = str(record.msg)
        now = time.monotonic()
        with self._lock:
            shown_at, held = self._state.get(kind, (-self._interval_s, 0))
            if now - shown_at < self._interval_s:
                self._state[kind] = (shown_at, held + 1)
                return False
            self._state[kind] = (now, 0)
        if held:
            record.msg = f"{record.getMessage()} ({held} more like this in the last interval)"
            record.args = None
        return True


def limit_repeats(*logger_names: str) -> None:
    """Install one ``RepeatFilter`` on each named logger (idempotent)."""
    for name in logger_names:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RepeatFilter) for f in logger.filters):
            logger.addFilter(RepeatFilter())


def _install_record_factory() -> None:
    """Every record, whichever handler sees it, gets a request id and redacted text."""
    base = logging.getLogRecordFactory()
    if getattr(base, "probboard", False):
        return
    plain = logging.Formatter()

    def factory(*args: object, **kwargs: object) -> logging.LogRecord:
        record = base(*args, **kwargs)
        record.request_id = current_request_id()
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        if record.exc_info:
            record.exc_text = redact(plain.formatException(record.exc_info))
        return record

    factory.probboard = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(factory)


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
            entry["exc"] = record.exc_text or redact(self.formatException(record.exc_info))
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
    _install_record_factory()
    root = logging.getLogger()
    for handler in list(root.handlers):
        if handler.get_name() == _HANDLER_NAME:
            root.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(JsonFormatter() if settings.log_format == "json" else TextFormatter())
    root.addHandler(handler)
    root.setLevel(settings.log_level)


def _request_ids() -> Callable[[], str]:
    """Unique ids without a system call per request: 32 hex digits, a random half per app
    and a counter (uuid4 per request cost a read of the system's random source each).

    Each gunicorn worker builds its own app after the fork, so workers never share a prefix.
    """
    prefix = secrets.token_hex(8)
    counter = itertools.count(1)
    return lambda: f"{prefix}{next(counter):016x}"


def _request_id_hooks(app: Flask) -> None:
    app.extensions[REQUEST_IDS_KEY] = _request_ids()

    def echo(response: Response) -> Response:
        response.headers[REQUEST_ID_HEADER] = current_request_id()
        return response

    app.after_request(echo)


def init_app(app: Flask, settings: Settings) -> None:
    """Configure logging and give every request an id, echoed in ``X-Request-ID``."""
    configure_logging(settings)
    _request_id_hooks(app)
