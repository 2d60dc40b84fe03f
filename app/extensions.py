"""The Flask extensions (SQLAlchemy, Flask-Migrate), created unbound here and bound by
``create_app``, with the accounts database's engine settings and the API-key pepper.

Nothing here opens a connection: binding only records objects on the app; connections are
opened lazily by the first request (after gunicorn has forked its workers).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from pathlib import Path

from flask import Flask
from flask_migrate import Migrate
from flask_sqlalchemy import SQLAlchemy
from sqlalchemy.orm import Session as DbSession

from app.accounts.deadline import DatabaseGuard
from app.accounts.models import Base
from app.accounts.pepper import load_pepper
from app.config import Settings

# In a checkout the migrations sit beside the package; in a deployed release (the package
# installed in a virtualenv) they sit in the release directory, the working directory.
MIGRATIONS_CANDIDATES = (Path(__file__).resolve().parent.parent / "migrations", Path("migrations"))
DEFAULT_SQLITE_FILE = "probboard.sqlite3"

log = logging.getLogger(__name__)

db = SQLAlchemy(model_class=Base)
migrate = Migrate()


def init_db(app: Flask, settings: Settings) -> DatabaseGuard:
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
    directory = next((p for p in MIGRATIONS_CANDIDATES if p.is_dir()), MIGRATIONS_CANDIDATES[0])
    migrate.init_app(app, db, directory=str(directory.resolve()))
    return DatabaseGuard(app.app_context, settings.db_timeout_ms / 1000)


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


def db_session() -> DbSession:
    """The SQLAlchemy session of the current app context."""
    return db.session()


def pepper_loader(settings: Settings, instance_path: str) -> Callable[[], bytes]:
    """The API-key pepper, loaded once per process on first use (never in the factory)."""
    loaded: list[bytes] = []

    def pepper() -> bytes:
        if not loaded:
            loaded.append(load_pepper(settings.api_key_pepper, instance_path))
        return loaded[0]

    return pepper
