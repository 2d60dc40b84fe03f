"""CORS for the read endpoints: every path under ``/api/``, with flask-cors.

What a page on another origin may do (``CORS_ORIGINS``: ``*``, the default, or a list):

- read every ``/api/`` answer, errors included (401, 403, 404, 429…), and the headers in
  ``EXPOSED`` (the rate-limit headers, ``Retry-After``, ``X-Request-ID``, ``X-Next-Cursor``);
- send the key headers (``ALLOWED_HEADERS``) with GET or HEAD, after a preflight that is
  answered 204 and cached for ``MAX_AGE_S``;
- never use the visitor's credentials: no ``Access-Control-Allow-Credentials``, so a browser
  never lets a page read an answer made with the ``probboard_session`` cookie. A page holds
  a key and sends it in a header.

Only requests that carry ``Origin`` get CORS headers, so every other answer stays as it was.
The page, its static files and ``/metrics`` (operators only) get none.

How: flask-cors (``CORS``) set up on a blueprint of its own that the app never registers,
and one ``after_request`` hook of the app's (``init_app``) that hands it only the requests
carrying ``Origin`` and answers a granted preflight 204. flask-cors's hook on the app itself
would cost every request about 10 us in process, Origin or not (13 % of a guest read in a
pinned gunicorn run); the hook here costs a request without Origin under 1 us
(docs/performance.md).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import cast

from flask import Blueprint, Flask, Response, request
from flask_cors import CORS

from app.config import Settings

READ_PATHS = r"/api/.*"  # every endpoint under /api/ is a public read (GET, HEAD)
METHODS = ("GET", "HEAD", "OPTIONS")
# The two key schemes, the stream's resume header, a caller's own request id. Content-Type:
# no endpoint takes a body, but fetch wrappers that set it on every call must not fail.
ALLOWED_HEADERS = (
    "Authorization",
    "X-API-Key",
    "Last-Event-ID",
    "X-Request-ID",
    "Content-Type",
)
EXPOSED = (
    "X-RateLimit-Limit",
    "X-RateLimit-Remaining",
    "X-RateLimit-Reset",
    "Retry-After",
    "X-Request-ID",
    "X-Next-Cursor",  # /windows: a CSV page's next cursor
)
MAX_AGE_S = 600  # a browser asks again after 10 minutes, so a changed CORS_ORIGINS arrives
_ALLOW_ORIGIN = "Access-Control-Allow-Origin"
_ALLOW_METHODS = "Access-Control-Allow-Methods"
_ALLOW_HEADERS = "Access-Control-Allow-Headers"
_MAX_AGE = "Access-Control-Max-Age"


def _origin_patterns(origins: tuple[str, ...]) -> list[str | re.Pattern[str]]:
    """The listed origins as exact patterns.

    flask-cors reads a string holding ``[`` or ``]`` as a regular expression, which an
    IPv6 origin (``http://[::1]:8000``) does: each origin is escaped and anchored instead.
    """
    if origins == ("*",):
        return ["*"]
    return [re.compile(re.escape(origin) + r"\Z", re.IGNORECASE) for origin in origins]


def init_app(app: Flask, settings: Settings) -> None:
    """Answer cross-origin reads of ``/api/`` for ``CORS_ORIGINS`` (see the module docstring)."""
    # flask-cors on a blueprint that is never registered: its hook runs only when ``cors``
    # below calls it, for requests that carry Origin (the module docstring says why).
    holder = Blueprint("cors", __name__)
    CORS(
        holder,
        resources=READ_PATHS,
        origins=_origin_patterns(settings.cors_origins),
        methods=list(METHODS),
        allow_headers=list(ALLOWED_HEADERS),
        expose_headers=list(EXPOSED),
        max_age=MAX_AGE_S,
        supports_credentials=False,  # never: see the module docstring
        send_wildcard=True,  # with *, "*" itself: the answer is the same for every origin
        always_send=False,  # no Origin, no CORS headers: non-browser answers stay as they were
        vary_header=False,  # Vary is ours: merged, and on every /api/ answer when listed
        allow_private_network=False,  # a public page may not reach a private deployment
    )
    # flask-cors's hooks take and return a Response (Flask types them as maybe async).
    flask_cors_hooks = cast(
        "tuple[Callable[[Response], Response], ...]", tuple(holder.after_request_funcs[None])
    )
    if not flask_cors_hooks:  # flask-cors no longer hooks a blueprint so: say it, never skip
        raise RuntimeError("flask-cors registered no after_request hook on its blueprint")
    listed = settings.cors_origins != ("*",)

    def cors(response: Response) -> Response:
        """CORS headers for a request with Origin; 204 for a granted preflight; Vary."""
        environ = request.environ
        # With a list, whether an answer lets the caller read it depends on its Origin:
        # merged into any Vary already there (/latest varies on its credentials).
        if listed and environ["PATH_INFO"].startswith("/api/"):
            response.vary.add("Origin")
        if "HTTP_ORIGIN" not in environ:
            return response  # not a cross-origin request: nothing to add
        for hook in flask_cors_hooks:
            response = hook(response)
        # An OPTIONS from an allowed origin is answered as a preflight: 204 (no body, not
        # Flask's automatic 200) with what may be sent, even when it names no
        # Access-Control-Request-Method (curl -X OPTIONS -H 'Origin: …' expects the same
        # answer; flask-cors adds the methods and headers only when asked). A plain OPTIONS
        # (no Origin, or an origin not allowed) keeps today's 200 and Allow.
        granted = _ALLOW_METHODS in response.headers or (
            "HTTP_ACCESS_CONTROL_REQUEST_METHOD" not in environ
            and _ALLOW_ORIGIN in response.headers
        )
        if request.method == "OPTIONS" and response.status_code == 200 and granted:
            response.status_code = 204
            response.headers.pop("Content-Type", None)  # nothing to type
            response.headers.setdefault(_ALLOW_METHODS, ", ".join(METHODS))
            response.headers.setdefault(_ALLOW_HEADERS, ", ".join(ALLOWED_HEADERS))
            response.headers.setdefault(_MAX_AGE, str(MAX_AGE_S))
        return response

    app.after_request(cors)
