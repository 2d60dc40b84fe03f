"""Which refresher publishes: a lease in Redis, and the fence that the publish itself checks.

Any number of refreshers may run on one Redis bus. Each keeps its upstream connections warm;
the one holding the lease (``SET NX PX`` on ``LEADER_KEY``, renewed every third of the lease)
publishes. The others try to take it every ``STANDBY_POLL_S`` and win it once it lapses.

The lease alone does not stop a paused leader (a long GC pause, a stalled VM) from publishing
after its lease ran out and another took over. So every publish carries the holder's token
and the bus checks it atomically with the write (``app.bus.redis_bus``): a refresher that lost
its lease can never publish again until it wins one. The same script only accepts a ``seq``
above the last one published, so ``seq`` keeps increasing across a failover.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable

import redis

from app.bus.redis_bus import LEADER_KEY, SEQ_KEY
from app.metrics.common import REDIS_ERRORS as REDIS_ERRORS_TOTAL
from app.metrics.refresher import LEADING
from app.redis_pool import PoolBusyError, redis_client

log = logging.getLogger(__name__)

STANDBY_POLL_S = 0.1  # how often a standby tries to take a lapsed lease
REDIS_ERRORS = (redis.RedisError, OSError)

# Take the lease when nobody holds it, or renew it when we do; either way say what seq the
# bus is at (so a new leader numbers its boards after it). {1, seq} leading, {0, holder} not.
_ACQUIRE = """
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
elseif not holder then
  redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])
else
  return {0, holder}
end
return {1, redis.call('GET', KEYS[2]) or '0'}
"""
# Give the lease up (a clean stop): only ours.
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


def _name_of(token: str) -> str:
    """The ``host:pid`` of a lease token (``host:pid:random``)."""
    return token.rsplit(":", 1)[0]


def holder_name() -> str:
    """How this refresher is named in the lease and the logs: ``host:pid``."""
    return f"{socket.gethostname()}:{os.getpid()}"


class Leadership:
    """This refresher's side of the lease; see the module docstring.

    ``token`` is what the bus checks on publish (the name plus a random part, so a restarted
    process on a reused pid is still someone else). ``leading`` turns False on its own when
    the lease could not be renewed before it would have lapsed.
    """

    def __init__(
        self,
        url: str,
        lease_ms: int,
        name: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name or holder_name()
        self.token = f"{self.name}:{secrets.token_hex(4)}"
        self.lease_ms = lease_ms
        # Each call must end well inside the lease: a renewal that waits longer is no use.
        self._client = redis_client(url, timeout_s=min(1.0, lease_ms / 4000), size=2)
        self._acquire = self._client.register_script(_ACQUIRE)
        self._release = self._client.register_script(_RELEASE)
        self._clock = clock
        self._valid_until = -1.0
        self._lock = threading.Lock()
        self._was_leading = False
        self._failing = False
        self.holder: str | None = None  # who leads, as last seen
        self.bus_seq = 0  # the bus's seq when the lease was last taken or renewed
        self.on_elected: Callable[[int], None] | None = None

    @property
    def leading(self) -> bool:
        """True while this refresher holds a lease that has not lapsed by its own clock."""
        return self._clock() < self._valid_until

    def step(self) -> bool:
        """Take or renew the lease (one round trip); whether this refresher leads now."""
        started = self._clock()
        if self._was_leading and not self.leading:
            # It lapsed before it could be renewed: winning it again is a new election.
            log.warning("the lease lapsed before it could be renewed")
            self._was_leading = False
        try:
            leading, value = self._acquire(
                keys=[LEADER_KEY, SEQ_KEY], args=[self.token, self.lease_ms]
            )
        except (*REDIS_ERRORS, PoolBusyError) as exc:
            REDIS_ERRORS_TOTAL.labels("leader_lease").inc()
            if not self._failing:
                log.warning("leader lease: Redis did not answer (%s)", type(exc).__name__)
            self._failing = True
            self._changed()
            return self.leading
        if self._failing:
            log.info("leader lease: Redis answers again")
            self._failing = False
        text = value.decode() if isinstance(value, bytes) else str(value)
        with self._lock:
            if leading:
                # The lease runs from when it was asked for, not from the answer.
                self._valid_until = started + self.lease_ms / 1000
                self.holder = self.name
                self.bus_seq = int(text)
            else:
                self._valid_until = -1.0
                self.holder = _name_of(text)
        self._changed()
        return self.leading

    def lost(self) -> None:
        """The bus refused a publish: the lease is someone else's (or gone)."""
        with self._lock:
            self._valid_until = -1.0
        self._changed()

    def _changed(self) -> None:
        leading = self.leading
        if leading == self._was_leading:
            return
        self._was_leading = leading
        LEADING.set(1 if leading else 0)
        if leading:
            log.info("leading: this refresher (%s) publishes from seq %d", self.name, self.bus_seq)
            if self.on_elected is not None:
                self.on_elected(self.bus_seq)
        else:
            log.warning("standing by: the lease is held by %s", self.holder or "nobody (lapsed)")

    def release(self) -> None:
        """Give the lease up, if held, so a standby takes over at once (a clean stop)."""
        try:
            released = self._release(keys=[LEADER_KEY], args=[self.token])
        except (*REDIS_ERRORS, PoolBusyError):
            released = 0
        with self._lock:
            self._valid_until = -1.0
            self._was_leading = False
        LEADING.set(0)
        if released:
            log.info("released the lease: a standby takes over")

    def run(self, stop: threading.Event) -> None:
        """Renew every third of the lease while leading; try every ``STANDBY_POLL_S`` when not."""
        renew_s = self.lease_ms / 3000
        while not stop.is_set():
            try:
                leading = self.step()
            except Exception:  # a bug here must not end the lease loop for good
                log.exception("leader lease step failed")
                leading = False
            stop.wait(renew_s if leading else STANDBY_POLL_S)

    def start_background(self, stop: threading.Event) -> threading.Thread:
        """Run the lease loop in a daemon thread until ``stop`` is set."""
        thread = threading.Thread(
            target=self.run, args=(stop,), name="probboard-lease", daemon=True
        )
        thread.start()
        return thread

    def close(self) -> None:
        """Release the lease and the connections."""
        self.release()
        self._client.close()


def who_leads(url: str) -> tuple[str | None, int | None, int]:
    """(holder ``host:pid`` or None, lease time left in ms or None, the bus's seq)."""
    client = redis_client(url, timeout_s=2.0, size=1)
    try:
        pipe = client.pipeline(transaction=False)
        pipe.get(LEADER_KEY)
        pipe.pttl(LEADER_KEY)
        pipe.get(SEQ_KEY)
        token, ttl, seq = pipe.execute()
    finally:
        client.close()
    holder = _name_of(token.decode()) if token else None
    return holder, (int(ttl) if ttl and ttl > 0 else None), int(seq or 0)
