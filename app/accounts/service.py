"""What the operator CLI (and tests) do to accounts, keys and sessions.

Every function takes the SQLAlchemy session and commits its own change; errors are
``AccountError`` with one clear sentence.
"""

from __future__ import annotations

import re
from datetime import timedelta

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session as DbSession

from app.accounts import tokens
from app.accounts.models import Account, ApiKey, Session, utcnow
from app.plans import ACCOUNT_PLANS, KEY_PLANS

MAX_ID = 2**31 - 1
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}")


class AccountError(ValueError):
    """An operator request that cannot be carried out; the message says why."""


def _check_plan(plan: str) -> str:
    if plan not in ACCOUNT_PLANS:
        raise AccountError(f"unknown plan {plan!r}: choose one of {', '.join(ACCOUNT_PLANS)}")
    return plan


def create_account(db: DbSession, name: str, plan: str) -> Account:
    """A new account; names are 1-64 of letters, digits and ``_ . @ -``."""
    if not _NAME.fullmatch(name):
        raise AccountError(
            f"invalid account name {name!r}: use 1-64 letters, digits, '_', '.', '@' or '-'"
        )
    account = Account(name=name, plan=_check_plan(plan))
    db.add(account)
    try:
        db.commit()
    except IntegrityError:
        db.rollback()
        raise AccountError(f"an account named {name!r} already exists") from None
    return account


def get_account(db: DbSession, name: str) -> Account:
    """The account called ``name``."""
    account = db.scalar(select(Account).where(Account.name == name))
    if account is None:
        raise AccountError(f"no account named {name!r}")
    return account


def list_accounts(db: DbSession) -> list[Account]:
    """Every account, by name."""
    return list(db.scalars(select(Account).order_by(Account.name)))


def set_plan(db: DbSession, name: str, plan: str) -> Account:
    """Change an account's plan; its keys follow at once (within the auth cache time)."""
    account = get_account(db, name)
    account.plan = _check_plan(plan)
    db.commit()
    return account


def set_disabled(db: DbSession, name: str, disabled: bool) -> Account:
    """Disable (or enable) an account: its keys and sessions stop (or start) working."""
    account = get_account(db, name)
    account.disabled = disabled
    db.commit()
    return account


def create_key(
    db: DbSession, pepper: bytes, name: str, expires_in_days: int | None = None
) -> tuple[ApiKey, str]:
    """A new key for ``name``; returns the row and the clear key, which is never stored."""
    account = get_account(db, name)
    if account.disabled:
        raise AccountError(f"account {name!r} is disabled")
    if account.plan not in KEY_PLANS:
        raise AccountError(
            f"account {name!r} is on plan {account.plan!r}: only vip_pro and admin "
            "accounts can have API keys"
        )
    clear = tokens.new_key()
    prefix, last4 = tokens.display_parts(clear)
    expires_at = utcnow() + timedelta(days=expires_in_days) if expires_in_days else None
    key = ApiKey(
        account=account,
        prefix=prefix,
        last4=last4,
        key_hash=tokens.keyed_hash(pepper, clear),
        expires_at=expires_at,
    )
    db.add(key)
    db.commit()
    return key, clear


def list_keys(db: DbSession, name: str | None = None) -> list[ApiKey]:
    """Keys of one account, or of all, oldest first."""
    query = select(ApiKey).join(Account).order_by(ApiKey.id)
    if name is not None:
        query = query.where(Account.id == get_account(db, name).id)
    return list(db.scalars(query))


def revoke_key(db: DbSession, pepper: bytes, key_or_id: str) -> ApiKey:
    """Revoke a key given in clear or by its id (``keys list`` shows ids)."""
    if key_or_id.startswith(tokens.KEY_PREFIX):
        key = db.scalar(
            select(ApiKey).where(ApiKey.key_hash == tokens.keyed_hash(pepper, key_or_id))
        )
    elif key_or_id.isascii() and key_or_id.isdigit():
        key_id = int(key_or_id)
        # Ids are 32-bit on PostgreSQL: a larger number names no key (and must not crash).
        key = db.get(ApiKey, key_id) if 0 < key_id <= MAX_ID else None
    else:
        raise AccountError("give the key itself (pbk_...) or its id from 'keys list'")
    if key is None:
        raise AccountError("no such key")
    if key.revoked_at is None:
        key.revoked_at = utcnow()
        db.commit()
    return key


def create_session(db: DbSession, pepper: bytes, name: str, ttl_days: int) -> tuple[Session, str]:
    """A new session for ``name``; returns the row and the clear cookie token."""
    account = get_account(db, name)
    if account.disabled:
        raise AccountError(f"account {name!r} is disabled")
    clear = tokens.new_session_token()
    session = Session(
        account=account,
        token_hash=tokens.keyed_hash(pepper, clear),
        expires_at=utcnow() + timedelta(days=ttl_days),
    )
    db.add(session)
    db.commit()
    return session, clear


def revoke_session(db: DbSession, pepper: bytes, token: str) -> Session:
    """End a session given its token."""
    session = db.scalar(
        select(Session).where(Session.token_hash == tokens.keyed_hash(pepper, token))
    )
    if session is None:
        raise AccountError("no such session")
    if session.revoked_at is None:
        session.revoked_at = utcnow()
        db.commit()
    return session
