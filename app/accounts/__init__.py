"""Accounts, API keys and sessions: the store, the operator CLI and the service functions."""

from __future__ import annotations

from flask import Flask


def init_app(app: Flask) -> None:
    """Register the ``users``, ``keys`` and ``sessions`` command groups."""
    from app.accounts.cli import keys, sessions, users

    app.cli.add_command(users)
    app.cli.add_command(keys)
    app.cli.add_command(sessions)
