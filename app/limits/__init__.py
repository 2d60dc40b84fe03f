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

How they run: no limit hooks every request. The endpoints that are limited call them as
steps of their own pipelines (``Limits`` in the app's services): ``/latest`` runs identify
→ (guest: flask-limiter's check | account: its plan's limit) → render → headers; the
key-taking blueprints refuse blocked addresses before anything else and count the 401s
they answer. flask-limiter stays the guests' limiter, called from the pipeline: its
app-wide hooks are taken off the app.

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
from collections.abc import Callable

from flask import Flask, Response, request
from flask_limiter import Limiter, RateLimitExceeded
from limits import parse_many
from werkzeug.middleware.proxy_fix import ProxyFix

from app.auth import Identity
from app.auth.credentials import presents_key
from app.config import Settings
from app.errors import api_error_response, too_many_requests
from app.limits import failover, failures
from app.limits.accounts import AccountLimits, Quota
from app.limits.failures import FailureThrottle
from app.logs import limit_repeats
from app.plans import USER, VIP_PRO
from app.services import services

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


def retry_after_ms() -> int:
    """Milliseconds until the breached guest limit of this request has room (at least 1)."""
    current = services().limits.limiter.current_limit
    if current is None:
        return 1000
    reset_at = float(current.window[0])
    return max(1, math.ceil((reset_at - time.time()) * 1000))


def _too_many(error: RateLimitExceeded) -> Response:
    response = api_error_response(
        too_many_requests(
            f"Too many requests ({error.description}); retry after the delay given.",
            retry_after_ms(),
        )
    )
    return services().limits.headers(response, None)


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


class Limits:
    """The limits of one app, as steps the limited endpoints call (see the module docstring)."""

    def __init__(
        self, limiter: Limiter, guest_check: Callable[[], None], accounts: AccountLimits,
        throttle: FailureThrottle,
    ) -> None:  # fmt: skip
        self.limiter = limiter
        self.guest = guest_check  # flask-limiter's check of the guest limit; 429 when over
        self._accounts = accounts
        self._throttle = throttle

    def account(self, identity: Identity) -> Quota | None:
        """Count one read of an account against its plan (None: no limit); 429 when over it."""
        return self._accounts.admit(identity.account_id, identity.plan)

    def headers(self, response: Response, quota: Quota | None) -> Response:
        """``X-RateLimit-*`` of the account's ``quota``, or of the guest limit this request hit."""
        if quota is not None:
            limit, remaining, reset_at = quota.limit, quota.remaining, quota.reset_at
        else:
            current = self.limiter.current_limit
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

    def refuse_blocked(self) -> None:
        """First step of a key-taking endpoint: a blocked address gets 429, no key lookup."""
        # Nearly always nobody is blocked: answer that before looking at the request.
        if self._throttle.blocking and presents_key(request):
            self._throttle.check(client_address())

    def count_failure(self, response: Response) -> Response:
        """Last step of a key-taking endpoint: a 401 to a presented key counts a failure."""
        if response.status_code == 401 and presents_key(request):
            refusal = self._throttle.failed(client_address())
            if refusal is not None:
                return api_error_response(refusal)
        return response


def refuse_blocked() -> None:
    """``before_request`` of a key-taking blueprint (see ``Limits.refuse_blocked``)."""
    services().limits.refuse_blocked()


def count_failure(response: Response) -> Response:
    """``after_request`` of a key-taking blueprint (see ``Limits.count_failure``)."""
    return services().limits.count_failure(response)


def _take_off_app_hooks(app: Flask, limiter: Limiter) -> None:
    """flask-limiter hooks every request (check, headers, context reset); the endpoints call
    its check themselves, so its hooks would only cost time on every request."""
    before = app.before_request_funcs.get(None, [])
    before[:] = [f for f in before if getattr(f, "__self__", None) is not limiter]
    after = app.after_request_funcs.get(None, [])
    after[:] = [f for f in after if limiter not in getattr(f, "args", ())]
    teardown = app.teardown_request_funcs.get(None, [])
    teardown[:] = [f for f in teardown if getattr(f, "__self__", None) is not limiter]


def init_app(app: Flask, settings: Settings) -> Limits:
    """Give ``app`` its limits: counters on ``REDIS_URL``, ProxyFix for trusted hops.

    The endpoints call the steps of the returned ``Limits`` (kept in the app's services).
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
    _take_off_app_hooks(app, limiter)

    def guest_read() -> None:
        """One guest read of the board (flask-limiter counts each call)."""

    guest_check = limiter.limit(
        settings.guest_rate_limit, key_func=guest_key, methods=LIMITED_METHODS
    )(guest_read)
    plans = {USER: settings.user_rate_limit, VIP_PRO: settings.vip_pro_rate_limit}
    workers = settings.web_concurrency if settings.uses_redis else 1
    accounts = AccountLimits(
        limiter.storage,
        {plan: list(parse_many(limit)) for plan, limit in plans.items()},
        workers=workers,
        key_prefix=KEY_PREFIX,
    )
    throttle = FailureThrottle(limiter.storage, settings.auth_failure_limit, key_prefix=KEY_PREFIX)
    # One line per refused request would let one client flood the log: one per interval.
    limit_repeats(FLASK_LIMITER_LOGGER, failures.__name__)
    app.register_error_handler(RateLimitExceeded, _too_many)
    return Limits(limiter, guest_check, accounts, throttle)
