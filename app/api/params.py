"""Single-valued query parameters: one reader, so a repeated parameter is refused everywhere.

Views name each parameter they read literally (``query_value(request, "limit", ...)``): the
OpenAPI tests find them there and hold the document to exactly those.
"""

from __future__ import annotations

from flask import Request

from app.errors import ApiError


def query_value(request: Request, name: str, code: str) -> str | None:
    """The one value of ``?name=`` (None without it); a 400 ``code`` when given twice, since
    which of two values was meant cannot be told."""
    if not request.environ.get("QUERY_STRING"):
        return None
    values = request.args.getlist(name)
    if len(values) > 1:
        raise ApiError(400, code, f"{name} may be given once.")
    return values[0] if values else None
