"""Connecting to the SQL store, for every process that does (without Flask).

The web app binds it through Flask-SQLAlchemy (``app.extensions``); the refresher writes the
live record on a plain engine (``app.calibration.recorder``). Both take these options.
"""

from __future__ import annotations

import math
from pathlib import Path

from app.config import Settings

DEFAULT_SQLITE_FILE = "probboard.sqlite3"
# Flask's instance folder for this package in a checkout (the web app's default database).
CHECKOUT_INSTANCE = Path(__file__).resolve().parent.parent / "instance"


def database_url(settings: Settings, instance_dir: Path | None = None) -> str | None:
    """``DATABASE_URL``, else the SQLite file in ``instance_dir`` (or the checkout's instance
    folder when it exists, as the web app's default); None when there is none."""
    if settings.database_url:
        return settings.database_url
    folder = instance_dir or (CHECKOUT_INSTANCE if CHECKOUT_INSTANCE.is_dir() else None)
    return f"sqlite:///{folder / DEFAULT_SQLITE_FILE}" if folder is not None else None


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
