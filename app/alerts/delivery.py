"""Delivering a firing: attempts, retries, the record of each, and pausing a failing alert
(issue 51, point 3).

``Deliverer.attempt`` makes one call (``calls.call``) with the alert's secret read back from
the accounts database, and records it on the delivery (attempts, HTTP status, latency, our
word on a failure). A failure that may pass (a timeout, a refused connection, a 5xx or a
429) is tried again after ``BACKOFF_S`` (0.5 s, doubling), never after the firing's expiry
(its window's end) and at most ``MAX_ATTEMPTS`` times; one that will not (a redirect, a 4xx,
a target refused) ends it at once. A delivery that ends without a 2xx counts a failure of its
alert; ``MAX_FAILURES`` in a row pause it, with why. A 2xx clears the count. At least once:
a delivery retried after a call the receiver got counts twice there, under one
``webhook-id``.

``LocalDispatcher`` runs deliveries on the process's own threads (the embedded shape: no
Redis); the production shape queues them (``app.alerts.queue``).
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import httpx
from sqlalchemy import select, update
from sqlalchemy.engine import Connection, Engine

from app.alerts import calls
from app.alerts.calls import Firing, Outcome
from app.alerts.models import ACTIVE, DELIVERED, EXPIRED, FAILED, PAUSED, Alert, Delivery
from app.alerts.secrets import SecretBox, SecretUnreadableError
from app.alerts.targets import AllowList, Resolver, system_resolver
from app.board import timefmt

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 6
BACKOFF_S = 0.5
MAX_FAILURES = 5  # deliveries in a row that ended without a 2xx: the alert is paused


def backoff_s(attempts: int) -> float:
    """The wait before attempt ``attempts + 1``."""
    return BACKOFF_S * 2.0 ** (attempts - 1)


class Deliverer:
    """One process's means to call and record: the accounts database, the secrets' box, the
    allow-list, an HTTP client."""

    def __init__(
        self,
        engine: Engine,
        box: SecretBox,
        allowed: AllowList,
        resolver: Resolver = system_resolver,
        clock: Callable[[], float] = timefmt.now,
    ) -> None:
        self._engine = engine
        self._box = box
        self._allowed = allowed
        self._resolver = resolver
        self._clock = clock
        self._client: httpx.Client = calls.client()

    def close(self) -> None:
        """Close the HTTP client."""
        self._client.close()

    def attempt(self, firing: Firing, attempts: int) -> Outcome:
        """Attempt number ``attempts + 1`` of ``firing``, recorded; the outcome."""
        with self._engine.connect() as conn:
            alert = conn.execute(
                select(Alert.status, Alert.secret_encrypted).where(Alert.id == firing.alert_id)
            ).first()
        if alert is None or alert.status != ACTIVE:
            outcome = Outcome(False, False, None, None, "the alert was deleted or paused")
        else:
            try:
                secret = self._box.open(alert.secret_encrypted)
            except SecretUnreadableError:
                outcome = Outcome(False, False, None, None, "the alert's secret is unreadable")
            else:
                outcome = calls.call(
                    self._client, firing, secret, self._allowed, self._resolver, self._clock
                )
        self._record(firing, attempts + 1, outcome)
        return outcome

    def final(self, firing: Firing, attempts: int, outcome: Outcome) -> bool:
        """Whether no attempt follows ``outcome`` (the attempt numbered ``attempts``)."""
        if outcome.delivered or not outcome.retry or attempts >= MAX_ATTEMPTS:
            return True
        return self._clock() + backoff_s(attempts) >= firing.expires_at

    def _record(self, firing: Firing, attempts: int, outcome: Outcome) -> None:
        """The delivery's row after an attempt; the alert's failures after its last one."""
        final = self.final(firing, attempts, outcome)
        if outcome.delivered:
            status = DELIVERED
        elif final:
            expired = outcome.retry and self._clock() + backoff_s(attempts) >= firing.expires_at
            status = EXPIRED if expired or "expired" in (outcome.error or "") else FAILED
        else:
            status = "pending"
        with self._engine.begin() as conn:
            conn.execute(
                update(Delivery)
                .where(Delivery.id == firing.delivery_id)
                .values(
                    status=status,
                    attempts=attempts,
                    http_status=outcome.http_status,
                    latency_ms=outcome.latency_ms,
                    error=outcome.error,
                    # When the next attempt is due (now, after the last): the sweep of lost
                    # deliveries counts from it, never from a retry's wait.
                    updated_at=_now() + timedelta(seconds=0 if final else backoff_s(attempts)),
                )
            )
            if outcome.delivered:
                conn.execute(update(Alert).where(Alert.id == firing.alert_id).values(failures=0))
            elif final:
                self._count_failure(conn, firing.alert_id, outcome.error or "failed")

    def _count_failure(self, conn: Connection, alert_id: str, why: str) -> None:
        """One more delivery of ``alert_id`` ended without a 2xx: paused at the limit."""
        row = conn.execute(select(Alert.failures, Alert.status).where(Alert.id == alert_id)).first()
        if row is None:
            return
        failures = row.failures + 1
        values: dict[str, object] = {"failures": failures, "updated_at": _now()}
        if failures >= MAX_FAILURES and row.status == ACTIVE:
            reason = f"{failures} deliveries failed in a row: {why}"
            values.update(status=PAUSED, paused_reason=reason[:200])
            log.warning("alert %s paused after %d failed deliveries", alert_id, failures)
        conn.execute(update(Alert).where(Alert.id == alert_id).values(**values))


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


class LocalDispatcher:
    """Deliveries on this process's threads (the embedded shape), retried in place."""

    def __init__(self, deliverer: Deliverer, threads: int = 8) -> None:
        self._deliverer = deliverer
        self._pool = concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="alert")
        self._stopping = threading.Event()

    def dispatch(self, firing: Firing) -> None:
        """Deliver ``firing`` on a thread of the pool."""
        self._pool.submit(self._deliver, firing)

    def _deliver(self, firing: Firing) -> None:
        attempts = 0
        try:
            while not self._stopping.is_set():
                outcome = self._deliverer.attempt(firing, attempts)
                attempts += 1
                if self._deliverer.final(firing, attempts, outcome):
                    return
                self._stopping.wait(backoff_s(attempts))
        except Exception:
            log.exception("alerts: delivery %s failed on our side", firing.delivery_id)

    def close(self) -> None:
        """Stop retrying; wait a moment for calls under way."""
        self._stopping.set()
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._deliverer.close()
