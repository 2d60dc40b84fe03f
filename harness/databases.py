"""Databases for tests: an SQLite file per test, or a PostgreSQL database of the session's own.

PostgreSQL is found at ``TEST_DATABASE_URL`` (default: the local server on 127.0.0.1:5432 as
user postgres). The session creates a uniquely named database there and drops it at the end,
whatever happened in between.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

DEFAULT_SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"


def server_url() -> str:
    """The maintenance URL of the PostgreSQL server the tests use."""
    return os.environ.get("TEST_DATABASE_URL", DEFAULT_SERVER)


def _with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, parts.fragment))


@contextmanager
def scratch_postgres_database() -> Iterator[str]:
    """Create ``probboard_test_<random>``; yield its URL; drop it (forcing out connections)."""
    server = server_url()
    name = f"probboard_test_{secrets.token_hex(4)}"
    with psycopg.connect(server, autocommit=True, connect_timeout=5) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield _with_database(server, name)
    finally:
        with psycopg.connect(server, autocommit=True, connect_timeout=5) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def empty_tables(url: str) -> None:
    """Remove every row the tests wrote (keeps the schema and alembic_version)."""
    with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
        conn.execute(
            "TRUNCATE sessions, api_keys, accounts, calibration_checkpoints, calibration_windows,"
            " calibration_kept_months, calibration_kept_sums, calibration_window_kept_months,"
            " calibration_window_kept_sums, alert_deliveries, alerts RESTART IDENTITY CASCADE"
        )
