"""The one configured logger: readable lines or JSON lines, a request id, no secrets.

Used by every process (web, refresher, CLI); it imports no web framework. Every record
carries the request id of the request it was logged in (``-`` outside one; the web app
supplies the id through ``set_request_id_source``).
A redaction filter masks anything that looks like an API key, a bearer token, a session
token or a cookie value, so a careless ``log.info("%s", headers)`` cannot leak one. Keys and
session tokens are found in the percent-decoded text too (``p%62k_...`` is ``pbk_...``) and
masked where they stand in the line as written.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import threading
import time
from collections.abc import Callable

from app.config import Settings

# A key or session token wherever it stands (after a letter, a digit, "%20" or "+"), matched
# on the percent-decoded text when the line has a "%" (see _mask_tokens).
_TOKEN = re.compile(r"(?i)(?P<prefix>pbk|pbs)_(?P<body>[a-z0-9_-]+)")
_ESCAPE = re.compile(r"%([0-9a-fA-F]{2})")
# Decoded this many times at most: a key encoded twice over (a client that quotes an already
# quoted URL) is still found, and a line of "%252525..." cannot make it loop per level.
_DECODINGS = 3
# An Authorization scheme and its credentials, the space possibly encoded ("Bearer%20...").
_SCHEME = re.compile(r"(?i)\b(bearer|basic|token|digest)(\s+|%20|\+)[^\s\"',;&]+")
# A sensitive name, a separator (header, dict, JSON, tuple or k=v form), then the value: a
# quoted string up to its closing quote, or everything to the end of the line.
_SENSITIVE = re.compile(
    r"(?i)\b(x-api-key|proxy-authorization|authorization|set-cookie|cookie|probboard_session)"
    r"([\"']?\s*[:=,]\s*)(?:([\"'])(.*?)\3|([^\n]*))"
)
_HANDLER_NAME = "probboard"


def _outside_requests() -> str:
    return "-"


_request_id_source: Callable[[], str] = _outside_requests
REPEAT_INTERVAL_S = 10.0


def _mask_sensitive(match: re.Match[str]) -> str:
    quote = match.group(3) or ""
    return f"{match.group(1)}{match.group(2)}{quote}[redacted]{quote}"


def _decoded(text: str) -> tuple[str, list[int]]:
    """``text`` with its ``%XX`` escapes decoded (up to ``_DECODINGS`` times), and where each
    decoded character starts in ``text`` (one entry more: the end of the last one)."""
    starts = list(range(len(text) + 1))
    for _ in range(_DECODINGS):
        if "%" not in text:
            break
        pieces: list[str] = []
        kept: list[int] = []
        done = 0
        for escape in _ESCAPE.finditer(text):
            pieces += [text[done : escape.start()], chr(int(escape.group(1), 16))]
            kept += starts[done : escape.start() + 1]
            done = escape.end()
        if not pieces:
            break
        pieces.append(text[done:])
        kept += starts[done:]
        text, starts = "".join(pieces), kept
    return text, starts


def _mask_tokens(text: str) -> str:
    """``text`` with the body of each key or session token masked, its prefix kept as written.

    With a ``%`` in the line the match runs on the decoded text and each body is masked over
    the span it came from, so ``p%62k_...`` or a fully encoded key is found and the rest of
    the line stays byte for byte.
    """
    if "%" not in text:  # most lines: nothing to decode, one substitution
        return _TOKEN.sub(r"\g<prefix>_[redacted]", text)
    decoded, starts = _decoded(text)
    pieces: list[str] = []
    done = 0
    for token in _TOKEN.finditer(decoded):
        pieces += [text[done : starts[token.start("body")]], "[redacted]"]
        done = starts[token.end("body")]
    pieces.append(text[done:])
    return "".join(pieces)


def redact(text: str) -> str:
    """``text`` with key-, token-, credential- and cookie-like values masked."""
    text = _SENSITIVE.sub(_mask_sensitive, text)
    text = _SCHEME.sub(lambda m: f"{m.group(1)}{m.group(2)}[redacted]", text)
    return _mask_tokens(text)


def holds_secret(text: str) -> bool:
    """True when ``redact`` would mask part of ``text`` (a key, token or credential in it)."""
    return redact(text) != text


def current_request_id() -> str:
    """The id of the request being logged in, or ``-`` (the web app supplies the source)."""
    return _request_id_source()


def set_request_id_source(source: Callable[[], str]) -> None:
    """Where log records get their request id (``app.request_ids`` in the web app)."""
    global _request_id_source
    _request_id_source = source


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
