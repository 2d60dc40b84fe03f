"""Request ids: every response carries ``X-Request-ID`` and every log line of a request its id.

The caller's id is kept when it is sane (1 to 128 of ``A-Za-z0-9._:-``); otherwise a new one is
made. An id is assigned on first use, so every response carries one whichever step
answered it (a blocked address is refused before anything else runs).
"""

from __future__ import annotations

import itertools
import re
import secrets
from collections.abc import Callable

from flask import Flask, Response, current_app, g, has_request_context, request

from app.logs import set_request_id_source

REQUEST_ID_HEADER = "X-Request-ID"
REQUEST_IDS_KEY = "probboard.request_ids"
_VALID_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")


def current_request_id() -> str:
    """The id of the request being served (the caller's valid one, or a new one), or ``-``."""
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


def _request_ids() -> Callable[[], str]:
    """Unique ids without a system call per request: 32 hex digits, a random half per app
    and a counter (uuid4 per request cost a read of the system's random source each).

    Each gunicorn worker builds its own app after the fork, so workers never share a prefix.
    """
    prefix = secrets.token_hex(8)
    counter = itertools.count(1)
    return lambda: f"{prefix}{next(counter):016x}"


def init_app(app: Flask) -> None:
    """Give every request an id, echoed in ``X-Request-ID`` and written on its log lines."""
    app.extensions[REQUEST_IDS_KEY] = _request_ids()
    set_request_id_source(current_request_id)

    def echo(response: Response) -> Response:
        response.headers[REQUEST_ID_HEADER] = current_request_id()
        return response

    app.after_request(echo)
