"""Per-account limits on ``/latest`` (``USER_RATE_LIMIT``, ``VIP_PRO_RATE_LIMIT``): exact, and
almost free for the callers who call most.

Every request served is counted in the shared sliding window (Redis, through the limiter's
storage) before it is served, so an account never gets more than its limit, whichever
workers and machines serve it. What changes with the caller's pace is how many slots one
round trip takes:

- a caller polling at its plan's ``refreshMs`` takes one slot per request: one round
  trip, batched with the other requests of the moment (``batching.py``);
- a caller sending many requests makes its worker reserve several slots at once (enough
  for its pace over the next ``AHEAD_S``, at most a tenth of the room left in its window
  shared among the workers) and hand them out locally; the next reservation is made
  while a third of the slots are still left, so nobody waits for one.

A reserved slot is counted when it is reserved, so reserving never admits more than the
limit; slots not handed out within ``HOLD_S`` are dropped (counted, never served). Only a
caller sending more than one request per ``PACE_S`` per worker ever reserves, and when its
burst stops it loses at most ``AHEAD_S`` of its pace.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field

from limits import RateLimitItem
from limits.storage import Storage
from limits.util import WindowStats

from app.errors import ApiError, too_many_requests
from app.limits.sliding import SlidingWindowCounter

# A caller's pace is measured over PACE_S; a reservation covers AHEAD_S of it (long next
# to a round trip on a busy worker, short next to any window); held slots last HOLD_S.
PACE_S = 0.1
AHEAD_S = 0.3
HOLD_S = 1.0
# A request finding a reservation in flight waits for it (at most this long, this often).
IN_FLIGHT_WAIT_S = 1.0
WAITS = 3
# Past this many accounts in a worker's table, those idle for a while are forgotten.
TABLE_SIZE = 4096


@dataclass(frozen=True)
class Quota:
    """What the X-RateLimit headers say of a request's window (admitted, or full)."""

    limit: int
    remaining: int
    reset_at: float

    def headers(self) -> dict[str, str]:
        """``X-RateLimit-Limit``, ``-Remaining`` (never below 0) and ``-Reset`` (unix s)."""
        return {
            "X-RateLimit-Limit": str(self.limit),
            "X-RateLimit-Remaining": str(max(0, self.remaining)),
            "X-RateLimit-Reset": str(math.ceil(self.reset_at)),
        }


@dataclass
class _Account:
    identifiers: tuple[str, ...]
    held: int = 0
    held_until: float = 0.0
    in_flight: threading.Event | None = None  # set when a reservation comes back
    low_water: int = 0  # below this many held slots, the next request reserves more
    pace_since: float = 0.0
    pace_count: int = 0
    last_pace: int = 0
    # Per limit of the plan, at the last reservation: the window's weighted count (as far as
    # the limit; more is never needed) and when it next has room.
    counted: list[int] = field(default_factory=list)
    reset_at: list[float] = field(default_factory=list)


def too_many(item: RateLimitItem, retry_after_ms: int) -> ApiError:
    """The 429 for an account over its plan's limit (worded as the guests' one)."""
    return too_many_requests(
        f"Too many requests ({item}); retry after the delay given.", retry_after_ms
    )


class AccountLimits:
    """Admits or refuses an account's requests against its plan's limits."""

    def __init__(
        self,
        storage: Storage,
        limits: dict[str, list[RateLimitItem]],
        workers: int,
        key_prefix: str,
    ) -> None:
        self._strategy = SlidingWindowCounter(storage)
        self._plan_limits = {plan: sorted(items) for plan, items in limits.items() if items}
        self._workers = max(1, workers)
        self._prefix = key_prefix
        self._accounts: dict[tuple[int, str], _Account] = {}
        self._lock = threading.Lock()

    def admit(self, account_id: int, plan: str) -> Quota | None:
        """Count one request of the account; raises the 429 when it is over its plan's limit.

        None for a plan without limits (admin).
        """
        items = self._plan_limits.get(plan)
        if items is None:
            return None
        now = time.time()
        with self._lock:
            account = self._account(account_id, plan, items, now)
            self._measure_pace(account, now)
        for _ in range(WAITS):
            served: Quota | None = None
            refill = 0
            in_flight: threading.Event | None = None
            with self._lock:
                if now >= account.held_until:
                    account.held = 0
                if account.held > 0:
                    account.held -= 1
                    served = self._quota(items, account)
                    if account.in_flight is None and account.held < account.low_water:
                        # Running low: reserve more now, before anyone has to wait for it.
                        refill = self._reservation_size(items, account)
                        if refill > 1:
                            account.in_flight = threading.Event()
                else:
                    full = self._full(items, account, now)
                    if full is not None:
                        # Over the limit until then: no round trip could say otherwise.
                        raise self._refusal(items, account, full, now)
                    in_flight = account.in_flight
                    if in_flight is None:
                        want = self._reservation_size(items, account)
                        if want > 1:
                            account.in_flight = threading.Event()
                        break
            if served is not None:
                if refill > 1:
                    self._reserve(account, items, refill, for_self=False)
                return served
            if in_flight is not None:
                # Another request is reserving for this account: share what it brings.
                in_flight.wait(IN_FLIGHT_WAIT_S)
            now = time.time()
        else:
            want = 1  # still nothing for us: take our own slot
        if self._reserve(account, items, want, for_self=True):
            with self._lock:
                return self._quota(items, account)
        raise self._refusal(items, account, self._full(items, account, now) or 0, now)

    def _reservation_size(self, items: list[RateLimitItem], account: _Account) -> int:
        """How many slots to take at once: the caller's recent pace, within a fair share."""
        room = min(i.amount - c for i, c in zip(items, account.counted, strict=True))
        ahead = math.ceil(account.last_pace * AHEAD_S / PACE_S)
        return max(1, min(ahead, room // (10 * self._workers)))

    def _reserve(
        self, account: _Account, items: list[RateLimitItem], want: int, for_self: bool
    ) -> bool:
        """Take ``want`` slots (one for this request when ``for_self``); True when taken."""
        owns_flight = want > 1
        try:
            taken, stats = self._take(account, items, want)
            if not taken and want > 1 and for_self:
                taken, stats = self._take(account, items, 1)
                want = 1
            now = time.time()
            with self._lock:
                pairs = zip(items, stats, strict=True)
                account.counted = [item.amount - window.remaining for item, window in pairs]
                account.reset_at = [s.reset_time for s in stats]
                if taken:
                    account.held += want - 1 if for_self else want
                    account.held_until = now + HOLD_S
                    account.low_water = want // 3
            return taken
        finally:
            if owns_flight:
                with self._lock:
                    in_flight, account.in_flight = account.in_flight, None
                if in_flight is not None:
                    in_flight.set()

    @staticmethod
    def _full(items: list[RateLimitItem], account: _Account, now: float) -> int | None:
        """The first limit with no room left until its reset, if any."""
        for i, item in enumerate(items):
            if account.counted[i] >= item.amount and now < account.reset_at[i]:
                return i
        return None

    @staticmethod
    def _refusal(items: list[RateLimitItem], account: _Account, full: int, now: float) -> ApiError:
        retry_ms = max(1, math.ceil((account.reset_at[full] - now) * 1000))
        return too_many(items[full], retry_ms)

    def _account(
        self, account_id: int, plan: str, items: list[RateLimitItem], now: float
    ) -> _Account:
        account = self._accounts.get((account_id, plan))
        if account is None:
            if len(self._accounts) >= TABLE_SIZE:
                self._forget_idle(now)
            identifiers = (self._prefix, f"account:{account_id}", "latest")
            account = _Account(identifiers, counted=[0] * len(items), reset_at=[now] * len(items))
            self._accounts[(account_id, plan)] = account
        return account

    @staticmethod
    def _measure_pace(account: _Account, now: float) -> None:
        elapsed = now - account.pace_since
        if elapsed >= PACE_S or elapsed < 0:
            account.last_pace = account.pace_count if elapsed < 2 * PACE_S else 0
            account.pace_since = now
            account.pace_count = 0
        account.pace_count += 1

    def _take(
        self, account: _Account, items: list[RateLimitItem], amount: int
    ) -> tuple[bool, list[WindowStats]]:
        """Take ``amount`` from every limit (as flask-limiter did: each one it reaches).

        The window read after a hit is the one the hit reported (failover.py): no round trip.
        """
        taken = True
        stats = []
        for item in items:
            if taken:
                taken = self._strategy.hit(item, *account.identifiers, cost=amount)
            stats.append(self._strategy.get_window_stats(item, *account.identifiers))
        return taken, stats

    @staticmethod
    def _quota(items: list[RateLimitItem], account: _Account) -> Quota:
        tightest = 0
        if len(items) > 1:
            tightest = min(range(len(items)), key=lambda i: items[i].amount - account.counted[i])
        amount = items[tightest].amount
        remaining = max(0, amount - account.counted[tightest]) + account.held
        return Quota(amount, min(amount, remaining), account.reset_at[tightest])

    def _forget_idle(self, now: float) -> None:
        idle = [k for k, a in self._accounts.items() if now - a.pace_since > 1.0]
        for k in idle:
            del self._accounts[k]
