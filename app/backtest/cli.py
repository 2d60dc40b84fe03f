"""``flask --app wsgi backtest TAPE... [--json] [--tick-ms N]``, or ``python -m app.backtest``."""

from __future__ import annotations

import json
import sys

import click

DEFAULT_TICK_MS = 500


@click.command("backtest")
@click.argument("tapes", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON document.")
@click.option(
    "--tick-ms",
    type=click.IntRange(10, 60_000),
    default=DEFAULT_TICK_MS,
    show_default=True,
    help="Build a board every N ms of tape time.",
)
@click.option(
    "--stale-ms",
    type=click.IntRange(1, 3_600_000),
    default=3000,
    show_default=True,
    help="A row older than this at a checkpoint is stale (STALE_THRESHOLD_MS).",
)
def backtest_command(tapes: tuple[str, ...], as_json: bool, tick_ms: int, stale_ms: int) -> None:
    """Replay TAPE files or folders through the live source and score its probabilities."""
    from app.backtest.report import backtest, text
    from app.backtest.tapes import TapeError, read_tapes

    try:
        doc = backtest(read_tapes(tapes), tick_ms=tick_ms, stale_after_ms=stale_ms)
    except TapeError as exc:
        click.echo(f"backtest: {exc}", err=True)
        sys.exit(2)
    click.echo(json.dumps(doc, indent=1) if as_json else text(doc))
