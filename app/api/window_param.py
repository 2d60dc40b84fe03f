"""The ``window`` query parameter: which window's board (issue 39), one parser for all.

A value is one served window (``WINDOWS``): ``5m`` or ``15m``, case-insensitive, nothing
around it. Without it the answer is the default window's (``Settings.default_window``: the
contract's 5 minutes when served), exactly as before there were others. Anything else is a
400 ``invalid_window``: an empty value, an unknown or unserved window, or the parameter
given more than once.
"""

from __future__ import annotations

from flask import Request

from app.api.params import query_value
from app.config import Settings
from app.errors import ApiError


def requested_window(settings: Settings, request: Request) -> str | None:
    """The served window ``?window=`` names (its ``Span.name``); None without the parameter
    (the default window). Raises a 400 ``invalid_window`` for anything else."""
    value = query_value(request, "window", "invalid_window")  # twice: a 400 too
    if value is None:
        return None
    served = [span.name for span in settings.windows]
    if value.isascii() and value.lower() in served:
        return value.lower()
    names = ", ".join(served)
    raise ApiError(400, "invalid_window", f"window must be one of the served windows: {names}.")
