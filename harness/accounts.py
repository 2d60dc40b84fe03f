"""Accounts made as an operator makes them: with the documented CLI, each command its own process.

``migrated`` runs ``flask --app wsgi db upgrade`` and returns the environment every later
command needs; ``create_user``, ``issue_key`` and ``issue_session`` are ``users create``,
``keys create`` and ``sessions create`` on it. ``scratch_accounts`` does the first step on a
PostgreSQL database of the caller's own (as in production), dropped at the end.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from harness.databases import scratch_postgres_database
from harness.processes import TEST_PEPPER as TEST_PEPPER  # re-exported: callers import it here
from harness.processes import flask_cli, service_env


def migrated(database_url: str) -> dict[str, str]:
    """The CLI's environment for ``database_url`` (the test pepper), after ``db upgrade``."""
    env = service_env(DATABASE_URL=database_url, API_KEY_PEPPER=TEST_PEPPER)
    flask_cli(env, "db", "upgrade")
    return env


@contextmanager
def scratch_accounts() -> Iterator[dict[str, str]]:
    """A migrated scratch PostgreSQL database: the CLI's environment for it; dropped after."""
    with scratch_postgres_database() as url:
        yield migrated(url)


def create_user(env: Mapping[str, str], name: str, plan: str) -> None:
    """``flask users create NAME --plan PLAN``."""
    flask_cli(env, "users", "create", name, "--plan", plan)


def issue_key(env: Mapping[str, str], name: str) -> str:
    """A new API key of ``name``'s: ``flask keys create NAME`` prints it alone on its last line."""
    key = flask_cli(env, "keys", "create", name).splitlines()[-1].strip()
    assert key.startswith("pbk_"), key
    return key


def issue_session(env: Mapping[str, str], name: str) -> str:
    """A new session token of ``name``'s: the last line ``flask sessions create NAME`` prints."""
    token = flask_cli(env, "sessions", "create", name).splitlines()[-1].strip()
    assert token.startswith("pbs_"), token
    return token
