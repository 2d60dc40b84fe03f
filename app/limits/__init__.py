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
steps of their own pipelines (``Limits`` in the app's services): ``/latest`` runs refuse a
blocked address → identify (count a 401) → (guest: the guest limit | account: its plan's
limit) → render → headers; the other key-taking blueprints refuse blocked addresses before
anything else and count the 401s they answer. flask-limiter stays the guests' limiter: the
limit is declared with it and counted by its strategy on its storage, resolved once
(``GuestLimit``); its app-wide hooks are taken off the app.

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
from typing import TYPE_CHECKING

from flask import Flask, Response, request
from flask_limiter import Limiter, RateLimitExceeded
from flask_limiter.util import get_qualified_name
from limits import parse_many
from limits.strategies import RateLimiter
from werkzeug.middleware.proxy_fix import ProxyFix

from app.auth import Identity
from app.auth.credentials import presents_key
from app.config import Settings
from app.errors import api_error_response, too_many_requests
from app.limits import failover as failover  # registers the probboard+redis storage schemes
from app.limits import failures
from app.limits.accounts import AccountLimits, Quota
from app.limits.failures import FailureThrottle
from app.logs import limit_repeats
from app.plans import USER, VIP_PRO
from app.services import services

if TYPE_CHECKING:
    from flask_limiter._limits import RuntimeLimit

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


def _too_many(error: RateLimitExceeded) -> Response:
    """A limit flask-limiter enforced itself (none on our endpoints today): the usual 429."""
    message = f"Too many requests ({error.description}); retry after the delay given."
    return api_error_response(too_many_requests(message, 1000))


def _storage_uri(settings: Settings) -> str:
    if not settings.uses_redis:
        return "memory://"
    # probboard+redis://, probboard+rediss:// or probboard+redis+sentinel://
    uri = "probboard+" + settings.redis_url
    # Short timeouts, so a hung Redis cannot hold requests long (redis-py reads them
    # from the URL as floats).
    separator = "&" if "?" in uri else "?"
    return uri + f"{separator}socket_connect_timeout=0.25&socket_timeout=0.5"


class GuestLimit:
    """The guests' limit: declared with flask-limiter, resolved once, hit per request.

    flask-limiter's own per-request check works out again, for every request, which of its
    limits apply to the view (exemption flags, blueprints, methods), and that cost a quarter
    of a worker serving guests. The answer never changes for ``/latest``, so it is resolved
    on first use; each request then does what the check does with it: hit every limit with
    flask-limiter's strategy, on its storage, under the same keys and scopes (so this and
    flask-limiter's check count on the same counters).
    """

    def __init__(self, limiter: Limiter, declared: Callable[[], None]) -> None:
        self._limiter = limiter
        self._declared = declared
        self._limits: list[RuntimeLimit] | None = None
        self._scopes: dict[str, list[str]] = {}

    def _resolve(self) -> list[RuntimeLimit]:
        name = get_qualified_name(self._declared)
        found = sorted(self._limiter.limit_manager.decorated_limits(name), key=lambda x: x.limit)
        self._limits = found
        return found

    def __call__(self) -> Quota | None:
        """Count one guest read: the window of the tightest limit for the headers; 429 when
        over any limit."""
        limits_ = self._limits if self._limits is not None else self._resolve()
        endpoint = request.endpoint or ""
        scopes = self._scopes.get(endpoint)
        if scopes is None:
            scopes = self._scopes[endpoint] = [lim.scope_for(endpoint, None) for lim in limits_]
        strategy = self._limiter.limiter
        key = guest_key()
        shown: Quota | None = None
        for lim, scope in zip(limits_, scopes, strict=True):
            if lim.method_exempt:
                continue
            args = (KEY_PREFIX, key, scope)
            taken = strategy.hit(lim.limit, *args, cost=lim.deduction_amount)
            if taken and shown is not None:
                continue
            quota = _window(strategy, lim, args)
            if not taken:
                retry_ms = math.ceil((quota.reset_at - time.time()) * 1000) if quota else 1000
                refusal = too_many_requests(
                    f"Too many requests ({lim.limit}); retry after the delay given.", retry_ms
                )
                refusal.headers.update(rate_limit_headers(quota))
                raise refusal
            shown = quota
        return shown


def _window(strategy: RateLimiter, lim: RuntimeLimit, args: tuple[str, ...]) -> Quota | None:
    """The window of ``lim`` as it stands (None when the storage cannot say)."""
    try:
        # After a hit on Redis this is the window the hit reported: no second round trip.
        reset_at, remaining = strategy.get_window_stats(lim.limit, *args)
    except Exception:  # storage trouble: the answer matters more than its headers
        return None
    return Quota(lim.limit.amount, remaining, reset_at)


def rate_limit_headers(quota: Quota | None) -> dict[str, str]:
    """``X-RateLimit-*`` of ``quota`` (none without one)."""
    if quota is None:
        return {}
    return {
        "X-RateLimit-Limit": str(quota.limit),
        "X-RateLimit-Remaining": str(max(0, quota.remaining)),
        "X-RateLimit-Reset": str(math.ceil(quota.reset_at)),
    }


class Limits:
    """The limits of one app, as steps the limited endpoints call (see the module docstring)."""

    def __init__(
        self, limiter: Limiter, guest: GuestLimit, accounts: AccountLimits,
        throttle: FailureThrottle,
    ) -> None:  # fmt: skip
        self.limiter = limiter
        self.guest = guest  # count one guest read (flask-limiter's limit); 429 when over
        self._accounts = accounts
        self._throttle = throttle

    def account(self, identity: Identity) -> Quota | None:
        """Count one read of an account against its plan (None: no limit); 429 when over it."""
        return self._accounts.admit(identity.account_id, identity.plan)

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

    # Declared with flask-limiter (its syntax, strategy, storage and keys); see GuestLimit.
    guest = GuestLimit(
        limiter,
        limiter.limit(settings.guest_rate_limit, key_func=guest_key, methods=LIMITED_METHODS)(
            guest_read
        ),
    )
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
    return Limits(limiter, guest, accounts, throttle)
