"""``python -m app.alerts``: the alerts program of the production shape, and its workers
(issue 51, point 2).

    python -m app.alerts            evaluate every alert on every board of the Redis channel,
                                    queue the firings (RQ), and queue again the lost ones
    python -m app.alerts worker     deliver the queued firings (RQ's SimpleWorker, with its
                                    scheduler for the delayed retries); run as many as needed,
                                    on any host that reaches Redis and the accounts database

Both stop cleanly on SIGTERM or SIGINT. On ``memory://`` there is no channel to read nor
queue to feed: the web process evaluates and delivers itself (``app.alerts.embedded``), and
the program says so and exits 2, as the refresher does.
"""

from __future__ import annotations

import argparse
import logging
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from sqlalchemy import create_engine
from sqlalchemy.engine import Engine

from app.alerts.calls import Firing
from app.alerts.delivery import Deliverer
from app.alerts.queue import QUEUE, QueueDispatcher, sweep, worker_deliverer
from app.alerts.runner import AlertsRunner, renderer_of
from app.alerts.secrets import SecretBox
from app.alerts.targets import AllowList
from app.board import timefmt
from app.board.render import BoardRenderer
from app.bus import create_bus
from app.config import ConfigError, Settings, load_web_settings, report_bad_setting
from app.database import database_url, engine_options
from app.logs import configure_logging
from app.refresher.stopping import Stopping

log = logging.getLogger(__name__)

SWEEP_S = 5.0
WORKER_TTL_S = 20  # a dead worker's heartbeat runs out this fast (RQ waits 15 s less per poll)


class TrackingDispatcher:
    """The queue, and the firings queued by this program until they end (the sweep's)."""

    def __init__(self, queue: QueueDispatcher) -> None:
        self.queue = queue
        self.firings: dict[str, Firing] = {}
        self._lock = threading.Lock()

    def dispatch_many(self, firings: list[Firing]) -> None:
        """Queue ``firings`` (one job), and keep them for the sweep."""
        with self._lock:
            self.firings.update((f.delivery_id, f) for f in firings)
        self.queue.dispatch_many(firings)

    def sweep(self, engine: Engine, lost_after_s: float) -> int:
        """``queue.sweep`` over the firings kept."""
        with self._lock:
            kept = dict(self.firings)
        again = sweep(engine, self.queue, kept, lost_after_s)
        with self._lock:
            for gone in set(self.firings) - set(kept):
                self.firings.pop(gone, None)
        return again


def _engine(settings: Settings) -> Engine:
    url = database_url(settings, Path("instance"))
    assert url is not None
    return create_engine(url, **engine_options(url, settings.db_timeout_ms / 1000))


def run_program(settings: Settings, stopping: Stopping) -> int:
    """Evaluate and queue until stopped (see the module docstring)."""
    bus = create_bus(settings)
    if bus.embedded:
        print(
            "REDIS_URL is memory://: alerts run inside the web process there. "
            "Set REDIS_URL=redis://host:port/db to run them as their own program.",
            file=sys.stderr,
        )
        return 2
    engine = _engine(settings)
    dispatcher = TrackingDispatcher(QueueDispatcher(settings.redis_url))
    runner = AlertsRunner(
        engine,
        dispatcher,
        renderer_of(BoardRenderer(settings)),
        settings.stale_threshold_ms,
        settings.alerts_deliveries_per_minute,
    )
    stop = stopping.event
    try:  # the alerts read before the first board, so none is evaluated against nothing
        runner.sync()
    except Exception:
        log.exception("alerts: the accounts database cannot be read yet; trying again")
    threading.Thread(target=runner.run_sync, args=(stop,), name="alerts-sync", daemon=True).start()
    bus.add_listener(runner.board)
    bus.start()
    log.info(
        "alerts: %d watched; evaluating the boards of %s, queueing on %s",
        runner.watched, settings.redis_url, QUEUE,
    )  # fmt: skip
    lost_after_s = settings.alerts_lost_after_s
    while not stop.wait(min(SWEEP_S, lost_after_s / 2)):
        try:
            dispatcher.sweep(engine, lost_after_s)
        except Exception:
            log.exception("alerts: the sweep failed; trying again")
    bus.close()
    dispatcher.queue.close()
    engine.dispose()
    return 0


def run_worker(settings: Settings) -> int:
    """Deliver queued firings until stopped."""
    if settings.redis_url.startswith("memory://"):
        print("REDIS_URL is memory://: there is no queue to work on.", file=sys.stderr)
        return 2
    from rq import Queue
    from rq.worker import SimpleWorker

    from app.accounts.pepper import load_pepper
    from app.redis_pool import redis_client

    engine = _engine(settings)
    pepper = load_pepper(settings.api_key_pepper, "instance")
    allowed = AllowList.parse(settings.alerts_allowed_hosts)
    worker_deliverer(Deliverer(engine, SecretBox(pepper), allowed))
    connection = redis_client(settings.redis_url, timeout_s=WORKER_TTL_S)
    worker = SimpleWorker(
        [Queue(QUEUE, connection=connection)], connection=connection, worker_ttl=WORKER_TTL_S
    )
    # RQ takes SIGTERM and SIGINT over: it stops after the job under way (a second: at once).
    worker.work(with_scheduler=True, logging_level="WARNING")
    engine.dispose()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the arguments and the environment, then run; the exit status."""
    parser = argparse.ArgumentParser(prog="python -m app.alerts")
    parser.add_argument("role", nargs="?", choices=("program", "worker"), default="program")
    args = parser.parse_args(argv)
    try:
        settings = load_web_settings()  # a worker reads secrets with the pepper
    except ConfigError as exc:
        return report_bad_setting(exc)
    timefmt.set_offset_ms(settings.clock_offset_ms)
    configure_logging(settings)
    if not settings.alerts:
        log.info("ALERTS=false: no alerts are evaluated or delivered")
        return 0
    if args.role == "worker":
        return run_worker(settings)
    stopping = Stopping()
    stopping.install()
    return run_program(settings, stopping)
