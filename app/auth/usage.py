"""``lastUsedAt`` without a database write per request: uses are coalesced per worker.

Each worker remembers the newest use of each key in memory and writes them in one batch at
most every ``LAST_USED_FLUSH_S`` seconds (and when it exits). A write never moves a key's
``last_used_at`` backwards, so workers flushing in any order agree. The periodic write runs
in the background, never in the request that triggers it: a slow or hung database costs
no request anything (the batch is kept and written at a later flush).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime

from sqlalchemy import or_, update
from sqlalchemy.orm import Session as DbSession

from app.accounts.db_deadline import DatabaseGuard, DatabaseTimeoutError
from app.accounts.models import ApiKey

log = logging.getLogger(__name__)


class UsageRecorder:
    """Pending key uses of this worker, flushed in batches."""

    def __init__(
        self, session: Callable[[], DbSession], flush_s: int, guard: DatabaseGuard
    ) -> None:
        self._session = session
        self._guard = guard
        self._flushing = False
        self._flush_s = flush_s
        self._pending: dict[int, datetime] = {}
        # Newest use seen by this worker, written or not: survives flushes, so a cached
        # lookup that predates the flush cannot make lastUsedAt go back.
        self._latest: dict[int, datetime] = {}
        self._last_flush = time.monotonic()
        self._lock = threading.Lock()

    def latest(self, key_id: int) -> datetime | None:
        """The newest use of ``key_id`` this worker has seen (written or not)."""
        return self._latest.get(key_id)

    def record(self, key_id: int, when: datetime) -> None:
        """Note a use; writes the batch if the flush interval has passed."""
        previous = self._pending.get(key_id)
        if previous is None or when > previous:
            self._pending[key_id] = when
        seen = self._latest.get(key_id)
        if seen is None or when > seen:
            self._latest[key_id] = when
        if time.monotonic() - self._last_flush >= self._flush_s and not self._flushing:
            with self._lock:
                if self._flushing:
                    return
                self._flushing = True
                self._last_flush = time.monotonic()
            self._guard.background(self._background_flush, name="probboard-usage-flush")

    def _background_flush(self) -> None:
        try:
            self.flush()
        finally:
            self._flushing = False

    def flush_now(self) -> None:
        """Write pending uses, waiting at most the database deadline (worker exit)."""
        try:
            self._guard(self.flush, name="probboard-usage-flush")
        except DatabaseTimeoutError:
            log.warning("key uses not written at exit: the database did not answer in time")

    def flush(self) -> int:
        """Write pending uses now; returns how many keys were written."""
        with self._lock:
            batch, self._pending = self._pending, {}
            self._last_flush = time.monotonic()
        if not batch:
            return 0
        db = self._session()
        try:
            for key_id, when in batch.items():
                db.execute(
                    update(ApiKey)
                    .where(ApiKey.id == key_id)
                    .where(or_(ApiKey.last_used_at.is_(None), ApiKey.last_used_at < when))
                    .values(last_used_at=when)
                )
            db.commit()
        except Exception as exc:
            log.warning("could not record key use (%s); will retry", type(exc).__name__)
            with contextlib.suppress(Exception):
                db.rollback()
            with self._lock:
                for key_id, when in batch.items():
                    if key_id not in self._pending or self._pending[key_id] < when:
                        self._pending[key_id] = when
            return 0
        return len(batch)
