"""``flask --app wsgi refresher [--once]``: the refresher's program under the flask command."""

from __future__ import annotations

import sys

import click
from flask import current_app
from flask.cli import with_appcontext

from app.extensions import settings_of
from app.refresher.main import print_once, serve


@click.command("refresher")
@click.option("--once", is_flag=True, help="Print one board as JSON and exit (publishes nothing).")
@with_appcontext
def refresher_command(once: bool) -> None:
    """Build the board every tick and publish it on the Redis board bus."""
    settings = settings_of(current_app)
    if once:
        print_once(settings)
        return
    sys.exit(serve(settings))
