"""``GET /``: the live board for people (a template, one CSS and one JS file, no build)."""

from __future__ import annotations

from flask import Blueprint, Response, abort, render_template, request

from app.services import services

bp = Blueprint("page", __name__)


@bp.get("/", merge_slashes=False, strict_slashes=False)
def page() -> Response:
    """The board page; it reads the same API as everyone else."""
    if request.environ.get("PATH_INFO", "/") not in ("", "/"):
        # werkzeug also routes "//" (and an empty path) here; only "/" is the page, and a
        # redirect would be an HTML body: answer the JSON 404 instead.
        abort(404)
    # The served windows come from the settings, here, rather than from /api/health in the
    # page: the switch is in the first paint (no jump when an answer comes), and a page
    # whose health request fails still shows the window it was linked to.
    settings = services().settings
    body = render_template(
        "board.html",
        windows=settings.windows,
        default_window=settings.default_window,
        markets=settings.markets,
    )
    response = Response(body, mimetype="text/html")
    response.headers["Cache-Control"] = "no-cache"
    # Only our own script and styles; the API is same-origin.
    response.headers["Content-Security-Policy"] = (
        "default-src 'self'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    return response
