"""The stream's ticker: a thread (a greenlet under gevent) that re-renders the board while it
is stale (so clients see its age grow), renews stream leases, re-checks keys (revoked,
disabled or downgraded keys lose their streams) and notices worker shutdown."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from app.board.timefmt import now_ms
from app.stream import events
from app.stream.client import Client
from app.stream.fanout import FanOut
from app.stream.slots import StreamSlots

log = logging.getLogger(__name__)

TICK_S = 0.25
RECHECK_S = 10.0
RENEW_S = 5.0  # leases last LEASE_S (15 s): two renewals may fail before one lapses
RENEW_RETRY_S = 1.0
STALE_REFRESH_S = 1.0

# A key check returns None when the key may keep streaming, else the ErrorResponse JSON.
KeyCheck = Callable[[str], str | None]


class Ticker:
    """The broker's periodic work; see the module docstring. ``clients`` is the broker's set
    of open streams, ``lock`` the lock that guards it."""

    def __init__(
        self,
        fan: FanOut,
        slots: StreamSlots,
        clients: set[Client],
        lock: threading.Lock,
        stale_ms: int,
        run_in_context: Callable[[Callable[[], None]], None],
        clock: Callable[[], float] = time.monotonic,
        wall_ms: Callable[[], int] = now_ms,
    ) -> None:
        self._fan = fan
        self._slots = slots
        self._clients = clients
        self._lock = lock
        self._stale_ms = stale_ms
        self._run_in_context = run_in_context
        self._thread: threading.Thread | None = None
        self._rechecking = False
        self.fresh: list[Client] = []  # new streams, whose short first lease is renewed next
        self.alive: Callable[[], bool] = lambda: True
        self.key_check: KeyCheck | None = None
        # Injected so a test drives the schedule (``step``) instead of sleeping through it.
        self._clock = clock
        self._wall_ms = wall_ms
        self._last_recheck = self._last_renew = self._last_restale = clock()
        self._renew_every = RENEW_S

    def ensure_started(self) -> None:
        """Start the ticker's thread unless it runs already."""
        if self._thread is not None:
            return
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._tick_forever, name="probboard-stream-ticker", daemon=True
                )
                self._thread.start()

    def _tick_forever(self) -> None:
        while not self._fan.closing:
            time.sleep(TICK_S)
            if not self.step(self._clock()):
                return

    def step(self, now: float) -> bool:
        """One tick at monotonic time ``now``: end every stream if the worker is stopping
        (then False), else do whatever is due (a stale board's re-render, lease renewals,
        a key re-check) and return True. A failing step is logged; the next one runs."""
        if not self.alive():
            log.info("worker stopping: ending %d streams", len(self._clients))
            self._fan.close()
            return False
        try:
            if now - self._last_restale >= STALE_REFRESH_S:
                self._last_restale = now
                self._refresh_if_stale()
            if now - self._last_renew >= self._renew_every and self._clients:
                self._last_renew = now
                # After a failed renewal (Redis away or hung) try every second, so
                # leases are back in Redis within a second of it answering again.
                renewed = self._renew_leases(list(self._clients))
                self._renew_every = RENEW_S if renewed else RENEW_RETRY_S
            elif self.fresh:
                self._renew_leases(self.fresh)
            if now - self._last_recheck >= RECHECK_S and self._clients:
                self._last_recheck = now
                self._start_recheck()
        except Exception:
            log.exception("stream ticker step failed")
        return True

    def _renew_leases(self, live: list[Client]) -> bool:
        with self._lock:
            self.fresh = []
        renewed = self._slots.renew([(c.key_id, c.conn_id) for c in live])
        # A stream that ended while the renewal was on its way may have had its lease
        # written back after it removed it: remove those again.
        for client in live:
            if client not in self._clients:
                self._slots.release(client.key_id, client.conn_id)
        return renewed

    def _refresh_if_stale(self) -> None:
        snapshot = self._fan.snapshot
        if snapshot is not None and self._wall_ms() - snapshot.ts_ms > self._stale_ms:
            self._fan.publish(snapshot)  # same board and id, its age and latencyLevel updated

    def _start_recheck(self) -> None:
        """Re-check keys in a thread of its own: the ticker (leases, shutdown) never waits
        on the database, and a re-check still running is not started twice."""
        if self._rechecking:
            return
        self._rechecking = True

        def run() -> None:
            try:
                self._run_in_context(self._recheck_keys)
            except Exception:
                log.exception("stream key re-check failed")
            finally:
                self._rechecking = False

        threading.Thread(target=run, name="probboard-stream-recheck", daemon=True).start()

    def _recheck_keys(self) -> None:
        check = self.key_check
        if check is None:
            return
        verdicts: dict[str, str | None] = {}
        ended = 0
        unchecked = 0
        for client in list(self._clients):
            if client.key_digest not in verdicts:
                try:
                    verdicts[client.key_digest] = check(client.key_digest)
                except Exception as exc:
                    # The store cannot answer: the last answer (it may stream) stands, and
                    # the next re-check tries again.
                    verdicts[client.key_digest] = None
                    unchecked += 1
                    if unchecked == 1:
                        log.warning("stream key re-check deferred: %s", type(exc).__name__)
            verdict = verdicts[client.key_digest]
            if verdict is not None and client.ended is None:
                client.ended = events.error_event(verdict)
                ended += 1
        if ended:
            log.info("ended %d streams whose keys lost the entitlement", ended)
            self._fan.wake_all()
            self._fan.wake_direct()
