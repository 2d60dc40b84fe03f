"""``flask --app wsgi record keep``: sum and keep the track record's closed months now.

``period=all`` adds kept sums of closed months (``app.calibration.kept``); the first answer
after the migration that adds them has to sum every month (3 s at a year of four markets on
PostgreSQL, beyond the request's ``DB_TIMEOUT_MS``). The deploy runs this once after
migrating, so that no visitor waits for it.
"""

from __future__ import annotations

import time

import click
from flask.cli import with_appcontext
from sqlalchemy.exc import SQLAlchemyError

from app.calibration import totals
from app.calibration.store import Track
from app.extensions import db
from app.services import services


@click.group("record")
def record() -> None:
    """The track record."""


@record.command("keep")
@with_appcontext
def keep_command() -> None:
    """Sum and keep every closed month of each served market and window (the source
    configured)."""
    settings = services().settings
    now = time.time()
    records = [
        Track(settings.board_source, market.symbol, span.name)
        for market in settings.markets
        for span in settings.windows
    ]
    try:
        with db.engine.connect() as conn:
            for track in records:
                started = time.monotonic()
                found = totals.compute(conn, track, None, now)
                click.echo(
                    f"{track.symbol} {track.window}: {found['windowsRecorded']} windows "
                    f"recorded, closed months kept in {time.monotonic() - started:.2f} s"
                )
    except SQLAlchemyError as exc:
        raise click.ClickException(f"cannot read or keep the track record: {exc}") from exc
