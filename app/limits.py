"""The one place for rate limits (flask-limiter, storage in Redis or memory).

Now: failed key attempts per client address. A request that presents a key counts against
``AUTH_FAILURE_LIMIT`` only when it is answered 401, so keys cannot be guessed at speed; over
the limit, requests that present a key get 429 until the window has room again.
"""

from __future__ import annotations

import math
import time

from flask import Flask, Response, current_app, request
from flask_limiter import Limiter, RateLimitExceeded

from app.auth.credentials import presents_key
from app.errors import error_response
from app.extensions import settings_of

AUTH_FAILURE_SCOPE = "auth-failures"


def client_address() -> str:
    """The caller's address as seen by the app; never raises, never empty."""
    return request.remote_addr or "unknown"


limiter = Limiter(key_func=client_address, headers_enabled=False)


def _answered_unauthorized(response: Response) -> bool:
    return response.status_code == 401


def _no_key_presented() -> bool:
    return not presents_key(request)


def retry_after_ms() -> int:
    """Milliseconds until the breached limit of this request has room again (at least 1)."""
    current = limiter.current_limit
    if current is None:
        return 1000
    reset_at = float(current.window[0])
    return max(1, math.ceil((reset_at - time.time()) * 1000))


def _too_many(error: RateLimitExceeded) -> Response:
    return error_response(
        429,
        "rate_limited",
        f"Too many requests ({error.description}); retry after the delay given.",
        retry_after_ms=retry_after_ms(),
    )


auth_failures = limiter.shared_limit(
    lambda: settings_of(current_app).auth_failure_limit,
    scope=AUTH_FAILURE_SCOPE,
    deduct_when=_answered_unauthorized,
    exempt_when=_no_key_presented,
)


def init_app(app: Flask) -> None:
    """Bind the limiter to ``app`` with storage on ``REDIS_URL``."""
    settings = settings_of(app)
    app.config["RATELIMIT_STORAGE_URI"] = settings.redis_url
    app.config["RATELIMIT_STORAGE_OPTIONS"] = {"socket_connect_timeout": 1, "socket_timeout": 1}
    app.config["RATELIMIT_IN_MEMORY_FALLBACK_ENABLED"] = True
    app.config["RATELIMIT_SWALLOW_ERRORS"] = True
    app.config["RATELIMIT_STRATEGY"] = "moving-window"
    limiter.init_app(app)
    app.register_error_handler(RateLimitExceeded, _too_many)
