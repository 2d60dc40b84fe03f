"""The key directory's cache under a busy caller: one query per expiry, not one per request.

When a cached key expires under a caller with many requests in flight, they all miss at
once; one of them loads the record and the others wait for it. A cached answer is served
until its ``AUTH_CACHE_MS`` runs out, and only then is the row read again. Queries are
counted on the real engine (SQLite, then PostgreSQL).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from flask import Flask
from sqlalchemy import event, update

from app.accounts.models import Account
from app.auth import directory
from app.auth.directory import KeyRecord
from app.extensions import db
from app.services import services_of
from app.web import create_app
from harness.processes import wait_until
from tests.conftest import BASE_CONFIG

SHORT_TTL_MS = 500


def key_selects(statements: list[str]) -> Any:
    """A ``before_cursor_execute`` listener appending each SELECT on api_keys to ``statements``."""

    def count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if "api_keys" in statement and statement.lstrip().upper().startswith("SELECT"):
            statements.append(statement)

    return count


def test_concurrent_misses_on_one_key_send_one_query(accounts_app: Flask) -> None:
    """Sixteen simultaneous misses on one key send one query; the others wait for its answer."""
    app = accounts_app
    runner = app.test_cli_runner()
    assert runner.invoke(args=["users", "create", "alice", "--plan", "vip_pro"]).exit_code == 0
    made = runner.invoke(args=["keys", "create", "alice"])
    assert made.exit_code == 0, made.output
    key = str(made.stdout).splitlines()[-1]
    queries: list[str] = []
    count = key_selects(queries)
    with app.app_context():
        directory = services_of(app).authenticator.directory
        directory.forget()
        engine = db.engine
    event.listen(engine, "before_cursor_execute", count)
    start = threading.Barrier(16)

    def look_up(together: bool) -> KeyRecord | None:
        with app.app_context():
            if together:
                start.wait()
            try:
                return directory.key(key)
            finally:
                db.session.remove()

    try:
        with ThreadPoolExecutor(max_workers=16) as pool:
            records = list(pool.map(look_up, [True] * 16))
    finally:
        event.remove(engine, "before_cursor_execute", count)

    assert all(r is not None and r.account_name == "alice" for r in records), records
    assert len(queries) == 1, queries
    # That the entry then expires by itself is checked by the test below (short TTL).


@pytest.fixture
def short_ttl_app(database_url: str) -> Iterator[Flask]:
    """An app on the accounts database whose lookups are cached for ``SHORT_TTL_MS``."""
    app = create_app(
        {**BASE_CONFIG, "DATABASE_URL": database_url, "AUTH_CACHE_MS": str(SHORT_TTL_MS)}
    )
    yield app
    with app.app_context():
        db.session.remove()
        db.engine.dispose()


def test_a_cached_key_keeps_its_old_plan_until_the_ttl_expires(short_ttl_app: Flask) -> None:
    """A plan changed in the database is served from the cache until its TTL runs out, then read."""
    app = short_ttl_app
    runner = app.test_cli_runner()
    assert runner.invoke(args=["users", "create", "alice", "--plan", "vip_pro"]).exit_code == 0
    made = runner.invoke(args=["keys", "create", "alice"])
    assert made.exit_code == 0, made.output
    key = str(made.stdout).splitlines()[-1]
    with app.app_context():
        directory = services_of(app).authenticator.directory
        engine = db.engine

    def plan() -> str:
        with app.app_context():
            try:
                record = directory.key(key)
            finally:
                db.session.remove()
        assert record is not None
        return record.plan

    queries: list[str] = []
    count = key_selects(queries)
    event.listen(engine, "before_cursor_execute", count)
    try:
        assert plan() == "vip_pro"
        assert len(queries) == 1, queries
        # Behind the cache's back (no CLI, no forget): the row changes in the database.
        with app.app_context():
            db.session.execute(update(Account).where(Account.name == "alice").values(plan="admin"))
            db.session.commit()
            db.session.remove()
        # Still the cached answer, read from no query: the cache is really used.
        assert plan() == "vip_pro"
        assert len(queries) == 1, queries
        # Then the entry expires on its own and the next lookup reads the new plan.
        assert wait_until(lambda: plan() == "admin", timeout=10, interval=0.02)
    finally:
        event.remove(engine, "before_cursor_execute", count)
    # Every lookup before the expiry was served from the cache: one query loaded, one reloaded.
    assert len(queries) == 2, queries


def test_the_cache_forgets_after_its_ttl_and_holds_at_most_its_size() -> None:
    now = [1000.0]
    cache: directory._Expiring[str] = directory._Expiring(3, ttl_s=2.0, monotonic=lambda: now[0])
    cache.put("a", "A")
    cache.put("b", None)  # "no such key" is cached too
    assert (cache.get("a"), cache.get("b")) == ("A", None)
    assert cache.get("c") is directory._MISSING
    now[0] += 2.0
    assert cache.get("a") is directory._MISSING  # expired at its TTL
    cache.put("c", "C")
    cache.put("d", "D")
    cache.put("e", "E")  # full: the expired a and b go first
    assert [cache.get(k) for k in "cde"] == ["C", "D", "E"]
    cache.put("f", "F")  # full and nothing expired: the oldest goes
    assert cache.get("c") is directory._MISSING
    assert [cache.get(k) for k in "def"] == ["D", "E", "F"]
    cache.put("d", "D2")  # a refresh moves it to the back
    cache.put("g", "G")
    assert cache.get("e") is directory._MISSING
    assert [cache.get(k) for k in "dfg"] == ["D2", "F", "G"]
