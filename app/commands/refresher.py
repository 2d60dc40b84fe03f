"""``flask --app wsgi refresher [--once]``: the refresher's program under the flask command."""

from __future__ import annotations

import sys

import click
from flask.cli import with_appcontext

from app.config import ConfigError
from app.refresher.main import print_once, serve, with_tape
from app.services import services


@click.command("refresher")
@click.option("--once", is_flag=True, help="Print one board as JSON and exit (publishes nothing).")
@click.option(
    "--record", metavar="DIR", help="Write every upstream exchange to hourly tapes in DIR."
)
@with_appcontext
def refresher_command(once: bool, record: str | None) -> None:
    """Build the board every tick and publish it on the Redis board bus."""
    try:
        settings = with_tape(services().settings, record)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from exc
    if once:
        print_once(settings)
        return
    sys.exit(serve(settings))
