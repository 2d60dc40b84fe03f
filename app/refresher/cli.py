"""``flask --app wsgi refresher [--once]``: the refresher as its own process."""

from __future__ import annotations

import json
import signal
import sys
import threading
from types import FrameType

import click
from flask import current_app
from flask.cli import with_appcontext

from app.extensions import board_bus, settings_of
from app.refresher.loop import Refresher
from app.refresher.sources import create_source

ONCE_WARM_UP_S = 10.0


@click.command("refresher")
@click.option("--once", is_flag=True, help="Print one board as JSON and exit (publishes nothing).")
@with_appcontext
def refresher_command(once: bool) -> None:
    """Build the board every tick and publish it on the Redis board bus."""
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    settings = settings_of(app)
    bus = board_bus.bus_of(app)
    refresher = Refresher(create_source(settings), bus, settings.refresh_tick_ms)
    if once:
        warm_up = getattr(refresher.source, "warm_up", None)
        if warm_up is not None:
            warm_up(ONCE_WARM_UP_S)  # live sources need a moment for their sockets
        click.echo(json.dumps(refresher.build(), indent=2))
        close = getattr(refresher.source, "close", None)
        if close is not None:
            close()
        return
    if bus.embedded:
        click.echo(
            "REDIS_URL is memory://: the refresher runs inside the web process there. "
            "Set REDIS_URL=redis://host:port/db to run it as its own process.",
            err=True,
        )
        sys.exit(2)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    refresher.run(stop)
    bus.close()
