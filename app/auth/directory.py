"""Who a key or session token belongs to, looked up by keyed hash and cached briefly.

Lookups are cached per worker for ``AUTH_CACHE_MS`` (default 2 s, at most 5 s), so a
revocation, a disabled owner or a plan change reaches every worker within that time while
a busy key costs one database query per worker every couple of seconds. Unknown hashes are
cached too, so guessing does not turn into a query per request.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

from cachetools import TTLCache
from sqlalchemy import Select, select
from sqlalchemy.orm import Session as DbSession

from app.accounts import tokens
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
# How long a request waits for another one loading the same record before it loads too.
LOAD_WAIT_S = 2.0


class Directory:
    """Cached lookups of keys and sessions for one app (one per worker process)."""

    def __init__(
        self, session: Callable[[], DbSession], pepper: Callable[[], bytes], ttl_ms: int
    ) -> None:
        self._session = session
        self._pepper = pepper
        ttl = max(ttl_ms, 1) / 1000.0
        self._keys: TTLCache[str, KeyRecord | None] = TTLCache(CACHE_SIZE, ttl)
        self._sessions: TTLCache[str, SessionRecord | None] = TTLCache(CACHE_SIZE, ttl)
        self._lock = threading.Lock()
        self._loading: dict[str, threading.Event] = {}
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
        self, cache: TTLCache[str, R | None], digest: str, load: Callable[[str], R | None]
    ) -> R | None:
        if not self._enabled:
            return load(digest)
        for _ in range(2):
            with self._lock:
                hit = cache.get(digest, _MISSING)
                if hit is not _MISSING:
                    return hit  # type: ignore[return-value]
                loading = self._loading.get(digest)
                if loading is None:
                    loading = self._loading[digest] = threading.Event()
                    break
            # Another request is loading this record (an entry just expired under a busy
            # caller): wait for its answer rather than send the same query again.
            loading.wait(LOAD_WAIT_S)
        else:
            return load(digest)  # the other load failed or hangs: try our own
        try:
            record = load(digest)
            with self._lock:
                cache[digest] = record
            return record
        finally:
            with self._lock:
                del self._loading[digest]
            loading.set()

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
