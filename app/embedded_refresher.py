"""The embedded refresher: on ``memory://`` the web process refreshes its own board.

The web app's glue around the refresher's program, so it sits on the web side: the refresher
imports no web module.
"""

from __future__ import annotations

from pathlib import Path

from flask import Flask

from app.bus import BoardBus
from app.config import Settings
from app.refresher.main import recording_refresher
from app.services import Lifecycle


def init_app(app: Flask, settings: Settings, bus: BoardBus, lifecycle: Lifecycle) -> None:
    """On ``memory://``, start the refresher thread with the first request (never at import or
    in the factory)."""
    if not (bus.embedded and settings.embedded_refresher):
        return

    def start() -> None:
        refresher, _ = recording_refresher(settings, bus, Path(app.instance_path))
        refresher.tick()  # the first request already finds a board
        refresher.start_background()

    lifecycle.start_once(app, start)
