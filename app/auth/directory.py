"""Who a key or session token belongs to, looked up by keyed hash and cached briefly.

Lookups are cached per worker for ``AUTH_CACHE_MS`` (default 2 s, at most 5 s), so a
revocation, a disabled owner or a plan change reaches every worker within that time while
a busy key costs one database query per worker every couple of seconds. Unknown hashes are
cached too, so guessing does not turn into a query per request.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar

from sqlalchemy import Select, select
from sqlalchemy.orm import Session as DbSession

from app.accounts import tokens
from app.accounts.db_deadline import DatabaseTimeoutError
from app.accounts.models import Account, ApiKey, Session

CACHE_SIZE = 10_000
R = TypeVar("R")
M = TypeVar("M", ApiKey, Session)


@dataclass(frozen=True)
class KeyRecord:
    """A key as authentication needs it, with its owner's current plan."""

    key_id: int
    key_hash: str
    account_id: int
    account_name: str
    plan: str
    masked: str
    owner_disabled: bool
    revoked: bool
    expires_at: datetime | None
    last_used_at: datetime | None

    def usable(self, now: datetime) -> bool:
        """Not revoked, not expired, owner not disabled."""
        return (
            not self.revoked
            and not self.owner_disabled
            and (self.expires_at is None or self.expires_at > now)
        )


@dataclass(frozen=True)
class SessionRecord:
    """A session as authentication needs it."""

    token_hash: str
    account_id: int
    account_name: str
    plan: str
    owner_disabled: bool
    revoked: bool
    expires_at: datetime

    def usable(self, now: datetime) -> bool:
        """Not revoked, not expired, owner not disabled."""
        return not self.revoked and not self.owner_disabled and self.expires_at > now


_MISSING = object()


class Guard(Protocol):
    """Runs a database job with a deadline (``app.accounts.db_deadline.DatabaseGuard``)."""

    def __call__(self, job: Callable[[], R], name: str = ...) -> R:
        """``job()``'s result, or ``DatabaseTimeoutError`` when it overran."""


class _Expiring(Generic[R]):
    """Records by digest for ``ttl_s``, at most ``size`` of them.

    Every authenticated request reads it, so a read takes no lock (one dict lookup, atomic
    in CPython); writers hold the directory's lock. When full, expired entries go first,
    then the oldest.
    """

    def __init__(self, size: int, ttl_s: float, monotonic: Callable[[], float]) -> None:
        self._size = size
        self._ttl_s = ttl_s
        self._monotonic = monotonic
        self._items: dict[str, tuple[float, R | None]] = {}

    def get(self, digest: str) -> R | object | None:
        """The cached record (None: known not to exist), or ``_MISSING``."""
        found = self._items.get(digest)
        if found is None or found[0] <= self._monotonic():
            return _MISSING
        return found[1]

    def put(self, digest: str, record: R | None) -> None:
        """Cache ``record`` for ``digest`` (the caller holds the directory's lock)."""
        items = self._items
        items.pop(digest, None)
        if len(items) >= self._size:
            now = self._monotonic()
            for stale in [k for k, (until, _) in items.items() if until <= now]:
                del items[stale]
            while len(items) >= self._size:
                del items[next(iter(items))]
        items[digest] = (self._monotonic() + self._ttl_s, record)

    def clear(self) -> None:
        """Forget everything."""
        self._items.clear()


class _Load(Generic[R]):
    """One lookup in flight, which concurrent requests for the same record wait on."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.record: R | None = None
        self.failed = False


class Directory:
    """Cached lookups of keys and sessions for one app (one per worker process).

    Every lookup that reaches the database runs through ``guard``, so a caller never waits
    longer than its deadline; requests for a record that is being loaded wait for that load
    (the same deadline) instead of sending the same query again, and share its failure.
    """

    def __init__(
        self,
        session: Callable[[], DbSession],
        pepper: Callable[[], bytes],
        ttl_ms: int,
        guard: Guard,
        wait_s: float,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._session = session
        self._pepper = pepper
        self._guard = guard
        self._wait_s = wait_s
        ttl = max(ttl_ms, 1) / 1000.0
        # The entries' ages run on ``monotonic`` (a test passes a clock it drives).
        self._keys: _Expiring[KeyRecord] = _Expiring(CACHE_SIZE, ttl, monotonic)
        self._sessions: _Expiring[SessionRecord] = _Expiring(CACHE_SIZE, ttl, monotonic)
        self._lock = threading.Lock()
        self._loading: dict[str, _Load[Any]] = {}
        self._enabled = ttl_ms > 0

    def key(self, clear: str) -> KeyRecord | None:
        """The record of API key ``clear``, or None when no such key exists."""
        if not tokens.well_formed(clear, tokens.KEY_PREFIX):
            return None
        return self.key_by_digest(tokens.keyed_hash(self._pepper(), clear))

    def key_by_digest(self, digest: str) -> KeyRecord | None:
        """The record of the key whose keyed hash is ``digest`` (streams re-check by it)."""
        record = self._cached(self._keys, digest, self._load_key)
        # The index found the row; compare the stored hash again in constant time.
        if record is None or not tokens.same_hash(record.key_hash, digest):
            return None
        return record

    def session(self, clear: str) -> SessionRecord | None:
        """The record of session token ``clear``, or None."""
        if not tokens.well_formed(clear, tokens.SESSION_PREFIX):
            return None
        digest = tokens.keyed_hash(self._pepper(), clear)
        record = self._cached(self._sessions, digest, self._load_session)
        if record is None or not tokens.same_hash(record.token_hash, digest):
            return None
        return record

    def forget(self) -> None:
        """Drop every cached lookup (tests, and after operator changes in-process)."""
        with self._lock:
            self._keys.clear()
            self._sessions.clear()

    def _cached(
        self, cache: _Expiring[R], digest: str, load: Callable[[str], R | None]
    ) -> R | None:
        if not self._enabled:
            return self._guard(lambda: load(digest), name="probboard-auth-lookup")
        hit = cache.get(digest)
        if hit is not _MISSING:
            return hit  # type: ignore[return-value]
        with self._lock:
            hit = cache.get(digest)  # loaded while this request waited for the lock
            if hit is not _MISSING:
                return hit  # type: ignore[return-value]
            pending: _Load[R | None] | None = self._loading.get(digest)
            owner = pending is None
            if pending is None:
                pending = self._loading[digest] = _Load()
        if not owner:
            # Another request is loading this record (an entry just expired under a busy
            # caller): wait for its answer rather than send the same query again.
            if not pending.done.wait(self._wait_s) or pending.failed:
                raise DatabaseTimeoutError("the database did not answer a pending lookup in time")
            return pending.record
        try:
            record = self._guard(lambda: load(digest), name="probboard-auth-lookup")
        except BaseException:
            pending.failed = True
            raise
        else:
            pending.record = record
            with self._lock:
                cache.put(digest, record)
            return record
        finally:
            with self._lock:
                del self._loading[digest]
            pending.done.set()

    def _load_key(self, digest: str) -> KeyRecord | None:
        statement = select(ApiKey, Account).join(Account).where(ApiKey.key_hash == digest)
        return self._load_one(statement, self._key_record)

    def _load_one(
        self, statement: Select[M, Account], build: Callable[[M, Account], R]
    ) -> R | None:
        """The record built from the statement's one row, or None."""
        db = self._session()
        row = db.execute(statement).first()
        try:
            return None if row is None else build(row[0], row[1])
        finally:
            # End the read transaction (nothing is held between requests), after the
            # record is built: a rollback expires the rows, and reading them would query again.
            db.rollback()

    @staticmethod
    def _key_record(key: ApiKey, account: Account) -> KeyRecord:
        return KeyRecord(
            key_id=key.id,
            key_hash=key.key_hash,
            account_id=account.id,
            account_name=account.name,
            plan=account.plan,
            masked=key.masked,
            owner_disabled=account.disabled,
            revoked=key.revoked_at is not None,
            expires_at=key.expires_at,
            last_used_at=key.last_used_at,
        )

    def _load_session(self, digest: str) -> SessionRecord | None:
        statement = select(Session, Account).join(Account).where(Session.token_hash == digest)
        return self._load_one(statement, self._session_record)

    @staticmethod
    def _session_record(session: Session, account: Account) -> SessionRecord:
        return SessionRecord(
            token_hash=session.token_hash,
            account_id=account.id,
            account_name=account.name,
            plan=account.plan,
            owner_disabled=account.disabled,
            revoked=session.revoked_at is not None,
            expires_at=session.expires_at,
        )
