"""Extensions, created unbound here and bound to an app by ``create_app``.

Nothing here opens a connection: binding only records objects on the app; connections are
opened lazily by the first request (after gunicorn has forked its workers).
"""

from __future__ import annotations

from flask import Flask, current_app

from app.board.render import BoardRenderer
from app.bus import BoardBus, create_bus
from app.config import Settings

SETTINGS_KEY = "probboard.settings"
BUS_KEY = "probboard.bus"
RENDERER_KEY = "probboard.renderer"
EMBEDDED_STARTER_KEY = "probboard.embedded_refresher"


def settings_of(app: Flask) -> Settings:
    """The parsed settings ``create_app`` bound to ``app``."""
    settings: Settings = app.extensions[SETTINGS_KEY]
    return settings


class BoardBusExtension:
    """Owns the board bus and the renderer of one app."""

    def init_app(self, app: Flask) -> None:
        """Create the bus backend and renderer the settings ask for (no I/O)."""
        settings = settings_of(app)
        app.extensions[BUS_KEY] = create_bus(settings)
        app.extensions[RENDERER_KEY] = BoardRenderer(settings)

    @staticmethod
    def bus_of(app: Flask) -> BoardBus:
        """The bus bound to ``app``."""
        bus: BoardBus = app.extensions[BUS_KEY]
        return bus

    @property
    def bus(self) -> BoardBus:
        """The bus of the current app."""
        return self.bus_of(current_app)

    @property
    def renderer(self) -> BoardRenderer:
        """The renderer of the current app."""
        renderer: BoardRenderer = current_app.extensions[RENDERER_KEY]
        return renderer


board_bus = BoardBusExtension()


def start_worker(app: Flask) -> None:
    """Start what a serving process runs in the background (called after fork).

    Any other WSGI app served with our gunicorn.conf.py (the benchmark baseline) is left alone.
    """
    if BUS_KEY not in getattr(app, "extensions", {}):
        return
    BoardBusExtension.bus_of(app).start()
    starter = app.extensions.get(EMBEDDED_STARTER_KEY)
    if starter is not None:
        starter()
