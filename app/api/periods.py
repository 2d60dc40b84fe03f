"""The ``period`` query parameter of the track record: which windows are scored.

``24h``, ``7d``, ``30d`` (the windows that started within that span before now) or ``all``
(every one: the default, as before the parameter existed). Exactly one of these names, in
lower case; anything else, the parameter given twice included, is a 400 ``invalid_period``.
``app.schemas.openapi`` documents exactly this language (``period_parameter``).
"""

from __future__ import annotations

from flask import Request

from app.calibration.periods import DEFAULT, SPANS
from app.errors import ApiError

PARAMETER = "period"


def requested_period(request: Request) -> str:
    """The period ``?period=`` names (``all`` without it); 400 ``invalid_period`` otherwise."""
    values = request.args.getlist(PARAMETER) if request.environ.get("QUERY_STRING") else []
    if not values:
        return DEFAULT
    if len(values) > 1 or values[0] not in SPANS:
        names = ", ".join(SPANS)
        raise ApiError(400, "invalid_period", f"period must be one of {names}, given once.")
    return values[0]
