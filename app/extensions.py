"""The Flask extensions (SQLAlchemy, Flask-Migrate), created unbound here and bound by
``create_app``, with the accounts database's engine settings and the API-key pepper.

Nothing here opens a connection: binding only records objects on the app; connections are
opened lazily by the first request (after gunicorn has forked its workers).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from flask import Flask
from flask_migrate import Migrate
from flask_sqlalchemy import SQLAlchemy
from sqlalchemy.orm import Session as DbSession

from app.accounts.db_deadline import DatabaseGuard
from app.accounts.models import Base
from app.accounts.pepper import load_pepper
from app.config import Settings
from app.database import database_url, engine_options

# In a checkout the migrations sit beside the package; in a deployed release (the package
# installed in a virtualenv) they sit in the release directory, the working directory.
MIGRATIONS_CANDIDATES = (Path(__file__).resolve().parent.parent / "migrations", Path("migrations"))

log = logging.getLogger(__name__)

db = SQLAlchemy(model_class=Base)
migrate = Migrate()


def init_db(app: Flask, settings: Settings) -> DatabaseGuard:
    """Bind SQLAlchemy and Flask-Migrate; the default is an SQLite file in the instance folder.

    Nothing connects here, and migrations never run here: ``flask db upgrade`` runs them.
    """
    if not settings.database_url:
        Path(app.instance_path).mkdir(parents=True, exist_ok=True)
    uri = database_url(settings, Path(app.instance_path))
    assert uri is not None  # an instance folder is always given
    app.config["SQLALCHEMY_DATABASE_URI"] = uri
    app.config["SQLALCHEMY_ENGINE_OPTIONS"] = engine_options(uri, settings.db_timeout_ms / 1000)
    db.init_app(app)
    directory = next((p for p in MIGRATIONS_CANDIDATES if p.is_dir()), MIGRATIONS_CANDIDATES[0])
    migrate.init_app(app, db, directory=str(directory.resolve()))
    return DatabaseGuard(app.app_context, settings.db_timeout_ms / 1000)


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
