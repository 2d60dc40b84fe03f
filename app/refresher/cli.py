"""``flask --app wsgi refresher [--once]``: the refresher's program under the flask command."""

from __future__ import annotations

import sys

import click
from flask.cli import with_appcontext

from app.refresher.main import print_once, serve
from app.services import services


@click.command("refresher")
@click.option("--once", is_flag=True, help="Print one board as JSON and exit (publishes nothing).")
@with_appcontext
def refresher_command(once: bool) -> None:
    """Build the board every tick and publish it on the Redis board bus."""
    settings = services().settings
    if once:
        print_once(settings)
        return
    sys.exit(serve(settings))
