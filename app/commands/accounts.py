"""Operator commands: ``flask --app wsgi users|keys|sessions …`` (the account page is elsewhere).

Errors print one line (``Error: …``) and exit 1. ``keys create`` and ``sessions create``
print the new secret alone on the last line of stdout: the only time it is ever shown.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from functools import wraps
from typing import Any, TypeVar

import click
from flask.cli import AppGroup

from app.accounts import service
from app.extensions import db_session
from app.plans import ACCOUNT_PLANS
from app.services import services

users = AppGroup("users", help="Create and change accounts.")
keys = AppGroup("keys", help="Create, list and revoke API keys.")
sessions = AppGroup("sessions", help="Create and revoke login sessions.")

F = TypeVar("F", bound=Callable[..., Any])


def _one_line_errors(func: F) -> F:
    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except service.AccountError as exc:
            raise click.ClickException(str(exc)) from None

    return wrapper  # type: ignore[return-value]


def _when(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%SZ") if moment else "-"


PLAN_HELP = " or ".join(ACCOUNT_PLANS)


@users.command("create")
@click.argument("name")
@click.option("--plan", required=True, help=PLAN_HELP)
@_one_line_errors
def users_create(name: str, plan: str) -> None:
    """Create an account NAME on PLAN."""
    account = service.create_account(db_session(), name, plan)
    click.echo(f"created account {account.name} (plan {account.plan})")


@users.command("list")
def users_list() -> None:
    """List accounts."""
    for account in service.list_accounts(db_session()):
        state = "disabled" if account.disabled else "active"
        click.echo(f"{account.name}\t{account.plan}\t{state}\tcreated {_when(account.created_at)}")


@users.command("set-plan")
@click.argument("name")
@click.argument("plan")
@_one_line_errors
def users_set_plan(name: str, plan: str) -> None:
    """Move account NAME to PLAN (its keys follow within seconds)."""
    account = service.set_plan(db_session(), name, plan)
    click.echo(f"account {account.name} is now on plan {account.plan}")


@users.command("disable")
@click.argument("name")
@_one_line_errors
def users_disable(name: str) -> None:
    """Disable account NAME: its keys and sessions stop working."""
    service.set_disabled(db_session(), name, True)
    click.echo(f"account {name} disabled")


@users.command("enable")
@click.argument("name")
@_one_line_errors
def users_enable(name: str) -> None:
    """Enable account NAME again."""
    service.set_disabled(db_session(), name, False)
    click.echo(f"account {name} enabled")


@keys.command("create")
@click.argument("name")
@click.option("--expires-in-days", type=click.IntRange(1, 3650), default=None)
@_one_line_errors
def keys_create(name: str, expires_in_days: int | None) -> None:
    """Create an API key for NAME; the key is printed once, on the last line."""
    key, clear = service.create_key(
        db_session(), services().pepper(), name, expires_in_days=expires_in_days
    )
    expiry = f", expires {_when(key.expires_at)}" if key.expires_at else ""
    click.echo(f"created key {key.id} ({key.masked}) for {name}{expiry}; it is shown only now:")
    click.echo(clear)


@keys.command("list")
@click.argument("name", required=False)
@_one_line_errors
def keys_list(name: str | None) -> None:
    """List keys (masked), of NAME or of everyone."""
    rows = service.list_keys(db_session(), name)
    click.echo("id\taccount\tkey\tcreated\tlast used\texpires\trevoked")
    for key in rows:
        click.echo(
            f"{key.id}\t{key.account.name}\t{key.masked}\t{_when(key.created_at)}\t"
            f"{_when(key.last_used_at)}\t{_when(key.expires_at)}\t{_when(key.revoked_at)}"
        )


@keys.command("revoke")
@click.argument("key_or_id")
@_one_line_errors
def keys_revoke(key_or_id: str) -> None:
    """Revoke a key, given in clear or by id; it stops working within seconds."""
    key = service.revoke_key(db_session(), services().pepper(), key_or_id)
    click.echo(f"revoked key {key.id} ({key.masked})")


@sessions.command("create")
@click.argument("name")
@click.option("--days", type=click.IntRange(1, 3650), default=None, help="lifetime in days")
@_one_line_errors
def sessions_create(name: str, days: int | None) -> None:
    """Create a session for NAME; its cookie token is printed once, on the last line."""
    ttl = days or services().settings.session_ttl_days
    session, clear = service.create_session(db_session(), services().pepper(), name, ttl)
    click.echo(
        f"created session {session.id} for {name}, expires {_when(session.expires_at)}; "
        "send it as the cookie probboard_session:"
    )
    click.echo(clear)


@sessions.command("revoke")
@click.argument("token")
@_one_line_errors
def sessions_revoke(token: str) -> None:
    """End the session whose cookie token is TOKEN."""
    session = service.revoke_session(db_session(), services().pepper(), token)
    click.echo(f"revoked session {session.id}")
