"""The baseline: a bare Flask route answering a constant JSON body as large as a board."""

from __future__ import annotations

import os

from flask import Flask, Response


def create_bare_app() -> Flask:
    """A Flask app with one route, ``/bare``, and nothing else."""
    size = int(os.environ.get("BARE_BODY_BYTES", "900"))
    body = '{"ok":true,"pad":"' + "x" * max(0, size - 20) + '"}'
    bare = Flask(__name__)

    @bare.get("/bare")
    def constant() -> Response:
        return Response(body, mimetype="application/json")

    return bare


app = create_bare_app()
