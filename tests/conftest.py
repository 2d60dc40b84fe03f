"""Fixtures: ``app``/``client``/``runner`` on the embedded bus, and real Redis and gunicorn."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from flask import Flask
from flask.testing import FlaskClient, FlaskCliRunner

from app.web import create_app
from harness.accounts import TEST_PEPPER as TEST_PEPPER  # re-exported: tests import it here
from harness.databases import empty_tables, scratch_postgres_database
from harness.processes import RedisServer, Service, service_env
from tests.support import budget

BASE_CONFIG = {
    "REDIS_URL": "memory://",
    "SECRET_KEY": "test-secret-of-the-suite",
    "API_KEY_PEPPER": TEST_PEPPER,
    "EMBEDDED_REFRESHER": "false",
    "SIMULATION_SEED": "7",
}
# For tests whose subject is the counting on a shared Redis (two workers, one window): a
# limit's Redis call may take 10 s, so a slow moment on a loaded machine cannot move the
# counts to a worker's memory (the fallback for an outage, docs/limits.md) and split them.
COUNTED_ON_REDIS = {"LIMITS_REDIS_TIMEOUT_MS": "10000"}


def pytest_addoption(parser: pytest.Parser) -> None:
    """The suite's options: ``--budget`` (tests/support/budget.py)."""
    budget.add_option(parser)


def pytest_configure(config: pytest.Config) -> None:
    """Install the time budget (tests/support/budget.py)."""
    budget.register(config)


@pytest.fixture
def app(tmp_path: Path) -> Flask:
    """An app on the memory bus with the embedded refresher off: tests publish boards.

    Its database is an empty SQLite file of this test's own (no schema until migrated).
    """
    return create_app({**BASE_CONFIG, "DATABASE_URL": f"sqlite:///{tmp_path / 'app.sqlite3'}"})


@pytest.fixture(scope="session")
def postgres_database() -> Iterator[str]:
    """A PostgreSQL database of this test session's own, migrated; dropped at the end."""
    with scratch_postgres_database() as url:
        migrated = create_app({**BASE_CONFIG, "DATABASE_URL": url})
        with migrated.app_context():
            from flask_migrate import upgrade

            upgrade()
            from app.extensions import db

            db.engine.dispose()
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A migrated, empty accounts database: an SQLite file, then PostgreSQL."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'accounts.sqlite3'}"
        migrated = create_app({**BASE_CONFIG, "DATABASE_URL": url})
        with migrated.app_context():
            from flask_migrate import upgrade

            upgrade()
        yield url
        return
    url = request.getfixturevalue("postgres_database")
    try:
        yield url
    finally:
        empty_tables(url)


@pytest.fixture
def accounts_app(database_url: str) -> Iterator[Flask]:
    """An app (memory bus, no embedded refresher) on a migrated accounts database."""
    app = create_app({**BASE_CONFIG, "DATABASE_URL": database_url})
    yield app
    with app.app_context():
        from app.extensions import db

        db.session.remove()
        db.engine.dispose()


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    """A test client of ``app``."""
    return app.test_client()


@pytest.fixture
def runner(app: Flask) -> FlaskCliRunner:
    """A CLI runner of ``app``."""
    return app.test_cli_runner()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A real redis-server on a free port for the whole session."""
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def fresh_redis(redis_server: RedisServer) -> Iterator[RedisServer]:
    """The session's Redis, started if a test stopped it, and emptied before the test."""
    import redis

    if redis_server.process is None:
        redis_server.start()
    redis.Redis.from_url(redis_server.url).flushall()
    yield redis_server
    if redis_server.process is None:
        redis_server.start()


@pytest.fixture
def restartable_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A Redis of this test's own, for tests that stop and restart it."""
    # Own redis-server: the tests that ask for it stop, restart or hang it.
    server = RedisServer(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    """A factory-free handle for gunicorn and the refresher; stopped after the test."""
    # Own gunicorn/refresher: each test sets their environment, then starts them.
    handle = Service(tmp_path, service_env())
    try:
        yield handle
    finally:
        handle.stop()
