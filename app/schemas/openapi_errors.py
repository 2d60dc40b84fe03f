"""Which error answers each endpoint gives: status, ``code`` values, and their headers.

The OpenAPI document is built from these tables (``app/schemas/openapi.py``); the tests hold
them against the codes the package raises (``app/errors.py``, the views, ``app/auth``,
``app/limits``) and against answers provoked from each endpoint.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.errors import HTTP_CODES


@dataclass(frozen=True)
class Status:
    """One error status as the document describes it."""

    description: str
    retry: bool = False  # the answer carries Retry-After (and retryAfterMs)
    challenge: bool = False  # WWW-Authenticate
    allow: bool = False  # Allow
    from_gunicorn: bool = False  # may be answered by gunicorn itself, without X-Request-ID


STATUSES: dict[int, Status] = {
    400: Status(
        "A parameter is not valid (`invalid_symbol`, `invalid_window`, `invalid_period`, "
        "`invalid_time`, "
        "`invalid_limit`, `invalid_cursor`, `invalid_format`), a body field is not (an "
        "alert's: `invalid_url`, `invalid_level`...), or the request could not be "
        "parsed as HTTP (`bad_request`, answered by gunicorn).",
        from_gunicorn=True,
    ),
    401: Status("The credentials presented are missing, malformed or invalid.", challenge=True),
    403: Status("The caller lacks the entitlement (or the address is not allowed)."),
    404: Status("No such resource (an alert id that names none)."),
    405: Status("A method the endpoint does not take; `Allow` lists those.", allow=True),
    409: Status("The request conflicts with what is held (over the plan's alert limit)."),
    414: Status("The request line is too long (answered by gunicorn).", from_gunicorn=True),
    429: Status("Over a limit; `Retry-After` gives the seconds to wait.", retry=True),
    431: Status("The header fields are too large (answered by gunicorn).", from_gunicorn=True),
    503: Status("A dependency cannot answer right now; retry after `Retry-After`.", retry=True),
}

# What any request can get, whichever endpoint it names.
EVERYWHERE: dict[int, tuple[str, ...]] = {
    400: (HTTP_CODES[400],),
    405: (HTTP_CODES[405],),
    414: (HTTP_CODES[414],),
    431: (HTTP_CODES[431],),
}
INVALID_KEY = ("malformed_authorization", "conflicting_credentials", "invalid_key")
KEY_REQUIRED = ("missing_credentials", *INVALID_KEY)
RATE_LIMITED = HTTP_CODES[429]  # every limit's code (guests, accounts, failed keys)
INVALID_SYMBOL = "invalid_symbol"
INVALID_WINDOW = "invalid_window"  # ?window= (issue 39): the board, the stream, the record

# Per path: the codes of each status beyond EVERYWHERE's.
ENDPOINT_ERRORS: dict[str, dict[int, tuple[str, ...]]] = {
    "/api/health": {},
    "/api/keys/verify": {
        401: KEY_REQUIRED,
        429: (RATE_LIMITED,),
        503: ("auth_unavailable",),
    },
    "/api/probboard/latest": {
        400: (INVALID_SYMBOL, INVALID_WINDOW),
        401: INVALID_KEY,  # no credentials at all is the guest board
        429: (RATE_LIMITED,),
        503: ("auth_unavailable",),
    },
    "/api/probboard/stream": {
        400: (INVALID_SYMBOL, INVALID_WINDOW),
        401: KEY_REQUIRED,
        403: ("vip_pro_required",),
        429: (RATE_LIMITED, "too_many_streams"),
        503: ("auth_unavailable", "stream_busy"),
    },
    "/api/probboard/trail": {
        400: (INVALID_SYMBOL, INVALID_WINDOW),
        401: INVALID_KEY,
        429: (RATE_LIMITED,),
        503: ("auth_unavailable",),
    },
    "/api/probboard/calibration": {
        400: (INVALID_SYMBOL, INVALID_WINDOW, "invalid_period"),
        503: ("calibration_unavailable",),
    },
    "/api/probboard/windows": {
        400: (
            INVALID_SYMBOL,
            INVALID_WINDOW,
            "invalid_time",
            "invalid_limit",
            "invalid_cursor",
            "invalid_format",
        ),
        429: (RATE_LIMITED,),
        503: ("record_unavailable",),
    },
    "/api/openapi.json": {},
    # Issue 51: a key holder's alerts (key-only: a session or no key is 401).
    "/api/alerts": {
        400: (
            "invalid_body",
            "invalid_url",
            INVALID_SYMBOL,
            INVALID_WINDOW,
            "invalid_condition",
            "invalid_level",
            "invalid_side",
            "invalid_format",
        ),
        401: KEY_REQUIRED,
        409: ("alert_limit",),
        429: (RATE_LIMITED,),
        503: ("auth_unavailable", "alerts_unavailable"),
    },
    "/api/alerts/<alert_id>": {
        400: ("invalid_body", "invalid_status"),
        401: KEY_REQUIRED,
        403: ("not_your_alert",),
        404: ("alert_not_found",),
        429: (RATE_LIMITED,),
        503: ("auth_unavailable", "alerts_unavailable"),
    },
    "/api/alerts/<alert_id>/deliveries": {
        401: KEY_REQUIRED,
        403: ("not_your_alert",),
        404: ("alert_not_found",),
        429: (RATE_LIMITED,),
        503: ("auth_unavailable", "alerts_unavailable"),
    },
    "/metrics": {403: ("metrics_forbidden",)},
    "/": {},
}


def errors_of(path: str) -> dict[int, tuple[str, ...]]:
    """Every error status ``path`` can answer, with its codes, in status order."""
    merged = {status: tuple(codes) for status, codes in EVERYWHERE.items()}
    for status, codes in ENDPOINT_ERRORS[path].items():
        merged[status] = (*merged.get(status, ()), *codes)
    return dict(sorted(merged.items()))
