"""The refresher as a program: ``python -m app.refresher [--once]`` (or ``probboard-refresher``).

It reads the settings, configures logging, builds the bus and the source and runs the loop:
no web app, no limiter, no accounts database. ``flask --app wsgi refresher`` runs the same.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from app.board import timefmt
from app.bus import BoardBus, create_bus
from app.config import ConfigError, Settings, load_settings, report_bad_setting
from app.logs import configure_logging
from app.refresher.loop import Refresher
from app.refresher.sources import create_source
from app.refresher.stopping import Stopping

if TYPE_CHECKING:
    from app.calibration.recorder import Recorder

ONCE_WARM_UP_S = 10.0


def with_tape(settings: Settings, record: str | None) -> Settings:
    """``settings`` recording to ``record`` when given (it overrides ``REFRESHER_TAPE_DIR``)."""
    if record is not None:
        if not record.strip():
            raise ConfigError("--record", "needs a folder")
        settings = dataclasses.replace(settings, refresher_tape_dir=record.strip())
    if settings.refresher_tape_dir and settings.board_source != "polymarket":
        print(
            f"note: BOARD_SOURCE={settings.board_source} has no upstream: nothing to record",
            file=sys.stderr,
        )
    return settings


def recording_refresher(
    settings: Settings, bus: BoardBus, instance_dir: Path | None = None
) -> tuple[Refresher, Recorder | None]:
    """The refresher of ``settings`` on ``bus``, with its live record (``TRACK_RECORD``)."""
    source = create_source(settings)
    # The SQL store is loaded only here, where the refresher records.
    from app.calibration.recorder import start_recorder

    recorder = start_recorder(settings, source.name, instance_dir)
    refresher = Refresher(
        source,
        bus,
        settings.refresh_tick_ms,
        clock=timefmt.now,
        observer=recorder,
        min_interval_ms=settings.publish_min_interval_ms,
    )
    return refresher, recorder


def print_once(settings: Settings) -> None:
    """Build one board from a fresh source and print it as JSON (publishes nothing)."""
    source, bus = create_source(settings), create_bus(settings)
    refresher = Refresher(source, bus, settings.refresh_tick_ms, clock=timefmt.now)
    warm_up = getattr(refresher.source, "warm_up", None)
    if warm_up is not None:
        warm_up(ONCE_WARM_UP_S)  # live sources need a moment for their sockets
    print(json.dumps(refresher.build(), indent=2))
    _close(refresher.source)


def print_leader(settings: Settings) -> int:
    """Print who holds the lease (``--who-leads``); 1 when nobody does, 2 without Redis."""
    if not settings.uses_redis:
        print("REDIS_URL is memory://: the one refresher runs inside the web process")
        return 2
    from app.refresher.leader import who_leads

    try:
        holder, ttl_ms, seq = who_leads(settings.redis_url)
    except Exception as exc:
        print(f"Redis did not answer: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    if holder is None:
        print(f"leader: nobody (no refresher holds the lease); bus seq {seq}")
        return 1
    print(f"leader: {holder} (lease {ttl_ms} ms left); bus seq {seq}")
    return 0


def _close(source: object) -> None:
    """Stop a live source's threads (and write the rest of its tape)."""
    close = getattr(source, "close", None)
    if close is not None:
        close()


def serve(settings: Settings) -> int:
    """Publish a board every tick until SIGTERM or SIGINT; 2 when the bus is ``memory://``.

    The signals are taken over first, so a stop asked for while starting is a clean stop
    too; closing after the loop gets what is left of ``STOP_WITHIN_S`` (``stopping.py``).
    """
    stopping = Stopping()
    stopping.install()
    stop = stopping.event
    bus = create_bus(settings)
    if bus.embedded:
        print(
            "REDIS_URL is memory://: the refresher runs inside the web process there. "
            "Set REDIS_URL=redis://host:port/db to run it as its own process.",
            file=sys.stderr,
        )
        return 2
    refresher, recorder = recording_refresher(settings, bus)
    # Any number of refreshers may share the bus: the lease says which one publishes.
    from app.refresher.leader import Leadership

    lease = Leadership(settings.redis_url, settings.leader_lease_ms)
    lease.on_elected = refresher.follow_seq
    refresher.lease = lease
    from app.metrics.refresher import serve as serve_metrics

    serve_metrics(settings.refresher_metrics_port, settings.refresher_metrics_host)
    lease_thread = lease.start_background(stop)
    refresher.run(stop)
    lease_thread.join(timeout=stopping.left())
    lease.close()  # a clean stop hands the lease over at once (one call, its own timeout)
    _close(refresher.source)
    if recorder is not None:
        recorder.close(timeout=stopping.left())
    bus.close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments and the environment, then run; the process's exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m app.refresher",
        description="Build the board every tick and publish it on the Redis board bus.",
    )
    parser.add_argument(
        "--once", action="store_true", help="print one board as JSON and exit (publishes nothing)"
    )
    parser.add_argument(
        "--record",
        metavar="DIR",
        help="write every upstream exchange to hourly tapes in DIR (REFRESHER_TAPE_DIR)",
    )
    parser.add_argument(
        "--who-leads",
        action="store_true",
        help="print which refresher holds the publishing lease, and the bus's seq, then exit",
    )
    args = parser.parse_args(argv)
    try:
        settings = with_tape(load_settings(), args.record)
    except ConfigError as exc:
        return report_bad_setting(exc)
    timefmt.set_offset_ms(settings.clock_offset_ms)  # CLOCK_OFFSET_MS, before any reading
    configure_logging(settings)
    if args.who_leads:
        return print_leader(settings)
    if args.once:
        print_once(settings)
        return 0
    return serve(settings)
