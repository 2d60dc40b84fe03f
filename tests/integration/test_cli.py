"""The documented ``flask --app wsgi ...`` commands, each run as its own process.

Their in-process counterparts (the Flask CLI runner) are the unit tests of the same commands:
``tests/unit/accounts/test_accounts_cli.py``, ``tests/unit/test_config.py``,
``tests/unit/refresher/sources/test_simulated.py``.
"""

from __future__ import annotations

import subprocess

from flask import Flask

from harness.processes import BIN, ROOT, service_env
from tests.conftest import TEST_PEPPER
from tests.unit.accounts.test_accounts_cli import KEY, succeeds
from tests.unit.refresher.sources.test_simulated import check_once_output

# -- accounts: users, keys ---------------------------------------------------------------


def flask_command(database_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``.venv/bin/flask --app wsgi <args>`` as the README runs it, on ``database_url``."""
    env = service_env(
        DATABASE_URL=database_url, API_KEY_PEPPER=TEST_PEPPER, SECRET_KEY="test-secret-of-the-suite"
    )
    return subprocess.run(
        [str(BIN / "flask"), "--app", "wsgi", *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_documented_cli_runs_as_a_real_process(accounts_app: Flask, database_url: str) -> None:
    created = flask_command(database_url, "users", "create", "carol", "--plan", "vip_pro")
    assert created.returncode == 0, created.stderr
    assert created.stdout == "created account carol (plan vip_pro)\n"

    made = flask_command(database_url, "keys", "create", "carol")
    assert made.returncode == 0, made.stderr
    key = made.stdout.splitlines()[-1]
    assert KEY.fullmatch(key), made.stdout
    assert key not in made.stderr

    refused = flask_command(database_url, "users", "create", "carol", "--plan", "gold")
    assert refused.returncode != 0
    assert refused.stdout == ""
    assert refused.stderr.splitlines() == [
        "Error: unknown plan 'gold': choose one of user, vip_pro, admin"
    ]

    # The key made by that process works in this one (same database, same pepper).
    response = accounts_app.test_client().get("/api/keys/verify", headers={"X-API-Key": key})
    assert response.status_code == 200, response.get_data(as_text=True)
    body = response.get_json()
    assert (body["ok"], body["userId"], body["plan"]) == (True, "carol", "vip_pro")
    listed = succeeds(accounts_app, "users", "list")
    assert listed.startswith("carol\tvip_pro\tactive\t")


# -- configuration ----------------------------------------------------------------------


def test_cli_refuses_to_start_with_a_bad_value() -> None:
    env = service_env(REFRESH_MS_GUEST="abc")

    result = subprocess.run(
        [str(BIN / "flask"), "--app", "wsgi", "refresher", "--once"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert result.returncode != 0
    assert "REFRESH_MS_GUEST" in result.stderr
    assert "'abc'" in result.stderr
    assert '"items"' not in result.stdout  # no board was printed


# -- the refresher ----------------------------------------------------------------------


def test_refresher_once_from_the_command_line() -> None:
    env = service_env(REDIS_URL="memory://", SIMULATION_SEED="3", LOG_FORMAT="json")

    result = subprocess.run(
        [str(BIN / "flask"), "--app", "wsgi", "refresher", "--once"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert result.returncode == 0, result.stderr
    check_once_output(result.stdout)
