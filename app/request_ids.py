"""Request ids: every response carries ``X-Request-ID`` and every log line of a request its id.

The caller's id is kept when it is a plain id: 1 to 128 of ``A-Za-z0-9._:-`` and nothing the
log mask would touch (a key or session token such as ``pbk_...``, or ``x-api-key:...``);
otherwise a new one is made. The id field of a log line is written as it is, so an id
holding a key would put the key in every line of its request.

The id is settled in the WSGI layer, before Flask sees the request, and added to the
response headers as they are sent: every answer carries one whichever step produced it (a
blocked address refused first, an error handler, the stream), and no Flask hook runs for it.
"""

from __future__ import annotations

import itertools
import re
import secrets
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from flask import Flask, has_request_context, request

from app.logs import holds_secret, set_request_id_source

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

REQUEST_ID_HEADER = "X-Request-ID"
ENVIRON_KEY = "probboard.request_id"
_PLAIN_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")


def is_plain_id(value: str) -> bool:
    """True when a caller's ``value`` may stand as the request id, in logs and answers."""
    return _PLAIN_ID.fullmatch(value) is not None and not holds_secret(value)


def current_request_id() -> str:
    """The id of the request being served (the caller's valid one, or a new one), or ``-``."""
    if not has_request_context():
        return "-"
    found: str = request.environ.get(ENVIRON_KEY, "-")
    return found


def _request_ids() -> Callable[[], str]:
    """Unique ids without a system call per request: 32 hex digits, a random half per app
    and a counter (uuid4 per request cost a read of the system's random source each).

    Each gunicorn worker builds its own app after the fork, so workers never share a prefix.
    """
    prefix = secrets.token_hex(8)
    counter = itertools.count(1)
    return lambda: f"{prefix}{next(counter):016x}"


class RequestIds:
    """WSGI middleware: settles the request's id and echoes it in ``X-Request-ID``."""

    def __init__(self, app: WSGIApplication) -> None:
        self.app = app
        self._new_id = _request_ids()

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        """Serve ``environ`` with its id in ``environ[ENVIRON_KEY]`` and in the response."""
        incoming = environ.get("HTTP_X_REQUEST_ID")
        if incoming is None or not is_plain_id(incoming):
            incoming = self._new_id()
        environ[ENVIRON_KEY] = incoming

        def start(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            headers.append((REQUEST_ID_HEADER, incoming))
            return start_response(status, headers, exc_info)

        return self.app(environ, start)


def init_app(app: Flask) -> None:
    """Write every request's id on its log lines (the id itself is settled by ``RequestIds``,
    which the app factory installs with the other WSGI middleware)."""
    set_request_id_source(current_request_id)
