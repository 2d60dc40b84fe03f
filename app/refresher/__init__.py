"""The refresher: a separate process (Redis bus) or a thread of the web process (memory bus)."""

from __future__ import annotations

from flask import Flask


def init_app(app: Flask) -> None:
    """Register the ``refresher`` CLI command and, on ``memory://``, the embedded refresher."""
    from app.refresher.cli import refresher_command
    from app.refresher.embedded import init_embedded

    app.cli.add_command(refresher_command)
    init_embedded(app)
