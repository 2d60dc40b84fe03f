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

import httpcore
from sqlalchemy import bindparam, select, update
from sqlalchemy.engine import Connection, Engine

from app.alerts import calls
from app.alerts.calls import Firing, Outcome
from app.alerts.models import ACTIVE, DELIVERED, EXPIRED, FAILED, PAUSED, PENDING, Alert, Delivery
from app.alerts.secrets import SecretBox, SecretUnreadableError
from app.alerts.targets import AllowList, Resolver, system_resolver
from app.board import timefmt

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 6
BACKOFF_S = 0.5
MAX_FAILURES = 5  # deliveries in a row that ended without a 2xx: the alert is paused
UNREADABLE = Outcome(False, False, None, None, "the alert's secret is unreadable")


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
        self._client: httpcore.ConnectionPool = calls.client()

    def close(self) -> None:
        """Close the HTTP client."""
        self._client.close()

    def attempt(self, firing: Firing, attempts: int) -> Outcome:
        """Attempt number ``attempts + 1`` of ``firing``, recorded; the outcome."""
        [(_, _, outcome)] = self.attempt_many([(firing, attempts)])
        return outcome

    def attempt_many(
        self, due: list[tuple[Firing, int]], pool: concurrent.futures.Executor | None = None
    ) -> list[tuple[Firing, int, Outcome]]:
        """One attempt of each firing of ``due`` (with its attempts so far), on ``pool``'s
        threads when given (the calls of one board change at once, over kept-alive
        connections): the alerts and their secrets read in one query, the outcomes recorded
        in one transaction. Returns (firing, attempts made, outcome) of each."""
        ids = sorted({firing.alert_id for firing, _ in due})
        with self._engine.connect() as conn:
            rows = conn.execute(
                select(Alert.id, Alert.status, Alert.secret_encrypted).where(Alert.id.in_(ids))
            ).all()
        secrets: dict[str, str | Outcome] = {}
        for row in rows:
            if row.status != ACTIVE:
                continue
            try:
                secrets[row.id] = self._box.open(row.secret_encrypted)
            except SecretUnreadableError:
                secrets[row.id] = UNREADABLE

        def one(item: tuple[Firing, int]) -> Outcome:
            secret = secrets.get(item[0].alert_id)
            if secret is None:
                return Outcome(False, False, None, None, "the alert was deleted or paused")
            if isinstance(secret, Outcome):
                return secret
            return calls.call(
                self._client, item[0], secret, self._allowed, self._resolver, self._clock
            )

        outcomes = list(pool.map(one, due)) if pool is not None else [one(i) for i in due]
        done = [(f, a + 1, o) for (f, a), o in zip(due, outcomes, strict=True)]
        self._record_many(done)
        return done

    def final(self, firing: Firing, attempts: int, outcome: Outcome) -> bool:
        """Whether no attempt follows ``outcome`` (the attempt numbered ``attempts``)."""
        if outcome.delivered or not outcome.retry or attempts >= MAX_ATTEMPTS:
            return True
        return self._clock() + backoff_s(attempts) >= firing.expires_at

    def _record_many(self, done: list[tuple[Firing, int, Outcome]]) -> None:
        """Each delivery's row after its attempt, and its alert's failures after its last
        one, in one transaction."""
        rows, cleared, failed = [], set(), []
        for firing, attempts, outcome in done:
            final = self.final(firing, attempts, outcome)
            if outcome.delivered:
                status = DELIVERED
                cleared.add(firing.alert_id)
            elif final:
                expired = outcome.retry and self._clock() + backoff_s(attempts) >= firing.expires_at
                status = EXPIRED if expired or "expired" in (outcome.error or "") else FAILED
                failed.append((firing.alert_id, outcome.error or "failed"))
            else:
                status = PENDING
            rows.append({
                "b_id": firing.delivery_id, "status": status, "attempts": attempts,
                "http_status": outcome.http_status, "latency_ms": outcome.latency_ms,
                "error": outcome.error,
                # When the next attempt is due (now, after the last): the sweep of lost
                # deliveries counts from it, never from a retry's wait.
                "updated_at": _now() + timedelta(seconds=0 if final else backoff_s(attempts)),
            })  # fmt: skip
        statement = (
            update(Delivery)
            .where(Delivery.id == bindparam("b_id"))
            .values(
                status=bindparam("status"), attempts=bindparam("attempts"),
                http_status=bindparam("http_status"), latency_ms=bindparam("latency_ms"),
                error=bindparam("error"), updated_at=bindparam("updated_at"),
            )
        )  # fmt: skip
        with self._engine.begin() as conn:
            conn.execute(statement, rows)
            if cleared:
                # Only those that had failures: a success of a clean alert writes nothing.
                conn.execute(
                    update(Alert)
                    .where(Alert.id.in_(cleared), Alert.failures != 0)
                    .values(failures=0)
                )
            for alert_id, why in failed:
                self._count_failure(conn, alert_id, why)

    def _count_failure(self, conn: Connection, alert_id: str, why: str) -> None:
        """One more delivery of ``alert_id`` ended without a 2xx: paused at the limit. The
        count is one atomic increment: deliveries of one alert end on several threads and
        workers at once, and a read then a write lost their counts (an alert failing five
        times in a row stayed active)."""
        counted = conn.execute(
            update(Alert)
            .where(Alert.id == alert_id)
            .values(failures=Alert.failures + 1, updated_at=_now())
            .returning(Alert.failures)
        ).first()
        if counted is None or counted.failures < MAX_FAILURES:
            return
        reason = f"{counted.failures} deliveries failed in a row: {why}"
        paused = conn.execute(
            update(Alert)
            .where(Alert.id == alert_id, Alert.status == ACTIVE)
            .values(status=PAUSED, paused_reason=reason[:200])
        )
        if paused.rowcount:
            log.warning("alert %s paused after %d failed deliveries", alert_id, counted.failures)


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


class LocalDispatcher:
    """Deliveries on this process's threads (the embedded shape), retried in place."""

    def __init__(self, deliverer: Deliverer, threads: int = 8) -> None:
        self._deliverer = deliverer
        self._pool = concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="alert")
        self._calls = concurrent.futures.ThreadPoolExecutor(32, thread_name_prefix="call")
        self._stopping = threading.Event()

    def dispatch_many(self, firings: list[Firing]) -> None:
        """Deliver ``firings`` (one board change's) at once, retried in place."""
        if firings:
            self._pool.submit(self._deliver, firings)

    def _deliver(self, firings: list[Firing]) -> None:
        due = [(firing, 0) for firing in firings]
        try:
            while due and not self._stopping.is_set():
                done = self._deliverer.attempt_many(due, self._calls)
                due = [(f, a) for f, a, o in done if not self._deliverer.final(f, a, o)]
                if due:  # one wait for the group: the shortest of their backoffs
                    self._stopping.wait(min(backoff_s(a) for _, a in due))
        except Exception:
            log.exception("alerts: %d deliveries failed on our side", len(firings))

    def close(self) -> None:
        """Stop retrying; wait a moment for calls under way."""
        self._stopping.set()
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._calls.shutdown(wait=False, cancel_futures=True)
        self._deliverer.close()
