"""The per-app container: the services one app (one process) holds, typed, in one place.

``app.web.create_app`` builds each service in a visible order and puts them here; the views
(``app.api``) and the operator commands read them with ``services()``. No subsystem does:
the factory hands each what it needs (``tests/unit/test_imports.py`` keeps it so). This
module imports none of the subsystems it holds (their types are for the type checker only),
so it can be imported from anywhere without closing a cycle. ``Lifecycle`` is what a
serving process starts after fork and runs at exit.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from flask import Flask, current_app

if TYPE_CHECKING:
    from app.accounts.db_deadline import DatabaseGuard
    from app.auth import Authenticator
    from app.board.render import BoardRenderer
    from app.board.trail import WindowTrail
    from app.bus import BoardBus
    from app.calibration.cursor import WindowCursors
    from app.config import Settings
    from app.limits import Limits
    from app.stream.broker import Broker

SERVICES_KEY = "probboard.services"
Alive = Callable[[], bool]

log = logging.getLogger(__name__)


@dataclass
class Lifecycle:
    """What a serving process starts after fork (given the worker's ``alive`` flag) and runs
    when it exits, in the order registered."""

    starters: list[Callable[[Alive], object]] = field(default_factory=list)
    exits: list[Callable[[], object]] = field(default_factory=list)

    def on_start(self, starter: Callable[[Alive], object]) -> None:
        """Run ``starter(alive)`` when the process starts serving."""
        self.starters.append(starter)

    def on_exit(self, hook: Callable[[], object]) -> None:
        """Run ``hook()`` when the process exits."""
        self.exits.append(hook)

    def start_once(self, app: Flask, start: Callable[[], object]) -> None:
        """Run ``start()`` once, at the first request or when the process starts serving,
        whichever comes first (never at import or in the factory)."""
        lock = threading.Lock()
        started: list[bool] = []

        def once() -> None:
            if started:
                return
            with lock:
                if not started:
                    start()
                    started.append(True)

        app.before_request(once)
        self.on_start(lambda alive: once())


@dataclass(frozen=True)
class Services:
    """Everything one app holds; built once by ``create_app``."""

    settings: Settings
    bus: BoardBus
    renderer: BoardRenderer
    db_guard: DatabaseGuard
    pepper: Callable[[], bytes]
    authenticator: Authenticator
    broker: Broker
    limits: Limits
    lifecycle: Lifecycle
    trail: WindowTrail  # the current window's path of each market, for the page's chart
    cursors: WindowCursors  # /windows' next cursors, signed under SECRET_KEY


def services_of(app: Flask) -> Services:
    """The services of ``app``."""
    found: Services = app.extensions[SERVICES_KEY]
    return found


def services() -> Services:
    """The services of the current app."""
    found: Services = current_app.extensions[SERVICES_KEY]
    return found


def start_worker(app: Flask, alive: Alive = lambda: True) -> None:
    """After fork: start what the process runs in the background (other apps: nothing)."""
    found: Services | None = getattr(app, "extensions", {}).get(SERVICES_KEY)
    if found is not None:
        for starter in found.lifecycle.starters:
            starter(alive)


def stop_worker(app: Flask) -> None:
    """At exit: run the exit hooks in an app context; a failing hook is logged."""
    found: Services | None = getattr(app, "extensions", {}).get(SERVICES_KEY)
    if found is None:
        return
    for hook in found.lifecycle.exits:
        try:
            with app.app_context():
                hook()
        except Exception:
            log.exception("exit hook failed")
