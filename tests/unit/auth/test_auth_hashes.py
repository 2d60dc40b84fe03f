"""Break-in attempts on the key and session checks, through the real endpoints.

A key or session token is found by its keyed hash, and the stored hash is compared again in
constant time (``app/auth/directory.py``). These tests present what a weakened check would
let in: a key whose stored hash is one character off its true hash, a never-issued key whose
hash shares its first characters with an issued one, a forged row sharing a longer prefix,
malformed keys (which must never reach the database), and session cookies with the same near
misses. Every refusal is also checked to be undone by the right hash, so a refusal for some
other reason cannot pass for the check working. Runs on SQLite and on PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest
from flask import Flask
from sqlalchemy import event, select, update
from sqlalchemy.sql.dml import Update

from app.accounts import tokens
from app.accounts.models import Account, ApiKey, Session
from app.auth.directory import Directory, KeyRecord, SessionRecord
from app.extensions import db
from app.services import services_of
from app.web import create_app
from tests.conftest import BASE_CONFIG
from tests.support.contract import validated

VERIFY = "/api/keys/verify"
LATEST = "/api/probboard/latest"
STREAM = "/api/probboard/stream"
HEX = "0123456789abcdef"
MAX_TRIES = 200_000  # a 2-character prefix takes 256 tries on average
MOVED_KEY_ID = 1_000_000

# Shapes that are not a key: each must be refused before any lookup.
MALFORMED = (
    "",
    "pbk_",
    "pbk_" + "A" * 42,  # one character short
    "pbk_" + "A" * 44,  # one character long
    "pbk_" + "A" * 42 + "=",  # base64 padding
    "pbk_" + "A" * 41 + "+/",  # standard base64, not URL-safe
    "pbs_" + "A" * 43,  # a session token's prefix
    "PBK_" + "A" * 43,
    "pbx_" + "A" * 43,
    "A" * 47,
    "pbk_" + "A" * 21 + " " + "A" * 21,  # a space inside
    "pbk_" + "\u00e9" + "A" * 42,  # non-ASCII (Latin-1, as a header carries it)
    "pbk_" + "\u00bd" * 43,
    "pbk_" + "%41" * 14 + "A",  # percent-encoded, 43 characters
)
MALFORMED_SESSIONS = (
    "pbs_",
    "pbs_" + "A" * 42,
    "pbs_" + "A" * 44,
    "pbk_" + "A" * 43,  # a key's prefix
    "pbs_" + "%41" * 14 + "A",
    "pbs_" + "\u00e9" + "A" * 42,
)


def flipped(digest: str, position: int) -> str:
    """``digest`` with the hex digit at ``position`` changed to the next one."""
    changed = HEX[(HEX.index(digest[position]) + 1) % len(HEX)]
    return digest[:position] + changed + digest[position + 1 :]


def near_miss(pepper: bytes, stored: str, shared: int, make: Callable[[], str]) -> str:
    """A fresh well-formed value never issued, whose keyed hash starts like ``stored``."""
    for _ in range(MAX_TRIES):
        clear = make()
        digest = tokens.keyed_hash(pepper, clear)
        if digest[:shared] == stored[:shared] and digest != stored:
            return clear
    raise AssertionError(f"no value in {MAX_TRIES} shares {shared} hash characters")


class Probe:
    """An app under test: operator commands, direct row edits, lookups and requests."""

    def __init__(self, app: Flask) -> None:
        self.app = app
        self.client = app.test_client(use_cookies=False)
        self.pepper = services_of(app).pepper()
        self.directory: Directory = services_of(app).authenticator.directory

    def cli(self, *args: str) -> str:
        """An operator command; its output."""
        result = self.app.test_cli_runner().invoke(args=list(args))
        assert result.exit_code == 0, (args, result.output, result.exception)
        return str(result.stdout)

    def account(self, name: str, plan: str) -> None:
        """A new account."""
        self.cli("users", "create", name, "--plan", plan)

    def key(self, name: str) -> str:
        """A new key of ``name`` (printed alone on the last line)."""
        key = self.cli("keys", "create", name).splitlines()[-1]
        assert tokens.well_formed(key, tokens.KEY_PREFIX), key
        return key

    def session(self, name: str) -> str:
        """A new session token of ``name``."""
        token = self.cli("sessions", "create", name).splitlines()[-1]
        assert tokens.well_formed(token, tokens.SESSION_PREFIX), token
        return token

    def digest(self, clear: str) -> str:
        """The keyed hash the app stores for ``clear``."""
        return tokens.keyed_hash(self.pepper, clear)

    def change(self, statement: Update) -> None:
        """Run an UPDATE on the database, then drop the directory's cached lookups."""
        with self.app.app_context():
            assert db.session.execute(statement).rowcount == 1  # type: ignore[attr-defined]
            db.session.commit()
            db.session.remove()
        self.directory.forget()

    def rehash_key(self, old: str, new: str) -> None:
        """Store ``new`` as the hash of the key whose stored hash is ``old``."""
        self.change(update(ApiKey).where(ApiKey.key_hash == old).values(key_hash=new))

    def rehash_session(self, old: str, new: str) -> None:
        """Store ``new`` as the hash of the session whose stored hash is ``old``."""
        self.change(update(Session).where(Session.token_hash == old).values(token_hash=new))

    def key_id(self, digest: str) -> int:
        """The id of the key row whose stored hash is ``digest``."""
        with self.app.app_context():
            found = db.session.scalar(select(ApiKey.id).where(ApiKey.key_hash == digest))
            db.session.remove()
        assert found is not None, digest
        return found

    def forge_key_row(self, owner: str, key_hash: str) -> int:
        """A key row of ``owner`` with ``key_hash``, whose clear key nobody knows; its id."""
        with self.app.app_context():
            account = db.session.scalar(select(Account).where(Account.name == owner))
            assert account is not None
            row = ApiKey(account=account, prefix="pbk_forged00", last4="XXXX", key_hash=key_hash)
            db.session.add(row)
            db.session.commit()
            row_id = row.id
            db.session.remove()
        return row_id

    def key_record(self, clear: str) -> KeyRecord | None:
        """The directory's answer for key ``clear``."""
        with self.app.app_context():
            try:
                return self.directory.key(clear)
            finally:
                db.session.remove()

    def key_record_by_digest(self, digest: str) -> KeyRecord | None:
        """The directory's answer for a key hash (as streams re-check their key)."""
        with self.app.app_context():
            try:
                return self.directory.key_by_digest(digest)
            finally:
                db.session.remove()

    def session_record(self, clear: str) -> SessionRecord | None:
        """The directory's answer for session token ``clear``."""
        with self.app.app_context():
            try:
                return self.directory.session(clear)
            finally:
                db.session.remove()

    def answers(self, key: str) -> dict[str, tuple[int, str]]:
        """How each endpoint answers ``key`` sent each way: (status, error code or caller).

        The caller of a 200 is the verified account name (``/verify``) or the plan served
        (``/latest``); a stream that opens is closed at once.
        """
        found: dict[str, tuple[int, str]] = {}
        for scheme, headers in self.key_headers(key).items():
            found[f"verify {scheme}"] = self.answer(VERIFY, headers, "userId")
            found[f"latest {scheme}"] = self.answer(LATEST, headers, "plan")
            found[f"stream {scheme}"] = self.stream_answer(headers)
        return found

    @staticmethod
    def key_headers(key: str) -> dict[str, dict[str, str]]:
        """The two ways of sending a key."""
        return {"x-api-key": {"X-API-Key": key}, "bearer": {"Authorization": f"Bearer {key}"}}

    def answer(self, path: str, headers: Mapping[str, str], field: str) -> tuple[int, str]:
        """(status, error code) of a refusal, or (200, the body's ``field``)."""
        response = self.client.get(path, headers=dict(headers))
        if response.status_code == 200:
            body = response.get_json()
            assert isinstance(body, dict)
            return 200, str(body[field])
        error = validated("error", response.get_data())
        if response.status_code == 401:
            assert response.headers["WWW-Authenticate"] == 'Bearer realm="probboard"'
        return response.status_code, str(error["code"])

    def stream_answer(self, headers: Mapping[str, str]) -> tuple[int, str]:
        """(status, error code) of a refused stream; (200, "stream") for one that opened."""
        response = self.client.get(STREAM, headers=dict(headers), buffered=False)
        try:
            if response.status_code == 200:
                return 200, "stream"
            return response.status_code, str(validated("error", response.get_data())["code"])
        finally:
            response.close()

    def plan_with_cookie(self, token: str) -> str:
        """The plan ``/latest`` serves to a caller with session cookie ``token``."""
        response = self.client.get(LATEST, headers={"Cookie": f"probboard_session={token}"})
        assert response.status_code == 200, response.get_data(as_text=True)
        return str(validated("board", response.get_data())["plan"])


@pytest.fixture
def probe(database_url: str) -> Iterator[Probe]:
    """An app on the accounts database; failed attempts are not throttled (tests make many)."""
    app = create_app(
        {**BASE_CONFIG, "DATABASE_URL": database_url, "AUTH_FAILURE_LIMIT": "100000 per minute"}
    )
    yield Probe(app)
    services_of(app).broker.shutdown()
    with app.app_context():
        db.session.remove()
        db.engine.dispose()


def expected_answers(
    verify: tuple[int, str], latest: tuple[int, str], stream: tuple[int, str]
) -> dict[str, tuple[int, str]]:
    """What ``Probe.answers`` must hold: each endpoint's answer, the same under either scheme."""
    expected: dict[str, tuple[int, str]] = {}
    for scheme in ("x-api-key", "bearer"):
        expected[f"verify {scheme}"] = verify
        expected[f"latest {scheme}"] = latest
        expected[f"stream {scheme}"] = stream
    return expected


def refused_everywhere(probe: Probe, key: str) -> None:
    """Every endpoint, under either scheme, answers ``key`` with 401 invalid_key."""
    refusal = (401, "invalid_key")
    assert probe.answers(key) == expected_answers(refusal, refusal, refusal)


def accepted_everywhere(probe: Probe, key: str, name: str, plan: str) -> None:
    """Every endpoint, under either scheme, serves ``key`` as ``name`` under ``plan``."""
    assert probe.answers(key) == expected_answers((200, name), (200, plan), (200, "stream"))


# -- a stored hash one character off -----------------------------------------------------------


@pytest.mark.parametrize("position", [2, 32, 63])
def test_key_whose_stored_hash_is_one_character_off_is_refused(probe: Probe, position: int) -> None:
    """A key whose stored hash differs from its keyed hash in one hex digit opens nothing."""
    probe.account("alice", "vip_pro")
    key = probe.key("alice")
    true_hash = probe.digest(key)
    probe.rehash_key(true_hash, flipped(true_hash, position))

    refused_everywhere(probe, key)
    assert probe.key_record(key) is None
    assert probe.key_record_by_digest(true_hash) is None

    # The right hash lets the same key in again: the refusal was the hash check's.
    probe.rehash_key(flipped(true_hash, position), true_hash)
    accepted_everywhere(probe, key, "alice", "vip_pro")


@pytest.mark.parametrize("position", [2, 32, 63])
def test_session_whose_stored_hash_is_one_character_off_is_a_guest(
    probe: Probe, position: int
) -> None:
    """A session cookie whose stored hash is one hex digit off is served as a guest."""
    probe.account("ursula", "user")
    token = probe.session("ursula")
    true_hash = probe.digest(token)
    probe.rehash_session(true_hash, flipped(true_hash, position))

    assert probe.plan_with_cookie(token) == "guest"
    assert probe.session_record(token) is None

    probe.rehash_session(flipped(true_hash, position), true_hash)
    assert probe.plan_with_cookie(token) == "user"


# -- never-issued values whose hash starts like an issued one ----------------------------------


def test_never_issued_key_sharing_two_hash_characters_is_refused(probe: Probe) -> None:
    """A never-issued key whose hash shares 2 leading characters with a real one is refused."""
    probe.account("alice", "vip_pro")
    key = probe.key("alice")
    stored = probe.digest(key)
    guess = near_miss(probe.pepper, stored, 2, tokens.new_key)

    refused_everywhere(probe, guess)
    assert probe.key_record(guess) is None
    assert probe.key_record_by_digest(probe.digest(guess)) is None
    accepted_everywhere(probe, key, "alice", "vip_pro")


def test_never_issued_session_sharing_two_hash_characters_is_a_guest(probe: Probe) -> None:
    """A never-issued token whose hash shares 2 leading characters with a real one is a guest."""
    probe.account("ursula", "user")
    token = probe.session("ursula")
    guess = near_miss(probe.pepper, probe.digest(token), 2, tokens.new_session_token)

    assert probe.plan_with_cookie(guess) == "guest"
    assert probe.session_record(guess) is None
    assert probe.plan_with_cookie(token) == "user"


def test_forged_row_sharing_eight_hash_characters_never_answers_for_the_real_key(
    probe: Probe,
) -> None:
    """Beside a forged row sharing 8 hash characters, the real key maps to its own row only."""
    # The forged row's owner (mallory, admin) must never be returned for alice's key.
    probe.account("mallory", "admin")  # created first: the lower account id
    probe.account("alice", "vip_pro")
    key = probe.key("alice")
    stored = probe.digest(key)
    forged = stored[:8] + "0" * 56
    assert forged < stored  # (one chance in 16**56 that this needs another tail)
    forged_id = probe.forge_key_row("mallory", forged)
    # Move the real row after the forged one: the forged row now comes first by account id,
    # key id, table order and hash order, so a lookup matching on a prefix finds it first.
    probe.change(update(ApiKey).where(ApiKey.key_hash == stored).values(id=MOVED_KEY_ID))
    assert probe.key_id(stored) == MOVED_KEY_ID and forged_id < MOVED_KEY_ID

    accepted_everywhere(probe, key, "alice", "vip_pro")
    for record in (probe.key_record(key), probe.key_record_by_digest(stored)):
        assert record is not None
        assert (record.key_id, record.account_name, record.plan) == (
            MOVED_KEY_ID,
            "alice",
            "vip_pro",
        )
        assert record.key_hash == stored
    # The forged row is a real row, found by its own hash only (nobody holds a key for it).
    forged_record = probe.key_record_by_digest(forged)
    assert forged_record is not None
    assert (forged_record.key_id, forged_record.account_name) == (forged_id, "mallory")
    guess = near_miss(probe.pepper, stored, 2, tokens.new_key)
    refused_everywhere(probe, guess)


# -- the constant-time re-check on its own ------------------------------------------------------


def lax_lookups(probe: Probe, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the directory's queries match on the first 2 hash characters, as a careless index
    or collation could: only the constant-time re-check of the stored hash is left."""
    directory = probe.directory

    def load_key(digest: str) -> KeyRecord | None:
        statement = (
            select(ApiKey, Account).join(Account).where(ApiKey.key_hash.startswith(digest[:2]))
        )
        return directory._load_one(statement, directory._key_record)

    def load_session(digest: str) -> SessionRecord | None:
        statement = (
            select(Session, Account).join(Account).where(Session.token_hash.startswith(digest[:2]))
        )
        return directory._load_one(statement, directory._session_record)

    monkeypatch.setattr(directory, "_load_key", load_key)
    monkeypatch.setattr(directory, "_load_session", load_session)
    directory.forget()


def test_hash_recheck_refuses_a_key_row_a_lax_lookup_returned(
    probe: Probe, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the query returns another key's row, the re-check of its hash refuses the caller."""
    probe.account("alice", "vip_pro")
    key = probe.key("alice")
    guess = near_miss(probe.pepper, probe.digest(key), 2, tokens.new_key)
    lax_lookups(probe, monkeypatch)

    refused_everywhere(probe, guess)
    assert probe.key_record(guess) is None
    accepted_everywhere(probe, key, "alice", "vip_pro")  # the lax query does find real keys


def test_hash_recheck_refuses_a_session_row_a_lax_lookup_returned(
    probe: Probe, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the query returns another session's row, the re-check makes the caller a guest."""
    probe.account("ursula", "user")
    token = probe.session("ursula")
    guess = near_miss(probe.pepper, probe.digest(token), 2, tokens.new_session_token)
    lax_lookups(probe, monkeypatch)

    assert probe.plan_with_cookie(guess) == "guest"
    assert probe.session_record(guess) is None
    assert probe.plan_with_cookie(token) == "user"


def test_same_hash_is_false_for_every_one_character_difference() -> None:
    """``same_hash`` is true for equal hashes only: any changed digit or case makes it false."""
    digest = tokens.keyed_hash(b"pepper-for-this-test", "pbk_" + "A" * 43)
    assert tokens.same_hash(digest, tokens.keyed_hash(b"pepper-for-this-test", "pbk_" + "A" * 43))
    for position in range(len(digest)):
        assert not tokens.same_hash(digest, flipped(digest, position)), position
    assert not tokens.same_hash(digest, digest.upper())
    assert not tokens.same_hash(digest, digest[:-1])


# -- malformed values never reach the database --------------------------------------------------


def test_malformed_keys_and_tokens_are_refused_without_a_query(probe: Probe) -> None:
    """Malformed keys get 401 and malformed cookies are guests, without one SQL statement."""
    # A well-formed unknown key does send a query at the end: the counter works.
    probe.account("alice", "vip_pro")
    probe.key("alice")
    statements: list[str] = []

    def count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(statement)

    with probe.app.app_context():
        engine = db.engine
    event.listen(engine, "before_cursor_execute", count)
    try:
        refusal = (401, "invalid_key")
        for value in MALFORMED:
            expected = expected_answers(refusal, refusal, refusal)
            if value == "" or " " in value:
                # As a Bearer token, nothing or a space is a malformed header instead.
                for name in ("verify bearer", "latest bearer", "stream bearer"):
                    expected[name] = (401, "malformed_authorization")
            assert probe.answers(value) == expected, value
            assert probe.key_record(value) is None
        for token in MALFORMED_SESSIONS:
            assert probe.plan_with_cookie(token) == "guest", token
            assert probe.session_record(token) is None
        assert statements == []

        refused_everywhere(probe, "pbk_" + "Q" * 43)
        assert statements, "the statement counter saw no lookup of a well-formed key"
    finally:
        event.remove(engine, "before_cursor_execute", count)
