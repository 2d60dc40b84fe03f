"""The key directory's cache under a busy caller: one query per expiry, not one per request.

When a cached key expires under a caller with many requests in flight, they all miss at
once; one of them loads the record and the others wait for it. Queries are counted on the
real engine (SQLite, then PostgreSQL).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from flask import Flask
from sqlalchemy import event

from app.auth import authenticator
from app.auth.directory import KeyRecord
from app.extensions import db


def test_concurrent_misses_on_one_key_send_one_query(accounts_app: Flask) -> None:
    app = accounts_app
    runner = app.test_cli_runner()
    assert runner.invoke(args=["users", "create", "alice", "--plan", "vip_pro"]).exit_code == 0
    made = runner.invoke(args=["keys", "create", "alice"])
    assert made.exit_code == 0, made.output
    key = str(made.stdout).splitlines()[-1]
    queries: list[str] = []

    def count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if "api_keys" in statement and statement.lstrip().upper().startswith("SELECT"):
            queries.append(statement)

    with app.app_context():
        directory = authenticator().directory
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
    # A lookup after the entry is gone queries again: the cache did not stop expiring.
    directory.forget()
    event.listen(engine, "before_cursor_execute", count)
    try:
        assert look_up(False) is not None
    finally:
        event.remove(engine, "before_cursor_execute", count)
    assert len(queries) == 2, queries
