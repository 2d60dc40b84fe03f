"""The one place for rate limits, with their counters in Redis (or memory).

- ``/api/probboard/latest`` for guests: by client address (``GUEST_RATE_LIMIT``), every
  request counted in Redis.
- ``/latest`` for accounts: by account with their plan's limit (``USER_RATE_LIMIT``,
  ``VIP_PRO_RATE_LIMIT``; ``accounts.py``): counted in the same Redis windows, with slots
  reserved several at a time for callers that call many times a second. ``admin``,
  ``/api/health`` and OPTIONS are never limited.
- Failed key attempts per client address (``AUTH_FAILURE_LIMIT``, ``failures.py``): a request
  that presents a key counts only when answered 401; over the limit, requests presenting a
  key get 429.
- Valid-key checks on ``/api/keys/verify`` per account (``VERIFY_RATE_LIMIT``, ``verify.py``):
  after the key check, on the same storage as the accounts' limits.

How they run: each limited endpoint's view calls them as steps of its own pipeline, in the
order it states (``Limits``, built by the app factory and handed to the views in the app's
services; nothing here reads the services). Every endpoint that takes a key puts its key
check inside ``with limits.key_attempt():`` (``KeyAttempt``: a blocked address is refused
on entry, a 401 to a presented key counts a failure on exit); ``/latest`` and ``/trail``
then call ``limits.guest()`` or ``limits.account(identity)``, ``/windows`` ``limits.guest()``.

The guests' limit is flask-limiter's (the design names it): a ``Limiter`` on the app, its
storage built from ``REDIS_URL`` through the scheme ``fallback_storage.py`` registers with the
``limits`` library, its sliding-window-counter strategy, and ``GUEST_RATE_LIMIT`` declared with
``limiter.limit`` on a function that the guest step calls (flask-limiter's own check runs
then, and only then). flask-limiter's hooks run on every request of the app; its request
identity (``limited_step``) is empty outside the guest step, so there they find no limit at
once. The accounts' limits and the failed-key throttle use the ``limits`` library's public API
on the same storage (docs/limits.md says why).

Strategy: sliding window counter. A fixed window lets a client spend two windows' worth
at a boundary; a moving window is exact but keeps one entry per request (memory and Lua work
grow with the limit). The sliding window counter weighs the previous window's count by how
much of it still overlaps, costs one round trip and two counters per key, and never lets a
client burst past the limit at a window edge.

The client address is ``REMOTE_ADDR`` as ``app.forwarded`` settled it: the socket peer, or,
from a peer in ``TRUSTED_PROXIES`` only, the client that proxy forwarded the request for, so
no client can choose its own address. Guests and failed keys are counted per address, an
IPv6 address per /64 (``addresses.py``).
When Redis is away the limiter counts in memory, per worker (logged once), and goes back to
Redis by itself when it answers again.
"""

from __future__ import annotations

import logging
import math
import time
from types import TracebackType

from flask import Flask, request
from flask_limiter import Limiter, RateLimitExceeded
from limits import parse_many
from limits.storage import Storage

from app.auth import Identity
from app.auth.credentials import presents_key
from app.config import ConfigError, Settings
from app.errors import ApiError, too_many_requests
from app.limits import failures
from app.limits import fallback_storage as fallback_storage  # registers its storage schemes
from app.limits.addresses import counted_address
from app.limits.failures import FailureThrottle
from app.limits.per_account import AccountLimits, Quota
from app.limits.sliding import SlidingWindowCounter
from app.limits.verify import VerifyLimit
from app.logs import limit_repeats
from app.plans import USER, VIP_PRO

log = logging.getLogger(__name__)

KEY_PREFIX = "probboard"
LIMITED_STEP = "probboard.limited_step"
FLASK_LIMITER_LOGGER = "flask-limiter"  # one line per refused guest: limited to one a minute


def client_address() -> str:
    """The caller's address (``app.forwarded`` settled it); never raises, never empty."""
    return request.remote_addr or "unknown"


def counted_client() -> str:
    """What the caller is counted as: its address, an IPv6 one's /64; never empty."""
    return counted_address(client_address())


def guest_key() -> str:
    """Guests are counted per address (IPv6: per /64); never raises, never empty."""
    return f"address:{counted_client()}"


def limited_step() -> str:
    """flask-limiter's request identity: the endpoint inside a limit step, else none.

    flask-limiter checks every request in its own hooks; with no identity its check ends at
    once, so requests that no flask-limiter limit applies to cost it the least.
    """
    if request.environ.get(LIMITED_STEP):
        return request.endpoint or ""
    return ""


def _storage_uri(settings: Settings) -> str:
    if not settings.uses_redis:
        return "memory://"
    # probboard+redis://, probboard+rediss:// or probboard+redis+sentinel://
    uri = "probboard+" + settings.redis_url
    # Short timeouts, so a hung Redis cannot hold requests long (redis-py reads them
    # from the URL as floats): LIMITS_REDIS_TIMEOUT_MS for a call, half of it to connect.
    separator = "&" if "?" in uri else "?"
    call_s = settings.limits_redis_timeout_ms / 1000
    return uri + f"{separator}socket_connect_timeout={call_s / 2}&socket_timeout={call_s}"


class GuestLimit:
    """The guests' limit: declared with flask-limiter, checked as a step of ``/latest``.

    ``GUEST_RATE_LIMIT`` is a flask-limiter route limit on a function that stands for one
    guest read; calling it is flask-limiter's own check (its strategy, its storage, its
    keys: ``LIMITER/probboard/address:<ip>/latest.latest``). The view calls it after the
    caller is known to be a guest, so accounts are never counted here.
    """

    def __init__(self, limiter: Limiter, limit: str, storage: Storage) -> None:
        self._limiter = limiter
        self._stats = SlidingWindowCounter(storage)  # the windows' reset times (sliding.py)

        def guest_read() -> None:
            """One guest read of the board: flask-limiter counts each call."""

        self._read = limiter.limit(limit, key_func=guest_key)(guest_read)

    def __call__(self) -> Quota | None:
        """Count one guest read: the window of the tightest limit for the headers; 429 when
        over any limit."""
        request.environ[LIMITED_STEP] = True  # flask-limiter identifies this request now
        try:
            self._read()
        except RateLimitExceeded as exceeded:
            quota = self._quota()
            retry_ms = math.ceil((quota.reset_at - time.time()) * 1000) if quota else 1000
            refusal = too_many_requests(
                f"Too many requests ({exceeded.limit.limit}); retry after the delay given.",
                retry_ms,
            )
            refusal.headers.update(rate_limit_headers(quota))
            raise refusal from None
        return self._quota()

    def _quota(self) -> Quota | None:
        """The window flask-limiter reports for this request (None when it cannot say)."""
        shown = self._limiter.current_limit
        if shown is None:
            return None
        try:
            # After a hit on Redis this is the window the hit reported: no second round trip.
            # Read through our strategy, not flask-limiter's, for the mended reset time.
            reset_at, remaining = self._stats.get_window_stats(shown.limit, *shown.request_args)
        except Exception:  # storage trouble: the answer matters more than its headers
            return None
        return Quota(shown.limit.amount, remaining, reset_at)


def rate_limit_headers(quota: Quota | None) -> dict[str, str]:
    """``X-RateLimit-*`` of ``quota`` (none without one)."""
    return {} if quota is None else quota.headers()


class KeyAttempt:
    """The failed-key throttle's steps around a key check: ``with limits.key_attempt():``.

    On entry, an address blocked for failed keys that presents a key gets 429, before any
    key lookup. On exit with a 401 ``ApiError`` to a presented key, one failure is counted,
    and the throttle's 429 is raised instead when that failure finds the address's window
    already full (filled on another worker). Only the key check belongs inside the block, so
    whatever the view answers after it, a stream included, is neither held nor inspected.
    """

    # A class rather than ``@contextmanager``: keyed reads of /latest are the hot path, and it
    # costs no generator per request (it holds no request state, so one serves them all).
    __slots__ = ("_throttle",)

    def __init__(self, throttle: FailureThrottle) -> None:
        self._throttle = throttle

    def __enter__(self) -> None:
        """Refuse a blocked address (429) that presents a key."""
        # Nearly always nobody is blocked: answer that before looking at the request.
        if self._throttle.blocking and presents_key(request):
            self._throttle.check(counted_client())

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        """Count a 401 to a presented key; the 429 instead when the window was full."""
        if isinstance(error, ApiError) and error.status == 401 and presents_key(request):
            refusal = self._throttle.failed(counted_client())
            if refusal is not None:
                raise refusal from None


class Limits:
    """The limits of one app, as steps the limited endpoints call (see the module docstring)."""

    def __init__(
        self, storage: Storage, guest: GuestLimit, accounts: AccountLimits,
        throttle: FailureThrottle, verify: VerifyLimit, alerts: VerifyLimit,
    ) -> None:  # fmt: skip
        self.storage = storage  # every counter of the app's limits
        self.guest = guest  # count one guest read; 429 when over
        self._accounts = accounts
        self._key_attempt = KeyAttempt(throttle)
        self._verify = verify
        self._alerts = alerts

    def alerts(self, identity: Identity) -> Quota | None:
        """Count one call of the account to ``/api/alerts`` (``ALERTS_RATE_LIMIT``, a counter
        of its own: managing alerts never spends a board read); 429 when over."""
        return self._alerts.admit(identity.account_id)

    def account(self, identity: Identity) -> Quota | None:
        """Count one read of an account against its plan (None: no limit); 429 when over it."""
        return self._accounts.admit(identity.account_id, identity.plan)

    def verify(self, identity: Identity) -> Quota | None:
        """Count one valid-key check of the account (``VERIFY_RATE_LIMIT``); 429 when over."""
        return self._verify.admit(identity.account_id)

    def key_attempt(self) -> KeyAttempt:
        """The block a key-taking endpoint runs its key check in (see ``KeyAttempt``)."""
        return self._key_attempt


def init_app(app: Flask, settings: Settings) -> Limits:
    """Give ``app`` its limits: counters on ``REDIS_URL``.

    The endpoints' views call the steps of the returned ``Limits``, which the factory keeps in
    the app's services for them.
    """
    limiter = Limiter(
        key_func=counted_client,
        request_identifier=limited_step,
        storage_uri=_storage_uri(settings),
        storage_options={"pool_size": settings.redis_pool_size} if settings.uses_redis else {},
        strategy="sliding-window-counter",
        key_prefix=KEY_PREFIX,
        headers_enabled=False,  # /latest writes its own, for guests and accounts alike
    )
    limiter.init_app(app)
    storage = limiter.storage
    if not isinstance(storage, Storage):  # an asyncio storage: unusable from WSGI workers
        raise ConfigError("REDIS_URL", f"{settings.redis_url!r} names an asyncio storage")
    guest = GuestLimit(limiter, settings.guest_rate_limit, storage)
    plans = {USER: settings.user_rate_limit, VIP_PRO: settings.vip_pro_rate_limit}
    workers = settings.web_concurrency if settings.uses_redis else 1
    accounts = AccountLimits(
        storage,
        {plan: list(parse_many(limit)) for plan, limit in plans.items()},
        workers=workers,
        key_prefix=KEY_PREFIX,
    )
    throttle = FailureThrottle(storage, settings.auth_failure_limit, key_prefix=KEY_PREFIX)
    verify = VerifyLimit(storage, settings.verify_rate_limit, key_prefix=KEY_PREFIX)
    alerts = VerifyLimit(
        storage, settings.alerts_rate_limit, KEY_PREFIX, scope="alerts", what="alert requests"
    )
    # One line per refused request would let one client flood the log: one per interval.
    limit_repeats(failures.__name__, FLASK_LIMITER_LOGGER)
    return Limits(storage, guest, accounts, throttle, verify, alerts)
