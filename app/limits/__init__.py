"""The one place for rate limits, with their counters in Redis (or memory).

- ``/api/probboard/latest`` for guests: flask-limiter, by client address
  (``GUEST_RATE_LIMIT``), every request counted in Redis.
- ``/latest`` for accounts: by account with their plan's limit (``USER_RATE_LIMIT``,
  ``VIP_PRO_RATE_LIMIT``; ``accounts.py``): counted in the same Redis windows, with slots
  reserved several at a time for callers that call many times a second. ``admin``,
  ``/api/health`` and OPTIONS are never limited.
- Failed key attempts per client address (``AUTH_FAILURE_LIMIT``, ``failures.py``): a request
  that presents a key counts only when answered 401; over the limit, requests presenting a
  key get 429.

Strategy: sliding window counter. A fixed window lets a client spend two windows' worth
at a boundary; a moving window is exact but keeps one entry per request (memory and Lua work
grow with the limit). The sliding window counter weighs the previous window's count by how
much of it still overlaps, costs one round trip and two counters per key, and never lets a
client burst past the limit at a window edge.

The client address is the socket peer unless ``TRUSTED_PROXIES`` > 0, in which case
werkzeug's ProxyFix takes it from ``X-Forwarded-For`` that many hops from the right, so
no client can choose its own address. When Redis is away the limiter counts in memory,
per worker (logged once), and goes back to Redis by itself when it answers again.
"""

from __future__ import annotations

import logging
import math
import time

from flask import Flask, Response, current_app, g, request
from flask_limiter import Limiter, RateLimitExceeded
from limits import parse_many
from werkzeug.middleware.proxy_fix import ProxyFix

from app.auth import credentials_failed, peek_identity
from app.auth.credentials import presents_key
from app.config import Settings
from app.errors import api_error_response, too_many_requests
from app.limits import failover, failures
from app.limits.accounts import AccountLimits, Quota
from app.limits.failures import FailureThrottle
from app.logs import limit_repeats
from app.plans import USER, VIP_PRO
from app.services import services_of

log = logging.getLogger(__name__)

LIMITED_METHODS = ["get", "head"]
KEY_PREFIX = "probboard"
FLASK_LIMITER_LOGGER = "flask-limiter"


def client_address() -> str:
    """The caller's address (after ProxyFix); never raises, never empty."""
    return request.remote_addr or "unknown"


def guest_key() -> str:
    """Guests are counted per address; never raises, never empty."""
    return f"address:{client_address()}"


def _not_a_guest() -> bool:
    # Accounts have limits of their own (accounts.py); refused credentials are counted by
    # the failed-attempt limit. Checked first by flask-limiter, before any of its work.
    return peek_identity() is not None or credentials_failed()


def limiter_of(app: Flask) -> Limiter:
    """The limiter bound to ``app`` (one per app: its storage and state are its own)."""
    return services_of(app).limiter


def _guest_limit(limiter: Limiter, settings: Settings) -> None:
    """Attach the guests' limit to the ``/latest`` blueprint (one blueprint per endpoint)."""
    from app.api import latest

    limiter.request_filter(_not_a_guest)
    limiter.limit(settings.guest_rate_limit, key_func=guest_key, methods=LIMITED_METHODS)(latest.bp)


def _account_hooks(app: Flask, accounts: AccountLimits) -> None:
    """Count an account's ``/latest`` reads against its plan; say where it stands."""
    from app.api import latest

    def admit_account() -> None:
        identity = peek_identity()
        if identity is not None and request.method in ("GET", "HEAD"):
            g.account_quota = accounts.admit(identity.account_id, identity.plan)

    # A hook of this app for the /latest blueprint only (after the app-wide hooks, so the
    # caller is identified); refused credentials leave no identity.
    app.before_request_funcs.setdefault(latest.bp.name, []).append(admit_account)


def _failure_hooks(app: Flask, throttle: FailureThrottle) -> None:
    """Refuse blocked addresses before anything else runs; count the 401s that presented a key."""
    from app.api import keys_verify, latest, stream

    guarded = {bp.name for bp in (latest.bp, keys_verify.bp, stream.bp)}

    def refuse_blocked() -> None:
        # Nearly always nobody is blocked: answer that before looking at the request.
        if throttle.blocking and request.blueprint in guarded and presents_key(request):
            throttle.check(client_address())

    def count_failure(response: Response) -> Response:
        if response.status_code == 401 and request.blueprint in guarded and presents_key(request):
            refusal = throttle.failed(client_address())
            if refusal is not None:
                return api_error_response(refusal)
        return response

    # First of all before-request hooks: a blocked address gets no key lookup at all.
    app.before_request_funcs.setdefault(None, []).insert(0, refuse_blocked)
    app.after_request(count_failure)


def retry_after_ms() -> int:
    """Milliseconds until the breached guest limit of this request has room (at least 1)."""
    current = limiter_of(current_app).current_limit
    if current is None:
        return 1000
    reset_at = float(current.window[0])
    return max(1, math.ceil((reset_at - time.time()) * 1000))


def _too_many(error: RateLimitExceeded) -> Response:
    return api_error_response(
        too_many_requests(
            f"Too many requests ({error.description}); retry after the delay given.",
            retry_after_ms(),
        )
    )


def _rate_limit_headers(response: Response) -> Response:
    quota: Quota | None = g.get("account_quota")
    if quota is not None:
        limit, remaining, reset_at = quota.limit, quota.remaining, quota.reset_at
    else:
        current = limiter_of(current_app).current_limit
        if current is None:
            return response
        try:
            reset_at, remaining = current.window
        except Exception:  # storage trouble: the answer matters more than its headers
            return response
        limit = current.limit.amount
    response.headers["X-RateLimit-Limit"] = str(limit)
    response.headers["X-RateLimit-Remaining"] = str(max(0, remaining))
    response.headers["X-RateLimit-Reset"] = str(math.ceil(reset_at))
    return response


def _storage_uri(settings: Settings) -> str:
    if not settings.uses_redis:
        return "memory://"
    uri = f"{failover.SCHEME}://" + settings.redis_url.split("://", 1)[1]
    if settings.redis_url.startswith("rediss://"):
        uri = uri.replace(failover.SCHEME, failover.SCHEME + "s", 1)
    # Short timeouts, so a hung Redis cannot hold requests long (redis-py reads them
    # from the URL as floats).
    separator = "&" if "?" in uri else "?"
    return uri + f"{separator}socket_connect_timeout=0.25&socket_timeout=0.5"


def init_app(app: Flask, settings: Settings) -> Limiter:
    """Give ``app`` its limits: counters on ``REDIS_URL``, ProxyFix for trusted hops.

    Called after the blueprints are registered (the limits attach to them) and after the
    authenticator (whose hook must run before the limiter's: limits depend on the plan).
    """
    if settings.trusted_proxies:
        hops = settings.trusted_proxies
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=hops, x_proto=hops)  # type: ignore[method-assign]
    limiter = Limiter(
        key_func=client_address,
        headers_enabled=False,
        storage_uri=_storage_uri(settings),
        strategy="sliding-window-counter",
        key_prefix=KEY_PREFIX,
        storage_options={"pool_size": settings.redis_pool_size} if settings.uses_redis else {},
    )
    limiter.init_app(app)
    _guest_limit(limiter, settings)
    plans = {USER: settings.user_rate_limit, VIP_PRO: settings.vip_pro_rate_limit}
    workers = settings.web_concurrency if settings.uses_redis else 1
    accounts = AccountLimits(
        limiter.storage,
        {plan: list(parse_many(limit)) for plan, limit in plans.items()},
        workers=workers,
        key_prefix=KEY_PREFIX,
    )
    _account_hooks(app, accounts)
    _failure_hooks(
        app, FailureThrottle(limiter.storage, settings.auth_failure_limit, key_prefix=KEY_PREFIX)
    )
    # One line per refused request would let one client flood the log: one per interval.
    limit_repeats(FLASK_LIMITER_LOGGER, failures.__name__)
    app.register_error_handler(RateLimitExceeded, _too_many)
    app.after_request(_rate_limit_headers)
    return limiter
