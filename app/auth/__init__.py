"""Authentication and entitlement: who is calling, and under which plan they are served.

``identify`` serves ``/latest`` (a key, a session, or nobody: the guest plan);
``require_key`` serves the key-only endpoints. Both answer header problems and bad keys
with a 401 ErrorResponse whose text never says whether a key exists. The app factory
builds the ``Authenticator`` (``init_app``); the views get it from the app's services,
which nothing here reads.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from flask import Flask, Request, Response
from flask.sessions import SessionInterface, SessionMixin
from sqlalchemy.exc import SQLAlchemyError

from app.accounts.db_deadline import DatabaseGuard
from app.accounts.models import utcnow
from app.auth.credentials import invalid_key, missing_key, read_credentials
from app.auth.directory import Directory, KeyRecord
from app.auth.usage import UsageRecorder
from app.config import Settings
from app.errors import ApiError
from app.extensions import db_session
from app.services import Lifecycle


@dataclass(frozen=True)
class Identity:
    """An authenticated caller: the account, its current plan, and the key if one was used."""

    account_id: int
    account_name: str
    plan: str
    key: KeyRecord | None
    previous_use: datetime | None = None


def _store_unavailable() -> ApiError:
    return ApiError(
        503,
        "auth_unavailable",
        "Credentials cannot be checked right now; retry shortly.",
        retry_after_ms=2000,
    )


class Authenticator:
    """Resolves credentials for one app; holds the per-worker caches."""

    def __init__(
        self,
        settings: Settings,
        guard: DatabaseGuard,
        pepper: Callable[[], bytes],
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.directory = Directory(
            session=db_session,
            pepper=pepper,
            ttl_ms=settings.auth_cache_ms,
            guard=guard,
            wait_s=guard.timeout_s,
            monotonic=monotonic,
        )
        self.usage = UsageRecorder(
            session=db_session, flush_s=settings.last_used_flush_s, guard=guard
        )

    def _from_key(self, clear: str) -> Identity:
        try:
            record = self.directory.key(clear)
        except SQLAlchemyError as exc:
            raise _store_unavailable() from exc
        now = utcnow()
        if record is None or not record.usable(now):
            raise invalid_key()
        seen = self.usage.latest(record.key_id)
        previous = max((t for t in (record.last_used_at, seen) if t is not None), default=None)
        # Writes happen in the background; a use that could not be written is retried.
        self.usage.record(record.key_id, now)
        return Identity(record.account_id, record.account_name, record.plan, record, previous)

    def _from_session(self, clear: str) -> Identity | None:
        try:
            record = self.directory.session(clear)
        except SQLAlchemyError as exc:
            raise _store_unavailable() from exc
        if record is None or not record.usable(utcnow()):
            return None  # cookies outlive sessions: an old one just means "guest"
        return Identity(record.account_id, record.account_name, record.plan, None)

    def identify(self, request: Request) -> Identity | None:
        """The caller on ``/latest``: key first, then session; None means guest."""
        presented = read_credentials(request)
        if presented.api_key is not None:
            return self._from_key(presented.api_key)
        if presented.session_token is not None:
            return self._from_session(presented.session_token)
        return None

    def require_key(self, request: Request) -> Identity:
        """The caller on a key-only endpoint; 401 without a valid key."""
        presented = read_credentials(request)
        if presented.api_key is None:
            raise missing_key()
        return self._from_key(presented.api_key)


class NoFlaskSessions(SessionInterface):
    """Flask's signed-cookie session is never used (sessions are the ``probboard_session``
    cookie, looked up in the store); Flask's default would build a signer per request."""

    def open_session(self, app: Flask, request: Request) -> None:
        """No session: Flask falls back to its null session."""
        return None

    def save_session(self, app: Flask, session: SessionMixin, response: Response) -> None:
        """Nothing to save."""
        return None


def init_app(
    app: Flask,
    settings: Settings,
    guard: DatabaseGuard,
    pepper: Callable[[], bytes],
    lifecycle: Lifecycle,
    monotonic: Callable[[], float] = time.monotonic,
) -> Authenticator:
    """The app's authenticator (its cache aging on ``monotonic``); pending key uses are
    written when the worker exits."""
    auth = Authenticator(settings, guard, pepper, monotonic)
    app.session_interface = NoFlaskSessions()
    lifecycle.on_exit(auth.usage.flush_now)
    return auth
