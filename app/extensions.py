"""Extensions, created unbound here and bound to an app by ``create_app``.

Nothing here opens a connection: binding only records objects on the app; connections are
opened lazily by the first request (after gunicorn has forked its workers).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from pathlib import Path

from flask import Flask, current_app
from flask_migrate import Migrate
from flask_sqlalchemy import SQLAlchemy
from sqlalchemy.orm import Session as DbSession

from app.accounts.deadline import DatabaseGuard
from app.accounts.models import Base
from app.accounts.pepper import load_pepper
from app.board.render import BoardRenderer
from app.bus import BoardBus, create_bus
from app.config import Settings

SETTINGS_KEY = "probboard.settings"
BUS_KEY = "probboard.bus"
RENDERER_KEY = "probboard.renderer"
EMBEDDED_STARTER_KEY = "probboard.embedded_refresher"
PEPPER_KEY = "probboard.pepper"
EXIT_HOOKS_KEY = "probboard.exit_hooks"
DB_GUARD_KEY = "probboard.db_guard"
# In a checkout the migrations sit beside the package; in a deployed release (the package
# installed in a virtualenv) they sit in the release directory, the working directory.
MIGRATIONS_CANDIDATES = (Path(__file__).resolve().parent.parent / "migrations", Path("migrations"))
DEFAULT_SQLITE_FILE = "probboard.sqlite3"

log = logging.getLogger(__name__)

db = SQLAlchemy(model_class=Base)
migrate = Migrate()


def settings_of(app: Flask) -> Settings:
    """The parsed settings ``create_app`` bound to ``app``."""
    settings: Settings = app.extensions[SETTINGS_KEY]
    return settings


class BoardBusExtension:
    """Owns the board bus and the renderer of one app."""

    def init_app(self, app: Flask) -> None:
        """Create the bus backend and renderer the settings ask for (no I/O)."""
        settings = settings_of(app)
        app.extensions[BUS_KEY] = create_bus(settings)
        app.extensions[RENDERER_KEY] = BoardRenderer(settings)

    @staticmethod
    def bus_of(app: Flask) -> BoardBus:
        """The bus bound to ``app``."""
        bus: BoardBus = app.extensions[BUS_KEY]
        return bus

    @property
    def bus(self) -> BoardBus:
        """The bus of the current app."""
        return self.bus_of(current_app)

    @property
    def renderer(self) -> BoardRenderer:
        """The renderer of the current app."""
        renderer: BoardRenderer = current_app.extensions[RENDERER_KEY]
        return renderer


board_bus = BoardBusExtension()


def init_db(app: Flask, settings: Settings) -> None:
    """Bind SQLAlchemy and Flask-Migrate; the default is an SQLite file in the instance folder.

    Nothing connects here, and migrations never run here: ``flask db upgrade`` runs them.
    """
    uri = settings.database_url
    if not uri:
        Path(app.instance_path).mkdir(parents=True, exist_ok=True)
        uri = f"sqlite:///{Path(app.instance_path) / DEFAULT_SQLITE_FILE}"
    app.config["SQLALCHEMY_DATABASE_URI"] = uri
    app.config["SQLALCHEMY_ENGINE_OPTIONS"] = engine_options(uri, settings.db_timeout_ms / 1000)
    db.init_app(app)
    app.extensions[DB_GUARD_KEY] = DatabaseGuard(app.app_context, settings.db_timeout_ms / 1000)
    directory = next((p for p in MIGRATIONS_CANDIDATES if p.is_dir()), MIGRATIONS_CANDIDATES[0])
    migrate.init_app(app, db, directory=str(directory.resolve()))


def engine_options(uri: str, timeout_s: float) -> dict[str, object]:
    """Pool and driver settings so that no wait on the database is unbounded.

    Checkout waits at most ``timeout_s``; connecting at most libpq's minimum of 2 s; a
    statement at most a few deadlines on the server; a dead peer is noticed by TCP within
    seconds. A database that accepts but never answers is what ``DatabaseGuard`` is for.
    """
    if uri.startswith("sqlite"):
        # The busy timeout: how long a statement waits for another writer's lock.
        options: dict[str, object] = {"connect_args": {"timeout": timeout_s}}
        if ":memory:" not in uri:  # a file database has a queue pool; checkout is bounded
            options["pool_timeout"] = timeout_s
        return options
    return {
        "pool_pre_ping": True,
        "pool_size": 5,
        "max_overflow": 10,
        "pool_recycle": 1800,
        "pool_timeout": timeout_s,
        "connect_args": {
            "connect_timeout": max(2, math.ceil(timeout_s)),
            "options": f"-c statement_timeout={math.ceil(timeout_s * 4000)}",
            "keepalives": 1,
            "keepalives_idle": 10,
            "keepalives_interval": 5,
            "keepalives_count": 3,
            "tcp_user_timeout": 15_000,
        },
    }


def db_guard_of(app: Flask) -> DatabaseGuard:
    """The deadline runner for database work of ``app`` (``DB_TIMEOUT_MS``)."""
    guard: DatabaseGuard = app.extensions[DB_GUARD_KEY]
    return guard


def db_session() -> DbSession:
    """The SQLAlchemy session of the current app context."""
    return db.session()


def pepper_of(app: Flask) -> bytes:
    """The API-key pepper of ``app``, loaded once per process on first use."""
    pepper: bytes | None = app.extensions.get(PEPPER_KEY)
    if pepper is None:
        pepper = load_pepper(settings_of(app).api_key_pepper, app.instance_path)
        app.extensions[PEPPER_KEY] = pepper
    return pepper


def start_worker(app: Flask, alive: Callable[[], bool] | None = None) -> None:
    """Start what a serving process runs in the background (called after fork).

    Any other WSGI app served with our gunicorn.conf.py (the benchmark baseline) is left alone.
    """
    if BUS_KEY not in getattr(app, "extensions", {}):
        return
    BoardBusExtension.bus_of(app).start()
    if alive is not None:
        from app.stream import broker_of

        stream_broker = broker_of(app)
        if stream_broker is not None:
            stream_broker.start(alive)
    starter = app.extensions.get(EMBEDDED_STARTER_KEY)
    if starter is not None:
        starter()


def on_worker_exit(app: Flask, hook: Callable[[], object]) -> None:
    """Run ``hook`` in an app context when the serving process exits (``stop_worker``)."""
    app.extensions.setdefault(EXIT_HOOKS_KEY, []).append(hook)


def stop_worker(app: Flask) -> None:
    """Run the exit hooks of ``app`` (gunicorn's worker_exit); a failing hook is logged."""
    for hook in getattr(app, "extensions", {}).get(EXIT_HOOKS_KEY, []):
        try:
            with app.app_context():
                hook()
        except Exception:
            log.exception("exit hook failed")
