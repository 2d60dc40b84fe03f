"""The alerts' integration tests: the accounts app (to make alerts) and an engine on the same
migrated database (SQLite, then PostgreSQL)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from flask import Flask
from sqlalchemy import create_engine
from sqlalchemy.engine import Engine

from app.web import create_app
from harness.clocks import OffsetClock
from tests.conftest import BASE_CONFIG
from tests.integration.alerts import test_delivery


@pytest.fixture
def app(database_url: str) -> Iterator[Flask]:
    config = {**BASE_CONFIG, "DATABASE_URL": database_url, "ALERTS_ALLOWED_HOSTS": "127.0.0.1"}
    found = create_app(config)
    yield found
    with found.app_context():
        from app.extensions import db

        db.session.remove()
        db.engine.dispose()


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    found = create_engine(database_url)
    yield found
    found.dispose()


@pytest.fixture(autouse=True)
def board_clock(monkeypatch: pytest.MonkeyPatch) -> OffsetClock:
    """This test's boards', runner's and calls' clock (``test_delivery.CLOCK``), 100 s into
    a window at the test's start: no window ends, and no call expires, while it runs."""
    clock = test_delivery.next_window_clock()
    monkeypatch.setattr(test_delivery, "CLOCK", clock)
    return clock
