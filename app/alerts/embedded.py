"""Alerts in the embedded shape (``make run`` on ``memory://``): the web process evaluates and
delivers them itself, as it refreshes its own board (issue 51, point 2).

The same ``AlertsRunner`` as the alerts program's, listening to the process's own bus, with
deliveries on the process's threads (``LocalDispatcher``: there is no Redis for a queue).
Started with the first request, never at import or in the factory.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from flask import Flask
from sqlalchemy import create_engine

from app.alerts.delivery import Deliverer, LocalDispatcher
from app.alerts.runner import AlertsRunner, renderer_of
from app.alerts.secrets import SecretBox
from app.alerts.targets import AllowList
from app.board.render import BoardRenderer
from app.bus import BoardBus
from app.config import Settings
from app.database import database_url, engine_options
from app.services import Lifecycle


def init_app(
    app: Flask,
    settings: Settings,
    bus: BoardBus,
    lifecycle: Lifecycle,
    renderer: BoardRenderer,
    pepper: Callable[[], bytes],
) -> None:
    """On ``memory://`` with the embedded refresher and ``ALERTS`` on: start the runner with
    the first request."""
    if not (bus.embedded and settings.embedded_refresher and settings.alerts):
        return

    def start() -> None:
        url = database_url(settings, Path(app.instance_path))
        assert url is not None
        engine = create_engine(url, **engine_options(url, settings.db_timeout_ms / 1000))
        allowed = AllowList.parse(settings.alerts_allowed_hosts)
        deliverer = Deliverer(engine, SecretBox(pepper()), allowed)
        runner = AlertsRunner(
            engine,
            LocalDispatcher(deliverer),
            renderer_of(renderer),
            settings.stale_threshold_ms,
            settings.alerts_deliveries_per_minute,
        )
        stop = threading.Event()
        threading.Thread(
            target=runner.run_sync, args=(stop,), name="alerts-sync", daemon=True
        ).start()
        bus.add_listener(runner.board)
        lifecycle.on_exit(stop.set)

    lifecycle.start_once(app, start)
