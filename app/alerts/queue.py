"""The production shape's deliveries: an RQ queue on Redis and its workers (issue 51, point 2).

RQ (python-rq) fits this stack: synchronous, Redis-based like the bus and the limits, plain
Python functions as jobs, workers that scale across hosts by pointing at the same Redis, a
scheduler built into its workers for delayed retries, and no broker of its own to run. The
alerts program enqueues one job per firing (``QueueDispatcher``); a worker (``python -m
app.alerts worker``: RQ's ``SimpleWorker``, no fork per job, so a call costs a call) runs
``deliver``: one attempt (``Deliverer.attempt``), recorded, and when another may help and the
firing has not expired, the next attempt is enqueued after its backoff (the worker's
scheduler). Each job carries the firing itself (its row included), so a worker needs only
the accounts database (the alert's secret and state) and the pepper.

At least once: a job lost with a worker killed mid-call is found by the program's sweep
(``sweep``): a delivery still pending, not expired, untouched for ``LOST_AFTER_S``, is queued
again under the same id (``webhook-id``), so the receiver may see it twice, never not at all
while its moment lasts. Redis restarted with jobs queued: the same sweep queues again what
was lost with it (the deliveries are rows in the accounts database, not only jobs).
"""

from __future__ import annotations

import dataclasses
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
from app.redis_pool import redis_client

log = logging.getLogger(__name__)

QUEUE = "probboard-alerts"
JOB_TIMEOUT_S = 30  # a call's own timeouts end it long before
LOST_AFTER_S = 20.0  # a pending delivery untouched this long was lost (ALERTS_LOST_AFTER_S)
_deliverer: Deliverer | None = None  # a worker's own, made on its first job


def as_job(firing: Firing) -> dict[str, Any]:
    """A firing as a job's argument (JSON-able: RQ pickles it, Redis keeps it)."""
    found = dataclasses.asdict(firing)
    found["row"] = dict(firing.row)
    return found


def from_job(payload: dict[str, Any]) -> Firing:
    """The firing a job carries."""
    spec = AlertSpec(**payload["spec"])
    return Firing(
        payload["delivery_id"], payload["alert_id"], spec, payload["row"],
        payload["updated_at"], float(payload["expires_at"]),
    )  # fmt: skip


class QueueDispatcher:
    """Enqueues each firing on the alerts' RQ queue."""

    def __init__(self, redis_url: str, timeout_s: float = 2.0) -> None:
        self._redis = redis_client(redis_url, timeout_s)
        self.queue = Queue(QUEUE, connection=self._redis)

    def dispatch(self, firing: Firing, attempts: int = 0) -> None:
        """Queue attempt ``attempts + 1`` of ``firing`` now."""
        self.queue.enqueue(
            deliver,
            as_job(firing),
            attempts,
            job_id=f"{firing.delivery_id}-{attempts}-{int(time.time() * 1000)}",
            job_timeout=JOB_TIMEOUT_S,
            result_ttl=0,
            failure_ttl=3600,
        )

    def close(self) -> None:
        """Close the Redis connection."""
        self._redis.close()


def worker_deliverer(deliverer: Deliverer | None = None) -> Deliverer:
    """This worker's deliverer (set once by the worker's start, ``app.alerts.program``)."""
    global _deliverer
    if deliverer is not None:
        _deliverer = deliverer
    assert _deliverer is not None, "the worker sets its deliverer before its first job"
    return _deliverer


def deliver(payload: dict[str, Any], attempts: int) -> None:
    """RQ's job: one attempt of the firing ``payload``; the next one queued after its backoff
    when it may help and the firing has not expired."""
    from rq import get_current_job

    deliverer = worker_deliverer()
    firing = from_job(payload)
    outcome = deliverer.attempt(firing, attempts)
    attempts += 1
    if deliverer.final(firing, attempts, outcome):
        return
    job = get_current_job()
    assert job is not None
    queue = Queue(job.origin, connection=job.connection)
    queue.enqueue_in(
        timedelta(seconds=backoff_s(attempts)),
        deliver,
        payload,
        attempts,
        job_id=f"{firing.delivery_id}-{attempts}-{int(time.time() * 1000)}",
        job_timeout=JOB_TIMEOUT_S,
        result_ttl=0,
        failure_ttl=3600,
    )


def sweep(
    engine: Engine,
    dispatcher: QueueDispatcher,
    firings: dict[str, Firing],
    lost_after_s: float = LOST_AFTER_S,
) -> int:
    """Queue again the pending deliveries lost with their job (see the module docstring):
    those of ``firings`` (the program's own, kept until they end) untouched for
    ``lost_after_s`` and not expired. Returns how many."""
    from app.alerts.models import Delivery

    now = datetime.now(UTC).replace(tzinfo=None)
    cutoff = now - timedelta(seconds=lost_after_s)
    with engine.connect() as conn:
        rows = conn.execute(
            select(Delivery.id, Delivery.status, Delivery.attempts, Delivery.updated_at).where(
                Delivery.id.in_(list(firings))
            )
        ).all()
    again = 0
    for row in rows:
        firing = firings[row.id]
        if row.status != PENDING or firing.expires_at <= time.time():
            firings.pop(row.id, None)  # ended, or its moment passed: nothing more to do
            continue
        if row.updated_at > cutoff:
            continue
        with engine.begin() as conn:  # touched now: the next sweep waits again
            conn.execute(update(Delivery).where(Delivery.id == row.id).values(updated_at=now))
        log.warning("alerts: delivery %s was lost with its job; queued again", row.id)
        dispatcher.dispatch(firing, row.attempts)
        again += 1
    return again
