"""Accounts for integration tests, made by the documented CLI commands run in this process.

The commands (``db upgrade``, ``users create``, ``keys create``...) run on Flask's CLI runner
over the app factory, exactly as ``flask --app wsgi`` runs them, without a process each: a CLI
process costs a second of imports alone and 2-4 s in a loaded parallel run, and a module's
setup made up to fourteen. The commands as processes are tested where that is the subject
(tests/integration/test_cli.py, test_accounts_workers.py); harness/accounts.py keeps
them as processes for the bench's cluster.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

from app.web import create_app
from harness.databases import scratch_postgres_database
from harness.processes import service_env
from tests.conftest import BASE_CONFIG, TEST_PEPPER


class AccountsCli:
    """The accounts commands on one database, and the environment a service needs for it."""

    def __init__(self, database_url: str) -> None:
        self.database_url = database_url
        self.env = service_env(DATABASE_URL=database_url, API_KEY_PEPPER=TEST_PEPPER)
        self._runner = create_app({**BASE_CONFIG, "DATABASE_URL": database_url}).test_cli_runner()

    def run(self, *args: str) -> str:
        """One command (``flask ARGS``); its output. Fails the test if the command fails."""
        result = self._runner.invoke(args=list(args))
        assert result.exit_code == 0, (args, result.output)
        return str(result.output)

    def create_user(self, name: str, plan: str) -> None:
        """``users create NAME --plan PLAN``."""
        self.run("users", "create", name, "--plan", plan)

    def issue_key(self, name: str) -> str:
        """A new API key of ``name``'s: ``keys create`` prints it alone on its last line."""
        key = self.run("keys", "create", name).splitlines()[-1].strip()
        assert key.startswith("pbk_"), key
        return key

    def issue_session(self, name: str) -> str:
        """A new session token of ``name``'s: the last line ``sessions create`` prints."""
        token = self.run("sessions", "create", name).splitlines()[-1].strip()
        assert token.startswith("pbs_"), token
        return token

    def key_id(self, key: str) -> int:
        """The id of ``key``'s row, found by its keyed hash as the service stores it."""
        digest = hmac.new(TEST_PEPPER.encode(), key.encode(), hashlib.sha256).hexdigest()
        with psycopg.connect(self.database_url, connect_timeout=5) as db:
            row = db.execute("SELECT id FROM api_keys WHERE key_hash = %s", (digest,)).fetchone()
        assert row is not None, "the key made by the CLI is not in the database"
        return int(row[0])


@contextmanager
def scratch_accounts() -> Iterator[AccountsCli]:
    """A scratch PostgreSQL database of the caller's own, migrated by ``db upgrade``; its
    commands. Dropped afterwards."""
    with scratch_postgres_database() as url:
        cli = AccountsCli(url)
        cli.run("db", "upgrade")
        yield cli
