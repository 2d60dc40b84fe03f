"""The operator CLI: ``users``, ``keys`` and ``sessions`` on SQLite and on PostgreSQL.

Happy paths print what they did; errors exit non-zero with exactly one line; a key or a
session token is shown once (the last stdout line) and never stored or listed in clear.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from typing import Any

import pytest
from click.testing import Result
from flask import Flask
from sqlalchemy import select, text

from app.accounts.models import Session
from app.extensions import db
from tests.conftest import TEST_PEPPER

KEY = re.compile(r"^pbk_[A-Za-z0-9_-]{43}$")
TOKEN = re.compile(r"^pbs_[A-Za-z0-9_-]{43}$")
WHEN = r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}Z"


# -- helpers -----------------------------------------------------------------------------


def invoke(app: Flask, *args: str) -> Result:
    """Run ``flask <args>`` in-process against ``app``."""
    return app.test_cli_runner().invoke(args=list(args))


def succeeds(app: Flask, *args: str) -> str:
    """Run a command that must succeed; its stdout (nothing on stderr)."""
    result = invoke(app, *args)
    assert result.exit_code == 0, (args, result.output, result.exception)
    assert result.stderr == "", (args, result.stderr)
    return result.stdout


def fails(app: Flask, *args: str) -> str:
    """Run a command that must fail with exactly one line of output; that line."""
    result = invoke(app, *args)
    assert result.exit_code != 0, (args, result.output)
    lines = result.output.splitlines()
    assert len(lines) == 1, (args, result.output, repr(result.exception))
    assert lines[0].startswith("Error: "), lines
    assert result.stdout == "", (args, result.stdout)
    return lines[0]


def new_key(app: Flask, name: str, *options: str) -> str:
    """``keys create NAME``; the key from the last line of stdout."""
    key = succeeds(app, "keys", "create", name, *options).splitlines()[-1]
    assert KEY.fullmatch(key), key
    return key


def rows(app: Flask, statement: str, **params: Any) -> list[tuple[Any, ...]]:
    """Rows of an SQL query on the app's database, as tuples."""
    with app.app_context():
        return [tuple(row) for row in db.session.execute(text(statement), params)]


def records(app: Flask, statement: str) -> list[dict[str, Any]]:
    """Rows of an SQL query on the app's database, as dicts."""
    with app.app_context():
        return [dict(row._mapping) for row in db.session.execute(text(statement))]


def keyed_hash(value: str) -> str:
    return hmac.new(TEST_PEPPER.encode(), value.encode(), hashlib.sha256).hexdigest()


# -- users -------------------------------------------------------------------------------


def test_users_create_list_set_plan_disable_enable(accounts_app: Flask) -> None:
    assert succeeds(accounts_app, "users", "list") == ""
    assert (
        succeeds(accounts_app, "users", "create", "alice", "--plan", "vip_pro")
        == "created account alice (plan vip_pro)\n"
    )
    assert (
        succeeds(accounts_app, "users", "create", "bob.b@x-1_", "--plan", "user")
        == "created account bob.b@x-1_ (plan user)\n"
    )
    succeeds(accounts_app, "users", "create", "root", "--plan", "admin")

    listed = succeeds(accounts_app, "users", "list").splitlines()
    assert len(listed) == 3
    assert re.fullmatch(rf"alice\tvip_pro\tactive\tcreated {WHEN}", listed[0]), listed
    assert re.fullmatch(rf"bob\.b@x-1_\tuser\tactive\tcreated {WHEN}", listed[1]), listed
    assert re.fullmatch(rf"root\tadmin\tactive\tcreated {WHEN}", listed[2]), listed

    assert (
        succeeds(accounts_app, "users", "set-plan", "alice", "user")
        == "account alice is now on plan user\n"
    )
    assert (
        succeeds(accounts_app, "users", "disable", "bob.b@x-1_") == "account bob.b@x-1_ disabled\n"
    )
    listed = succeeds(accounts_app, "users", "list").splitlines()
    assert listed[0].startswith("alice\tuser\tactive\t"), listed
    assert listed[1].startswith("bob.b@x-1_\tuser\tdisabled\t"), listed

    assert succeeds(accounts_app, "users", "enable", "bob.b@x-1_") == "account bob.b@x-1_ enabled\n"
    assert (
        succeeds(accounts_app, "users", "list")
        .splitlines()[1]
        .startswith("bob.b@x-1_\tuser\tactive\t")
    )
    stored = rows(accounts_app, "SELECT name, plan, disabled FROM accounts ORDER BY name")
    assert [(r[0], r[1], bool(r[2])) for r in stored] == [
        ("alice", "user", False),
        ("bob.b@x-1_", "user", False),
        ("root", "admin", False),
    ]


def case(name: str, needle: str, *args: str) -> Any:
    return pytest.param(args, needle, id=name)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        case("bad-plan-gold", "'gold'", "users", "create", "carol", "--plan", "gold"),
        case("bad-plan-guest", "'guest'", "users", "create", "carol", "--plan", "guest"),
        case("bad-plan-case", "'VIP_PRO'", "users", "create", "carol", "--plan", "VIP_PRO"),
        case("name-space", "'bad name'", "users", "create", "bad name", "--plan", "user"),
        case("name-dot-first", "'.dot'", "users", "create", ".dot", "--plan", "user"),
        case("name-empty", "invalid account name", "users", "create", "", "--plan", "user"),
        case("name-65", "invalid account name", "users", "create", "x" * 65, "--plan", "user"),
        case("name-newline", "invalid account name", "users", "create", "a\nb", "--plan", "user"),
        case("duplicate", "already exists", "users", "create", "alice", "--plan", "user"),
        case("set-plan-gold", "'gold'", "users", "set-plan", "alice", "gold"),
        case("set-plan-unknown", "'nobody'", "users", "set-plan", "nobody", "user"),
        case("disable-unknown", "'nobody'", "users", "disable", "nobody"),
        case("enable-unknown", "'nobody'", "users", "enable", "nobody"),
        case("key-unknown-account", "'nobody'", "keys", "create", "nobody"),
        case("keys-list-unknown-account", "'nobody'", "keys", "list", "nobody"),
        case("revoke-unknown-id", "no such key", "keys", "revoke", "999"),
        case("revoke-unknown-key", "no such key", "keys", "revoke", "pbk_" + "A" * 43),
        case("revoke-bad-form", "pbk_", "keys", "revoke", "not-a-key"),
        case("revoke-bad-id", "pbk_", "keys", "revoke", "12ab"),
        case("revoke-non-ascii-digits", "pbk_", "keys", "revoke", "\u0661\u0662"),
        case("session-unknown-account", "'nobody'", "sessions", "create", "nobody"),
        case("session-revoke-unknown", "no such session", "sessions", "revoke", "pbs_x"),
    ],
)
def test_errors_exit_non_zero_with_one_line(
    accounts_app: Flask, args: tuple[str, ...], needle: str
) -> None:
    succeeds(accounts_app, "users", "create", "alice", "--plan", "vip_pro")
    line = fails(accounts_app, *args)
    assert needle in line, line
    # Nothing was changed by the failed command.
    stored = rows(accounts_app, "SELECT name, plan, disabled FROM accounts")
    assert [(r[0], r[1], bool(r[2])) for r in stored] == [("alice", "vip_pro", False)]


def test_duplicate_account_name_is_refused(accounts_app: Flask) -> None:
    succeeds(accounts_app, "users", "create", "dup", "--plan", "user")
    assert fails(accounts_app, "users", "create", "dup", "--plan", "admin") == (
        "Error: an account named 'dup' already exists"
    )
    assert rows(accounts_app, "SELECT plan FROM accounts WHERE name = 'dup'") == [("user",)]


# -- keys --------------------------------------------------------------------------------


def test_keys_create_prints_the_key_once_on_the_last_line(accounts_app: Flask) -> None:
    succeeds(accounts_app, "users", "create", "alice", "--plan", "vip_pro")
    succeeds(accounts_app, "users", "create", "root", "--plan", "admin")
    out = succeeds(accounts_app, "keys", "create", "alice")
    lines = out.splitlines()
    key = lines[-1]
    assert KEY.fullmatch(key), out
    masked = f"{key[:12]}...{key[-4:]}"
    assert lines[0] == f"created key 1 ({masked}) for alice; it is shown only now:"
    assert out.count(key) == 1

    admin_key = new_key(accounts_app, "root")
    expiring = succeeds(accounts_app, "keys", "create", "alice", "--expires-in-days", "7")
    expiring_key = expiring.splitlines()[-1]
    assert KEY.fullmatch(expiring_key)
    assert re.search(rf", expires {WHEN}; it is shown only now:$", expiring.splitlines()[0])
    assert len({key, admin_key, expiring_key}) == 3

    stored = rows(
        accounts_app, "SELECT id, prefix, last4, key_hash, expires_at FROM api_keys ORDER BY id"
    )
    assert [(r[0], r[1], r[2], r[3]) for r in stored] == [
        (1, key[:12], key[-4:], keyed_hash(key)),
        (2, admin_key[:12], admin_key[-4:], keyed_hash(admin_key)),
        (3, expiring_key[:12], expiring_key[-4:], keyed_hash(expiring_key)),
    ]
    assert stored[0][4] is None and stored[2][4] is not None


def test_keys_list_shows_masked_keys_only(accounts_app: Flask) -> None:
    succeeds(accounts_app, "users", "create", "alice", "--plan", "vip_pro")
    succeeds(accounts_app, "users", "create", "root", "--plan", "admin")
    alice_key = new_key(accounts_app, "alice")
    root_key = new_key(accounts_app, "root")

    everyone = succeeds(accounts_app, "keys", "list")
    lines = everyone.splitlines()
    assert lines[0] == "id\taccount\tkey\tcreated\tlast used\texpires\trevoked"
    assert re.fullmatch(
        rf"1\talice\t{re.escape(alice_key[:12])}\.\.\.{re.escape(alice_key[-4:])}"
        rf"\t{WHEN}\t-\t-\t-",
        lines[1],
    ), lines
    assert lines[2].startswith(f"2\troot\t{root_key[:12]}...{root_key[-4:]}\t"), lines
    assert len(lines) == 3
    for key in (alice_key, root_key):
        assert key not in everyone
        assert key[4:] not in everyone
        assert key[:20] not in everyone  # more than the 12-character public prefix

    only_root = succeeds(accounts_app, "keys", "list", "root").splitlines()
    assert len(only_root) == 2 and only_root[1].startswith("2\troot\t"), only_root
    assert root_key not in "\n".join(only_root)


def test_keys_revoke_by_key_and_by_id(accounts_app: Flask) -> None:
    succeeds(accounts_app, "users", "create", "alice", "--plan", "vip_pro")
    first = new_key(accounts_app, "alice")
    second = new_key(accounts_app, "alice")

    out = succeeds(accounts_app, "keys", "revoke", first)
    assert out == f"revoked key 1 ({first[:12]}...{first[-4:]})\n"
    assert first not in out
    assert succeeds(accounts_app, "keys", "revoke", "2") == (
        f"revoked key 2 ({second[:12]}...{second[-4:]})\n"
    )
    # Revoking again is harmless and keeps the first revocation time.
    before = rows(accounts_app, "SELECT revoked_at FROM api_keys WHERE id = 1")[0][0]
    succeeds(accounts_app, "keys", "revoke", "1")
    assert rows(accounts_app, "SELECT revoked_at FROM api_keys WHERE id = 1")[0][0] == before

    listed = succeeds(accounts_app, "keys", "list", "alice").splitlines()[1:]
    assert len(listed) == 2
    for line in listed:
        assert re.search(rf"\t{WHEN}$", line), line  # the revoked column is filled
    revoked = rows(accounts_app, "SELECT revoked_at FROM api_keys ORDER BY id")
    assert all(r[0] is not None for r in revoked)


@pytest.mark.parametrize("key_id", ["3000000000", "99999999999999999999999"])
def test_revoking_an_out_of_range_id_is_one_line(accounts_app: Flask, key_id: str) -> None:
    """An id no key can have is just an unknown key, not a database crash."""
    succeeds(accounts_app, "users", "create", "alice", "--plan", "vip_pro")
    new_key(accounts_app, "alice")
    assert fails(accounts_app, "keys", "revoke", key_id) == "Error: no such key"
    assert rows(accounts_app, "SELECT revoked_at FROM api_keys") == [(None,)]


def test_keys_only_for_vip_pro_and_admin_accounts(accounts_app: Flask) -> None:
    succeeds(accounts_app, "users", "create", "ursula", "--plan", "user")
    line = fails(accounts_app, "keys", "create", "ursula")
    assert "'ursula'" in line and "user" in line and "vip_pro" in line, line

    succeeds(accounts_app, "users", "create", "vic", "--plan", "vip_pro")
    succeeds(accounts_app, "users", "disable", "vic")
    line = fails(accounts_app, "keys", "create", "vic")
    assert line == "Error: account 'vic' is disabled"
    assert rows(accounts_app, "SELECT count(*) FROM api_keys") == [(0,)]

    # Upgraded / enabled again: now it works.
    succeeds(accounts_app, "users", "set-plan", "ursula", "vip_pro")
    succeeds(accounts_app, "users", "enable", "vic")
    new_key(accounts_app, "ursula")
    new_key(accounts_app, "vic")
    assert rows(accounts_app, "SELECT count(*) FROM api_keys") == [(2,)]


def test_the_database_never_holds_a_key_or_token_in_clear(accounts_app: Flask) -> None:
    succeeds(accounts_app, "users", "create", "alice", "--plan", "vip_pro")
    keys = [new_key(accounts_app, "alice") for _ in range(3)]
    token = succeeds(accounts_app, "sessions", "create", "alice").splitlines()[-1]
    assert TOKEN.fullmatch(token)
    succeeds(accounts_app, "keys", "revoke", keys[0])

    key_rows = records(accounts_app, "SELECT * FROM api_keys ORDER BY id")
    assert len(key_rows) == 3
    for key, row in zip(keys, key_rows, strict=True):
        assert row["key_hash"] != key
        assert row["key_hash"] == keyed_hash(key)
        assert row["key_hash"] != hashlib.sha256(key.encode()).hexdigest()  # keyed, not plain
        for value in row.values():
            assert key not in str(value)
            assert key[4:] not in str(value)
    session_rows = records(accounts_app, "SELECT * FROM sessions")
    assert len(session_rows) == 1
    assert session_rows[0]["token_hash"] == keyed_hash(token)
    everything = [
        str(value)
        for table in ("accounts", "api_keys", "sessions")
        for row in rows(accounts_app, f"SELECT * FROM {table}")
        for value in row
    ]
    for secret in [*keys, token]:
        assert not any(secret[4:] in value for value in everything)


# -- sessions ----------------------------------------------------------------------------


def test_sessions_create_and_revoke(accounts_app: Flask) -> None:
    succeeds(accounts_app, "users", "create", "ursula", "--plan", "user")
    out = succeeds(accounts_app, "sessions", "create", "ursula")
    lines = out.splitlines()
    token = lines[-1]
    assert TOKEN.fullmatch(token), out
    assert re.fullmatch(
        rf"created session 1 for ursula, expires {WHEN}; send it as the cookie probboard_session:",
        lines[0],
    ), lines
    assert out.count(token) == 1

    short = succeeds(accounts_app, "sessions", "create", "ursula", "--days", "2")
    assert TOKEN.fullmatch(short.splitlines()[-1])
    with accounts_app.app_context():
        stored = [(s.created_at, s.expires_at) for s in db.session.scalars(select(Session))]
    lifetimes = sorted(round((end - start).total_seconds()) for start, end in stored)
    assert lifetimes == [2 * 86400, 30 * 86400]  # --days 2, and SESSION_TTL_DAYS (30)

    assert succeeds(accounts_app, "sessions", "revoke", token) == "revoked session 1\n"
    assert rows(accounts_app, "SELECT id FROM sessions WHERE revoked_at IS NOT NULL") == [(1,)]
    assert fails(accounts_app, "sessions", "revoke", "pbs_unknown") == "Error: no such session"

    succeeds(accounts_app, "users", "disable", "ursula")
    assert fails(accounts_app, "sessions", "create", "ursula") == (
        "Error: account 'ursula' is disabled"
    )
