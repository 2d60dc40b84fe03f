"""The production shape's deliveries: an RQ queue on Redis and its workers (issue 51, point 2).

RQ (python-rq) fits this stack: synchronous, Redis-based like the bus and the limits, plain
Python functions as jobs, workers that scale across hosts by pointing at the same Redis, a
scheduler built into its workers for delayed retries, and no broker of its own to run. The
alerts program enqueues the firings of one board change as jobs of at most ``CHUNK``
(``QueueDispatcher``); a worker (``python -m app.alerts worker``: RQ's ``SimpleWorker``, no
fork per job, so a call costs a call) runs ``deliver``: one attempt of each, ``CALLS_AT_ONCE``
at a time (``Deliverer.attempt_many``), recorded together, and those another attempt may
help whose firing has not expired are enqueued again after their backoff (the worker's
scheduler). Each job carries the firings themselves (their board's row included, once), so a
worker needs only the accounts database (the alerts' secrets and state) and the pepper.

At least once: a job lost with a worker killed mid-call is found by the program's sweep
(``sweep``): a delivery still pending, not expired, untouched for ``LOST_AFTER_S``, is queued
again under the same id (``webhook-id``), so the receiver may see it twice, never not at all
while its moment lasts. Redis restarted with jobs queued: the same sweep queues again what
was lost with it (the deliveries are rows in the accounts database, not only jobs)."""

from __future__ import annotations

import concurrent.futures
import logging
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from rq import Queue
from sqlalchemy import select, update
from sqlalchemy.engine import Engine

from app.alert_kinds import PENDING, AlertSpec
from app.alerts.calls import Firing
from app.alerts.delivery import Deliverer, backoff_s
from app.alerts.models import Delivery
from app.board import timefmt
from app.redis_pool import redis_client

log = logging.getLogger(__name__)

QUEUE = "probboard-alerts"
JOB_TIMEOUT_S = 30  # a call's own timeouts end it long before
LOST_AFTER_S = 20.0  # a pending delivery untouched this long was lost (ALERTS_LOST_AFTER_S)
CALLS_AT_ONCE = 32  # a worker's calls in flight
CHUNK = 200  # firings per job: a board change firing 1,000 alerts is 5 jobs, for 5 workers
_deliverer: Deliverer | None = None  # a worker's own, made on its first job
_pool: concurrent.futures.ThreadPoolExecutor | None = None


def as_job(firing: Firing) -> dict[str, Any]:
    """A firing as a job's argument (plain values: RQ pickles it, Redis keeps it). The row
    is the board's own object, not a copy: the firings of one board share it, so a job
    pickles it once (``dataclasses.asdict`` copied it per firing, a third of the program's
    time on a change firing 1,000 alerts)."""
    spec = firing.spec
    return {
        "delivery_id": firing.delivery_id,
        "alert_id": firing.alert_id,
        "spec": {
            "url": spec.url, "symbol": spec.symbol, "window": spec.window,
            "condition": spec.condition, "level": spec.level, "side": spec.side,
            "format": spec.format,
        },
        "row": firing.row,
        "updated_at": firing.updated_at,
        "expires_at": firing.expires_at,
    }  # fmt: skip


def from_job(payload: dict[str, Any]) -> Firing:
    """The firing a job carries."""
    spec = AlertSpec(**payload["spec"])
    return Firing(
        payload["delivery_id"], payload["alert_id"], spec, payload["row"],
        payload["updated_at"], float(payload["expires_at"]),
    )  # fmt: skip


class QueueDispatcher:
    """Enqueues firings on the alerts' RQ queue: those of one board change as one job."""

    def __init__(self, redis_url: str, timeout_s: float = 2.0) -> None:
        self._redis = redis_client(redis_url, timeout_s)
        self.queue = Queue(QUEUE, connection=self._redis)

    def dispatch_many(self, firings: list[Firing], attempts: int = 0) -> None:
        """Queue jobs of at most ``CHUNK`` firings each (several workers share a large board
        change), each making attempt ``attempts + 1`` of its firings at once."""
        due = [(as_job(f), attempts) for f in firings]
        for start in range(0, len(due), CHUNK):
            _enqueue(self.queue, due[start : start + CHUNK], None)

    def close(self) -> None:
        """Close the Redis connection."""
        self._redis.close()


Due = list[tuple[dict[str, Any], int]]  # (a firing as a job carries it, its attempts so far)


def _enqueue(queue: Queue, due: Due, after_s: float | None) -> None:
    """Queue ``deliver`` of ``due``, now or ``after_s`` from now (the worker's scheduler)."""
    first = due[0][0]["delivery_id"]
    options: dict[str, Any] = {
        "job_id": f"{first}-{len(due)}-{due[0][1]}-{int(time.time() * 1000)}",
        "job_timeout": JOB_TIMEOUT_S,
        "result_ttl": 0,
        "failure_ttl": 3600,
    }
    if after_s is None:
        queue.enqueue(deliver, due, **options)
    else:
        queue.enqueue_in(timedelta(seconds=after_s), deliver, due, **options)


def worker_deliverer(deliverer: Deliverer | None = None) -> Deliverer:
    """This worker's deliverer (set once by the worker's start, ``app.alerts.program``)."""
    global _deliverer
    if deliverer is not None:
        _deliverer = deliverer
    assert _deliverer is not None, "the worker sets its deliverer before its first job"
    return _deliverer


def _calls_pool() -> concurrent.futures.ThreadPoolExecutor:
    """The worker's threads for the calls of one job (made on the first)."""
    global _pool
    if _pool is None:
        _pool = concurrent.futures.ThreadPoolExecutor(CALLS_AT_ONCE, thread_name_prefix="call")
    return _pool


def deliver(due: Due) -> None:
    """RQ's job: one attempt of each firing of ``due``, at once; those another attempt may
    help and whose moment lasts are queued again after their backoff, together."""
    from rq import get_current_job

    deliverer = worker_deliverer()
    done = deliverer.attempt_many([(from_job(p), a) for p, a in due], _calls_pool())
    again: dict[int, Due] = {}
    for firing, attempts, outcome in done:
        if not deliverer.final(firing, attempts, outcome):
            again.setdefault(attempts, []).append((as_job(firing), attempts))
    if not again:
        return
    job = get_current_job()
    assert job is not None
    queue = Queue(job.origin, connection=job.connection)
    for attempts, group in again.items():
        _enqueue(queue, group, backoff_s(attempts))


def sweep(
    engine: Engine,
    dispatcher: QueueDispatcher,
    firings: dict[str, Firing],
    lost_after_s: float = LOST_AFTER_S,
) -> int:
    """Queue again the pending deliveries lost with their job (see the module docstring):
    those of ``firings`` (the program's own, kept until they end) untouched for
    ``lost_after_s`` and not expired (on the service clock, as their expiry), all touched in
    one transaction and queued by their attempts so far. Returns how many."""
    now = datetime.now(UTC).replace(tzinfo=None)
    cutoff = now - timedelta(seconds=lost_after_s)
    with engine.connect() as conn:
        rows = conn.execute(
            select(Delivery.id, Delivery.status, Delivery.attempts, Delivery.updated_at).where(
                Delivery.id.in_(list(firings))
            )
        ).all()
    lost: dict[int, list[Firing]] = {}
    for row in rows:
        firing = firings[row.id]
        if row.status != PENDING or firing.expires_at <= timefmt.now():
            firings.pop(row.id, None)  # ended, or its moment passed: nothing more to do
        elif row.updated_at <= cutoff:
            lost.setdefault(row.attempts, []).append(firing)
    if not lost:
        return 0
    again = [f.delivery_id for group in lost.values() for f in group]
    with engine.begin() as conn:  # touched now: the next sweep waits again
        conn.execute(update(Delivery).where(Delivery.id.in_(again)).values(updated_at=now))
    log.warning("alerts: %d deliveries were lost with their jobs; queued again", len(again))
    for attempts, group in lost.items():
        dispatcher.dispatch_many(group, attempts)
    return len(again)
