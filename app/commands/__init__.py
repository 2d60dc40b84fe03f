"""The web app's commands: ``flask --app wsgi users|keys|sessions|refresher|backtest|record``.

They sit on the web side: each drives a subsystem (the accounts, the refresher's program, the
backtest) that never imports them back.
"""

from __future__ import annotations

from flask import Flask


def init_app(app: Flask) -> None:
    """Register the ``users``, ``keys``, ``sessions``, ``refresher``, ``backtest`` and
    ``record`` commands."""
    from app.backtest.cli import backtest_command
    from app.commands.accounts import keys, sessions, users
    from app.commands.record import record
    from app.commands.refresher import refresher_command

    for command in (users, keys, sessions, refresher_command, backtest_command, record):
        app.cli.add_command(command)
