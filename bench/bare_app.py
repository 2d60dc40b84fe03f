"""The baselines: bare Flask routes answering a constant JSON body as large as a board.

- ``/bare``: the route and nothing else (the baseline every ratio is taken against);
- ``/bare-headers``: the same, with the headers ``/latest`` must send (``Cache-Control``,
  ``Vary``, three ``X-RateLimit-*`` and ``X-Request-ID``), so the bench can show what the
  headers alone cost gunicorn and werkzeug, apart from any work of ours.
"""

from __future__ import annotations

import os

from flask import Flask, Response

LATEST_HEADERS = [
    ("Cache-Control", "no-store"),
    ("Vary", "Authorization, X-API-Key, Cookie"),
    ("X-RateLimit-Limit", "10000000"),
    ("X-RateLimit-Remaining", "9999999"),
    ("X-RateLimit-Reset", "1790000000"),
    ("X-Request-ID", "0123456789abcdef0123456789abcdef"),
]


def create_bare_app() -> Flask:
    """A Flask app with the two baseline routes and nothing else."""
    size = int(os.environ.get("BARE_BODY_BYTES", "900"))
    body = '{"ok":true,"pad":"' + "x" * max(0, size - 20) + '"}'
    bare = Flask(__name__)

    @bare.get("/bare")
    def constant() -> Response:
        return Response(body, mimetype="application/json")

    @bare.get("/bare-headers")
    def constant_with_headers() -> Response:
        return Response(body, mimetype="application/json", headers=LATEST_HEADERS)

    return bare


app = create_bare_app()
