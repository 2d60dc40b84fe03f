"""The track record's tests: an engine on the test's own migrated database."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine
from sqlalchemy.engine import Engine


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    """An engine on ``database_url`` (SQLite, then PostgreSQL), disposed of afterwards."""
    found = create_engine(database_url)
    yield found
    found.dispose()
