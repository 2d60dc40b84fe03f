"""``GET /api/probboard/stream``: Server-Sent Events of the board for vip_pro keys.

One pipeline, in this order, every step in the view: refuse a blocked address → the key
(401; a 401 to a presented key counts a failed attempt: both steps are the ``with
limits.key_attempt():`` block every key-taking endpoint runs, around the key check alone)
→ its plan (403) → ``?symbol=``, ``?window=`` (400, before anything is counted) → the
plan's rate limit, the count ``/latest`` reads use (429 ``rate_limited``: a loop of
opens is a loop of requests) → a slot (429 ``too_many_streams``, 503) → the stream.
"""

from __future__ import annotations

import contextlib
import random
from socket import SHUT_RDWR, SO_SNDBUF, SOL_SOCKET
from socket import socket as SocketType  # noqa: N812 - the class, not the module

from flask import Blueprint, Response, request

from app.api.symbols import requested_symbols
from app.api.window_param import requested_window
from app.errors import ApiError, too_many_requests
from app.extensions import db
from app.metrics.web import PLAN_KEY
from app.plans import STREAM_PLANS
from app.services import services
from app.stream.broker import Broker, Client
from app.stream.slots import SlotsBusyError
from app.stream.writer import DirectWriter

bp = Blueprint("stream", __name__)

# Never stored by a cache in front; and the answer depends on the key, read from these two
# headers only (sessions open no stream: the cookie changes nothing).
STREAM_CACHING = {"Cache-Control": "no-store", "Vary": "Authorization, X-API-Key"}
SLOT_RETRY_MS = 5000
BUSY_RETRY_MS = 1000
STREAM_SEND_BUFFER = 32 * 1024


@bp.get("/api/probboard/stream")
def stream() -> Response:
    """Opens with ``retry:``, sends the current board at once, then every new board."""
    held = services()
    with held.limits.key_attempt():  # 429 for a blocked address; a 401 counts a failure
        identity = held.authenticator.require_key(request)  # 401 without a valid key
    request.environ[PLAN_KEY] = identity.plan
    key = identity.key
    assert key is not None
    if identity.plan not in STREAM_PLANS:
        raise ApiError(
            403,
            "vip_pro_required",
            f"The stream needs the vip_pro entitlement; this key's plan is {identity.plan}.",
        )
    settings, stream_broker = held.settings, held.broker
    symbols = requested_symbols(settings.markets, request)
    window = requested_window(settings, request)  # the stream of one window only
    held.limits.account(identity)  # 429 over the plan's limit; before a slot is taken
    if request.method == "HEAD":
        return _stream_response(b"")  # the headers a GET would get, and no stream
    try:
        client = stream_broker.connect(
            key.key_id,
            key.key_hash,
            identity.plan,
            settings.stream_max_per_key,
            symbols,
            window,
        )
    except SlotsBusyError as exc:
        raise ApiError(
            503,
            "stream_busy",
            "Open streams cannot be counted right now (the server is busy); retry shortly.",
            retry_after_ms=BUSY_RETRY_MS,
        ) from exc
    if client is None:
        raise too_many_requests(
            f"This key already holds {settings.stream_max_per_key} open streams; "
            "close one or retry later.",
            SLOT_RETRY_MS,
            code="too_many_streams",
        )
    # The stream may last hours: give the database connection back now.
    db.session.remove()
    writer = None
    socket = request.environ.get("gunicorn.socket")
    if socket is not None:
        # A client that cannot take a write within this long is dropped.
        socket.settimeout(settings.stream_write_timeout_s)
        # A small send buffer makes a client that stops reading show up as a blocked write
        # within seconds (Linux would otherwise buffer megabytes for it).
        socket.setsockopt(SOL_SOCKET, SO_SNDBUF, STREAM_SEND_BUFFER)
        # gunicorn chunks HTTP/1.1 responses of unknown length; direct writes must match.
        chunked = request.environ.get("SERVER_PROTOCOL", "HTTP/1.0") != "HTTP/1.0"
        writer = DirectWriter(socket, chunked=chunked)
    retry_ms = int(settings.stream_retry_ms * random.uniform(0.75, 1.25))  # noqa: S311
    body = stream_broker.stream(client, request.headers.get("Last-Event-ID"), retry_ms, writer)
    # No stream_with_context: the stream needs no request context, and holding one for
    # hours would cost memory per stream.
    response = _stream_response(body)
    response.call_on_close(lambda: _closed(stream_broker, client, socket))
    return response


def _closed(stream_broker: Broker, client: Client, sock: SocketType | None) -> None:
    """The stream is over: free its slot and end the connection now.

    gunicorn drops a ``Connection: close`` an app sends (hop-by-hop) and would keep the
    socket open for another request for ``keepalive`` seconds; nothing ever follows a
    stream, so the socket is shut down here, after gunicorn wrote the last bytes.
    """
    stream_broker.disconnect(client)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(SHUT_RDWR)


def _stream_response(body: object) -> Response:
    response = Response(body, mimetype="text/event-stream")  # type: ignore[arg-type]
    response.headers.update(STREAM_CACHING)
    response.headers["X-Accel-Buffering"] = "no"
    # Nothing follows a stream on its connection: close it when the stream ends.
    response.headers["Connection"] = "close"
    return response
